package views

import (
	gocontext "context"
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"idemwork/store"
	tctx "idemwork/tui/context"
)

var keyToKey = key.NewBinding(key.WithKeys("K"), key.WithHelp("K", "open its key"))

// NewAudit lists the owner's audit events, newest first, with the idempotency key each
// carries; enter jumps to the record, K to the key.
func NewAudit(ctx *tctx.ProgramContext) View {
	v := &listView[store.AuditEvent]{ctx: ctx, title: "Audit", keys: []key.Binding{keyOpen, keyToKey}}
	v.list.table.Columns = []Column{{Title: "WHEN", Width: 14}, {Title: "ACTION", Width: 22}, {Title: "MODULE", Width: 10},
		{Title: "RECORD", Width: 12}, {Title: "REV", Width: 4}, {Title: "KEY", Min: 6}}
	v.list.fetch = func(ctx gocontext.Context, db *store.DB, owner, cursor string) ([]store.AuditEvent, string, error) {
		return db.AuditPage(ctx, owner, "", pageSize, cursor)
	}
	v.list.toRow = func(a store.AuditEvent) Row {
		r := Row{Cells: []string{stamp(a.At), a.Action, a.ModuleCode, shortID(deref(a.RecordID), 12), derefInt(a.Revision), deref(a.IdempotencyKey)}}
		if strings.HasSuffix(a.Action, "_BLOCKED") {
			r.Style = &ctx.Styles.Warning
		}
		return r
	}
	v.heading = func() string {
		return ctx.Styles.Title.Render("Audit events") + ctx.Styles.Subtle.Render(fmt.Sprintf(" of %s · %s", ctx.Owner, v.list.summary()))
	}
	v.onKey = func(msg tea.KeyMsg, a *store.AuditEvent) tea.Cmd {
		switch {
		case a == nil:
		case key.Matches(msg, keyOpen) && a.RecordID != nil:
			return jump(tctx.JumpRecord, a.ModuleCode, *a.RecordID)
		case key.Matches(msg, keyToKey) && a.IdempotencyKey != nil:
			return jump(tctx.JumpKey, "", *a.IdempotencyKey)
		case key.Matches(msg, keyToKey):
			return status("this event carries no idempotency key", true)
		}
		return nil
	}
	v.selection = func(a store.AuditEvent) string { return a.ID }
	return v
}
