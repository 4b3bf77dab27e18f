package views

import (
	"context"
	"fmt"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
)

// executionQuery reads an Executions search: a key prefix, or "record:" and a record id prefix.
func executionQuery(q string) model.ExecutionQuery {
	field, v := searchField(q, "key", "key", "record", "id")
	if field == "key" {
		return model.ExecutionQuery{KeyPrefix: v}
	}
	return model.ExecutionQuery{RecordPrefix: v}
}

func describeExecutions(q string) string {
	e := executionQuery(q)
	if e.RecordPrefix != "" {
		return "record id starts with " + termsafe.Quote(e.RecordPrefix) + " (newest record first)"
	}
	return "key starts with " + termsafe.Quote(e.KeyPrefix) + " (key order)"
}

// ExecutionReader reads pages of the owner's feature executions for the Executions view.
type ExecutionReader interface {
	Executions(ctx context.Context, q model.ExecutionQuery) ([]model.Execution, string, error)
}

// NewExecutions lists the owner's feature executions, newest first; BLOCKED (a direct
// external call that failed closed) stands out; enter jumps to the record, K to the key.
func NewExecutions(ctx *uictx.ProgramContext, src ExecutionReader) View {
	v := &listView[model.Execution]{ctx: ctx, title: "Executions", keys: []key.Binding{ctx.Keys.List.Open, ctx.Keys.List.ToKey},
		hint: "key prefix, or record:ID-PREFIX"}
	v.list.table.Columns = []Column{{Title: "WHEN", Width: 14}, {Title: "MODULE", Width: 10, Optional: true}, {Title: "RECORD", Width: 12, Optional: true},
		{Title: "FEAT", Width: 4}, {Title: "MODE", Width: 16}, {Title: "STATUS", Width: 9}, {Title: "KEY", Min: 6}}
	v.list.id = func(e model.Execution) string { return e.ID }
	v.list.fetch = func(ctx context.Context, owner, query, cursor string, _ bool) ([]model.Execution, string, error) {
		q := executionQuery(query)
		q.Owner, q.Limit, q.Cursor = owner, pageSize, cursor
		return src.Executions(ctx, q)
	}
	v.list.describe = describeExecutions
	v.list.toRow = func(e model.Execution) Row {
		r := Row{Cells: []string{stamp(e.CreatedAt), e.ModuleCode, shortID(e.RecordID, 12), e.FeatureID, e.Mode, e.Status, deref(e.IdempotencyKey)}}
		switch e.Status {
		case "BLOCKED", "PENDING":
			r.Style = &ctx.Styles.Warning
		case "FAILED":
			r.Style = &ctx.Styles.Danger
		}
		return r
	}
	v.heading = func() string {
		s := ctx.Styles
		blocked := 0
		for _, e := range v.list.rows {
			if e.Status == "BLOCKED" {
				blocked++
			}
		}
		return s.Title.Render("Feature executions") + s.Subtle.Render(fmt.Sprintf(" of %s · %s · ", safe(ctx.Owner), v.list.summary())) +
			s.Warning.Render(fmt.Sprintf("%d BLOCKED", blocked)) + s.Subtle.Render(" (failed closed: no provider was called)")
	}
	v.onKey = func(msg tea.KeyMsg, e *model.Execution) tea.Cmd {
		switch {
		case e == nil:
		case key.Matches(msg, ctx.Keys.List.Open):
			return jump(uictx.JumpRecord, e.ModuleCode, e.RecordID)
		case key.Matches(msg, ctx.Keys.List.ToKey) && e.IdempotencyKey != nil:
			return jump(uictx.JumpKey, "", *e.IdempotencyKey)
		case key.Matches(msg, ctx.Keys.List.ToKey):
			return status("this execution ran without an idempotency key", true)
		}
		return nil
	}
	v.selection = func(e model.Execution) string { return e.ID }
	return searchableList[model.Execution]{v}
}
