package views

import (
	gocontext "context"
	"encoding/json"
	"fmt"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"idemwork/store"
	tctx "idemwork/tui/context"
)

var (
	keyDeliver  = key.NewBinding(key.WithKeys("d"), key.WithHelp("d", "run the delivery worker once"))
	keyFailNext = key.NewBinding(key.WithKeys("f"), key.WithHelp("f", "provider fails next 3 calls"))
)

type outboxRunMsg struct {
	text string
	err  error
}

// NewOutbox lists the owner's outbox messages — what the controlled outbox will deliver instead
// of a direct provider call — and runs the delivery worker on demand (outside any business
// transaction), so retries, backoff and settlement can be watched on real rows.
func NewOutbox(ctx *tctx.ProgramContext) View {
	v := &listView[store.OutboxMessage]{ctx: ctx, title: "Outbox", keys: []key.Binding{keyDeliver, keyFailNext, keyOpen}}
	v.list.table.Columns = []Column{{Title: "CREATED", Width: 14}, {Title: "STATUS", Width: 9}, {Title: "TRY", Width: 3},
		{Title: "PROVIDER", Width: 9}, {Title: "EXECUTION", Width: 12}, {Title: "NEXT", Width: 10}, {Title: "LAST ERROR", Min: 8}}
	v.list.fetch = func(ctx gocontext.Context, db *store.DB, owner, _, cursor string) ([]store.OutboxMessage, string, error) {
		return db.OutboxPage(ctx, owner, pageSize, cursor)
	}
	v.list.toRow = func(m store.OutboxMessage) Row {
		next := ""
		if m.Status == "PENDING" {
			next = ago(ctx.Now(), m.NextAttemptAt)
		}
		r := Row{Cells: []string{stamp(m.CreatedAt), m.Status, fmt.Sprint(m.Attempts), m.Provider, shortID(m.ExecutionID, 12), next, deref(m.LastError)}}
		switch m.Status {
		case "PENDING":
			r.Style = &ctx.Styles.Warning
		case "FAILED":
			r.Style = &ctx.Styles.Danger
		}
		return r
	}
	v.heading = func() string {
		return ctx.Styles.Title.Render("Outbox") + ctx.Styles.Subtle.Render(fmt.Sprintf(" of %s · %s · d delivers due messages, f makes the provider fail", ctx.Owner, v.list.summary()))
	}
	v.onKey = func(msg tea.KeyMsg, m *store.OutboxMessage) tea.Cmd {
		switch {
		case key.Matches(msg, keyDeliver):
			if ctx.ReadOnly() || ctx.Outbox == nil {
				return status("read-only session: the delivery worker writes, so it does not run here", true)
			}
			w := ctx.Outbox
			return query(func(c gocontext.Context) tea.Msg {
				rep, err := w.RunOnce(c, 50)
				return outboxRunMsg{text: fmt.Sprintf("delivery pass: %d claimed, %d delivered, %d retried, %d failed", rep.Claimed, rep.Delivered, rep.Retried, rep.Failed), err: err}
			})
		case key.Matches(msg, keyFailNext):
			if ctx.Provider != nil {
				ctx.Provider.FailNext(3)
				return status("the simulated provider will fail its next 3 calls", false)
			}
		case key.Matches(msg, keyOpen) && m != nil:
			var ref struct {
				RecordID string `json:"recordId"`
			}
			if json.Unmarshal(m.PayloadRef, &ref) == nil && ref.RecordID != "" {
				return jump(tctx.JumpRecord, "", ref.RecordID)
			}
		}
		return nil
	}
	v.selection = func(m store.OutboxMessage) string { return m.ID }
	return &outboxView{listView: v}
}

// outboxView adds the worker's result messages to the list.
type outboxView struct{ *listView[store.OutboxMessage] }

func (v *outboxView) Update(msg tea.Msg) tea.Cmd {
	if m, ok := msg.(outboxRunMsg); ok {
		if m.err != nil {
			return status(errText(m.err), true)
		}
		return tea.Batch(status(m.text, false), func() tea.Msg { return tctx.DataChangedMsg{} })
	}
	return v.listView.Update(msg)
}
