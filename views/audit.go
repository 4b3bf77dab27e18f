package views

import (
	"context"
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
)

// auditQuery reads an Audit search: an action prefix (actions are upper case), or "key:" and a
// key prefix.
func auditQuery(q string) model.AuditQuery {
	field, v := searchField(q, "action", "action", "key")
	if field == "key" {
		return model.AuditQuery{KeyPrefix: v}
	}
	return model.AuditQuery{ActionPrefix: strings.ToUpper(v)}
}

func describeAudit(q string) string {
	a := auditQuery(q)
	if a.KeyPrefix != "" {
		return "key starts with " + termsafe.Quote(a.KeyPrefix) + " (key order)"
	}
	return "action starts with " + termsafe.Quote(a.ActionPrefix)
}

// AuditReader reads pages of the owner's audit events for the Audit view.
type AuditReader interface {
	Audit(ctx context.Context, q model.AuditQuery) ([]model.AuditEvent, string, error)
}

// NewAudit lists the owner's audit events, newest first, with the idempotency key each
// carries; enter jumps to the record, K to the key; / searches by action or key prefix.
func NewAudit(ctx *uictx.ProgramContext, src AuditReader) View {
	v := &listView[model.AuditEvent]{ctx: ctx, title: "Audit", keys: []key.Binding{ctx.Keys.List.Open, ctx.Keys.List.ToKey},
		hint: "action prefix (RECORD_P, FEATURE_), or key:PREFIX"}
	v.list.table.Columns = []Column{{Title: "WHEN", Width: 14}, {Title: "ACTION", Width: 22}, {Title: "MODULE", Width: 10, Optional: true},
		{Title: "RECORD", Width: 12, Optional: true}, {Title: "REV", Width: 4, Optional: true}, {Title: "KEY", Min: 16}}
	v.list.fetch = func(ctx context.Context, owner, query, cursor string, reverse bool) ([]model.AuditEvent, string, error) {
		q := auditQuery(query)
		q.Owner, q.Limit, q.Cursor, q.Reverse = owner, pageSize, cursor, reverse
		return src.Audit(ctx, q)
	}
	v.list.reversible = true
	v.list.id = func(a model.AuditEvent) string { return a.ID }
	v.list.describe = describeAudit
	v.list.toRow = func(a model.AuditEvent) Row {
		r := Row{Cells: []string{stamp(a.At), a.Action, a.ModuleCode, shortID(deref(a.RecordID), 12), derefInt(a.Revision), deref(a.IdempotencyKey)}}
		if strings.HasSuffix(a.Action, "_BLOCKED") {
			r.Style = &ctx.Styles.Warning
		}
		return r
	}
	v.heading = func() string {
		return ctx.Styles.Title.Render("Audit events") + ctx.Styles.Subtle.Render(fmt.Sprintf(" of %s, newest first · %s", safe(ctx.Owner), v.list.summary()))
	}
	v.onKey = func(msg tea.KeyMsg, a *model.AuditEvent) tea.Cmd {
		switch {
		case a == nil:
		case key.Matches(msg, ctx.Keys.List.Open) && a.RecordID != nil:
			return jump(uictx.JumpRecord, a.ModuleCode, *a.RecordID)
		case key.Matches(msg, ctx.Keys.List.ToKey) && a.IdempotencyKey != nil:
			return jump(uictx.JumpKey, "", *a.IdempotencyKey)
		case key.Matches(msg, ctx.Keys.List.ToKey):
			return status("this event carries no idempotency key", true)
		}
		return nil
	}
	v.selection = func(a model.AuditEvent) string { return a.ID }
	return searchableList[model.AuditEvent]{v}
}
