package views

import (
	gocontext "context"
	"fmt"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"idemwork/store"
	tctx "idemwork/tui/context"
)

// NewExecutions lists the owner's feature executions, newest first; BLOCKED (a direct
// external call that failed closed) stands out, and enter jumps to the record.
func NewExecutions(ctx *tctx.ProgramContext) View {
	v := &listView[store.Execution]{ctx: ctx, title: "Executions", keys: []key.Binding{keyOpen}}
	v.list.table.Columns = []Column{{Title: "WHEN", Width: 14}, {Title: "MODULE", Width: 10}, {Title: "RECORD", Width: 12},
		{Title: "FEAT", Width: 4}, {Title: "MODE", Width: 16}, {Title: "STATUS", Width: 9}, {Title: "KEY", Min: 6}}
	v.list.fetch = func(ctx gocontext.Context, db *store.DB, owner, cursor string) ([]store.Execution, string, error) {
		return db.ExecutionPage(ctx, owner, pageSize, cursor)
	}
	v.list.toRow = func(e store.Execution) Row {
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
		return s.Title.Render("Feature executions") + s.Subtle.Render(fmt.Sprintf(" of %s · %s · ", ctx.Owner, v.list.summary())) +
			s.Warning.Render(fmt.Sprintf("%d BLOCKED", blocked)) + s.Subtle.Render(" (failed closed: no provider was called)")
	}
	v.onKey = func(msg tea.KeyMsg, e *store.Execution) tea.Cmd {
		if key.Matches(msg, keyOpen) && e != nil {
			return jump(tctx.JumpRecord, e.ModuleCode, e.RecordID)
		}
		return nil
	}
	v.selection = func(e store.Execution) string { return e.ID }
	return v
}
