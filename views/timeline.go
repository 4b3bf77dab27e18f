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

// NewTimeline is the owner's merged history — audit events, executions, keys and revisions —
// newest first, one keyset page at a time, for support staff tracing what happened.
func NewTimeline(ctx *tctx.ProgramContext) View {
	v := &listView[store.Event]{ctx: ctx, title: "Timeline", keys: []key.Binding{keyOpen, keyToKey}}
	v.list.table.Columns = []Column{{Title: "WHEN", Width: 14}, {Title: "KIND", Width: 9}, {Title: "WHAT", Min: 16}, {Title: "RECORD", Width: 12}, {Title: "KEY", Width: 22}}
	v.list.fetch = func(ctx gocontext.Context, db *store.DB, owner, cursor string) ([]store.Event, string, error) {
		return db.History(ctx, owner, pageSize, cursor, true)
	}
	v.list.toRow = func(e store.Event) Row {
		var what []string
		for _, p := range []*string{e.Action, e.Operation, e.FeatureID, e.Mode, e.Status} {
			if p != nil && *p != "" {
				what = append(what, *p)
			}
		}
		if e.Kind == "revision" && e.Revision != nil {
			what = append(what, fmt.Sprintf("revision %d", *e.Revision))
		}
		r := Row{Cells: []string{stamp(e.At), e.Kind, strings.Join(what, " "), shortID(deref(e.RecordID), 12), deref(e.Key)}}
		if e.Status != nil && (*e.Status == "BLOCKED" || *e.Status == "PROCESSING") {
			r.Style = &ctx.Styles.Warning
		}
		return r
	}
	v.heading = func() string {
		return ctx.Styles.Title.Render("Timeline") + ctx.Styles.Subtle.Render(fmt.Sprintf(" of %s, newest first · %s", ctx.Owner, v.list.summary()))
	}
	v.onKey = func(msg tea.KeyMsg, e *store.Event) tea.Cmd {
		switch {
		case e == nil:
		case key.Matches(msg, keyOpen) && e.Kind == "key" && e.Key != nil, key.Matches(msg, keyToKey) && e.Key != nil:
			return jump(tctx.JumpKey, "", *e.Key)
		case key.Matches(msg, keyOpen) && e.RecordID != nil:
			return jump(tctx.JumpRecord, deref(e.ModuleCode), *e.RecordID)
		}
		return nil
	}
	v.selection = func(e store.Event) string { return e.ID }
	return v
}
