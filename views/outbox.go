package views

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
)

// OutboxTools is what the Outbox view reads and drives: the owner's messages, the session's
// delivery worker, its simulated provider and its crash switch (Worker, Provider and Crash are
// nil where the session has none).
type OutboxTools struct {
	Messages OutboxReader
	Worker   OutboxWorker
	Provider SimulatedProvider
	Crash    CrashSwitch
}

// OutboxReader reads pages of the owner's outbox messages, newest first.
type OutboxReader interface {
	OutboxPage(ctx context.Context, owner string, limit int, cursor string) ([]model.OutboxMessage, string, error)
}

// OutboxWorker is the session's delivery worker.
type OutboxWorker interface {
	// Deliver runs one pass over the owner's due messages (at most limit), outside any
	// business transaction.
	Deliver(ctx context.Context, owner string, limit int) (OutboxPass, error)
	Settings() OutboxSettings
}

// OutboxPass is what one delivery pass did.
type OutboxPass struct {
	Claimed, Delivered, Retried, Failed int
	// Abandoned claims were left unsettled (the crash switch); Lost ones lost their lease.
	Abandoned, Lost int
}

// OutboxSettings are the worker's retry settings: each retry waits BaseBackoff doubling per
// attempt, ±JitterPercent; a claim is hidden for Lease; a message fails after MaxAttempts.
type OutboxSettings struct {
	MaxAttempts   int
	BaseBackoff   time.Duration
	JitterPercent int
	Lease         time.Duration
}

// SimulatedProvider is the session's in-memory provider, whose failures the view stacks.
type SimulatedProvider interface {
	FailNext(n int)
	AddFailures(n int) int
	PendingFailures() int
	Calls(idempotencyID string) int
	HasDelivered(idempotencyID string) bool
}

// CrashSwitch makes the worker crash between the provider call and the settle.
type CrashSwitch interface {
	Set(on bool)
	On() bool
}

type outboxRunMsg struct {
	text string
	err  error
}

// outboxDetailLines is how many lines the selected message's detail takes below the table.
const outboxDetailLines = 6

// NewOutbox lists the owner's outbox messages — what the controlled outbox delivers instead of
// a direct provider call — and is a demo tool for the delivery worker, which runs (outside any
// business transaction) on d over the owner's due messages: the simulated provider's failures
// stack (f adds one, F sets a number, 0 clears), so a message can be driven through its retries
// and backoffs to FAILED within max attempts; a switch makes the worker crash between the
// provider call and the settle, so the redelivery after the lease shows the provider
// deduplicating by the idempotency id. NEXT says when a message is due; the selected message's
// attempts, last error and what the provider saw of it are shown below the table.
func NewOutbox(ctx *uictx.ProgramContext, tools OutboxTools) View {
	v := &listView[model.OutboxMessage]{ctx: ctx, title: "Outbox", keys: []key.Binding{ctx.Keys.Outbox.Deliver, ctx.Keys.Outbox.FailOne, ctx.Keys.Outbox.FailSet, ctx.Keys.Outbox.FailClear, ctx.Keys.Outbox.Crash, ctx.Keys.List.Open}}
	ov := &outboxView{listView: v, tools: tools}
	v.list.table.Columns = []Column{{Title: "STATUS", Width: 9}, {Title: "TRY", Width: 5}, {Title: "NEXT", Width: 9},
		{Title: "EXECUTION", Width: 12}, {Title: "LAST ERROR", Min: 10}, {Title: "CREATED", Width: 8, Optional: true}}
	v.list.id = func(m model.OutboxMessage) string { return m.ID }
	v.list.fetch = func(ctx context.Context, owner, _, cursor string, _ bool) ([]model.OutboxMessage, string, error) {
		return tools.Messages.OutboxPage(ctx, owner, pageSize, cursor)
	}
	v.list.toRow = func(m model.OutboxMessage) Row {
		next := ""
		if m.Status == "PENDING" {
			next = dueIn(ctx.Now(), m.NextAttemptAt)
		}
		r := Row{Cells: []string{m.Status, ov.tries(m.Attempts), next, shortID(m.ExecutionID, 12), deref(m.LastError),
			m.CreatedAt.Local().Format("15:04:05")}}
		switch m.Status {
		case "PENDING":
			r.Style = &ctx.Styles.Warning
		case "FAILED":
			r.Style = &ctx.Styles.Danger
		}
		return r
	}
	v.heading = func() string {
		return ctx.Styles.Title.Render("Outbox") + ctx.Styles.Subtle.Render(" of "+safe(ctx.Owner)+" · "+v.list.summary())
	}
	v.onKey = ov.key
	v.selection = func(m model.OutboxMessage) string { return m.ID }
	return ov
}

// outboxView is the Outbox list with the worker's controls, the failure count being typed, and
// the selected message's detail.
type outboxView struct {
	*listView[model.OutboxMessage]
	tools   OutboxTools
	setting bool
	input   textinput.Model
}

// maxAttempts is the workbench worker's (0 when there is none).
func (v *outboxView) maxAttempts() int {
	if v.tools.Worker == nil {
		return 0
	}
	return v.tools.Worker.Settings().MaxAttempts
}

// tries is "2/5": attempts of max attempts.
func (v *outboxView) tries(n int) string {
	if m := v.maxAttempts(); m > 0 {
		return fmt.Sprintf("%d/%d", n, m)
	}
	return strconv.Itoa(n)
}

// dueIn says when a PENDING message is due: "due", "in 0.5 s", "in 4 s", "in 2m 5s".
func dueIn(now, at time.Time) string {
	d := at.Sub(now)
	switch {
	case d <= 0:
		return "due"
	case d < time.Second:
		return fmt.Sprintf("in %.1f s", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("in %d s", int(d.Round(time.Second).Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("in %dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return "in " + ago(now, at)[3:]
}

func (v *outboxView) key(msg tea.KeyMsg, m *model.OutboxMessage) tea.Cmd {
	ctx, tools := v.ctx, v.tools
	switch {
	case key.Matches(msg, v.ctx.Keys.Outbox.Deliver):
		if ctx.ReadOnly() {
			return status("the delivery worker writes, so it does not run here: "+ctx.ReadOnlyMessage(), true)
		}
		if tools.Worker == nil {
			return status("the delivery worker is not available in this session", true)
		}
		w, owner, next := tools.Worker, ctx.Owner, v.nextDue()
		return query(func(c context.Context) tea.Msg {
			rep, err := w.Deliver(c, owner, 50)
			return outboxRunMsg{text: passText(owner, rep, next, w.Settings().Lease), err: err}
		})
	case key.Matches(msg, v.ctx.Keys.Outbox.FailOne), key.Matches(msg, v.ctx.Keys.Outbox.FailClear):
		if tools.Provider == nil {
			return status("no simulated provider in this session", true)
		}
		if key.Matches(msg, v.ctx.Keys.Outbox.FailClear) {
			tools.Provider.FailNext(0)
		} else {
			tools.Provider.AddFailures(1)
		}
		return status(v.failText(), false)
	case key.Matches(msg, v.ctx.Keys.Outbox.FailSet):
		if tools.Provider == nil {
			return status("no simulated provider in this session", true)
		}
		v.setting = true
		v.input = newInput(strconv.Itoa(max(v.maxAttempts(), 1)), 4)
		v.input.Cursor.Style = ctx.Styles.Cursor
		v.input.CursorEnd()
		v.input.Focus()
		return textinput.Blink
	case key.Matches(msg, v.ctx.Keys.Outbox.Crash):
		if tools.Crash == nil {
			return status("this session's worker has no crash switch", true)
		}
		tools.Crash.Set(!tools.Crash.On())
		if tools.Crash.On() {
			return status("crash switch ON: a pass calls the provider, then dies before the settle", false)
		}
		return status("crash switch off: passes settle again", false)
	case key.Matches(msg, v.ctx.Keys.List.Open) && m != nil:
		var ref struct {
			RecordID string `json:"recordId"`
		}
		if json.Unmarshal(m.PayloadRef, &ref) == nil && ref.RecordID != "" {
			return jump(uictx.JumpRecord, "", ref.RecordID)
		}
	}
	return nil
}

// nextDue is the earliest next attempt of the loaded PENDING messages (zero when none).
func (v *outboxView) nextDue() time.Time {
	var at time.Time
	for _, m := range v.list.rows {
		if m.Status == "PENDING" && (at.IsZero() || m.NextAttemptAt.Before(at)) {
			at = m.NextAttemptAt
		}
	}
	return at
}

// passText says what one delivery pass did, and when nothing was due, when something will be.
func passText(owner string, rep OutboxPass, next time.Time, lease time.Duration) string {
	if rep.Claimed == 0 {
		s := "worker pass (" + safe(owner) + "): nothing was due"
		if !next.IsZero() {
			s += "; the next attempt is at " + next.Local().Format("15:04:05.0")
		}
		return s
	}
	parts := []string{fmt.Sprintf("%d claimed", rep.Claimed)}
	for _, c := range []struct {
		n    int
		what string
	}{{rep.Delivered, "delivered"}, {rep.Retried, "retried"}, {rep.Failed, "FAILED"},
		{rep.Abandoned, "crashed before the settle (lease " + lease.String() + ")"}, {rep.Lost, "lost the lease"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	s := "worker pass (" + safe(owner) + "): " + strings.Join(parts, " · ")
	return s
}

// failText is the simulated provider's state.
func (v *outboxView) failText() string {
	n := v.tools.Provider.PendingFailures()
	switch n {
	case 0:
		return "the provider delivers every call"
	case 1:
		return "the provider fails its next call"
	}
	s := fmt.Sprintf("the provider fails its next %d calls", n)
	if m := v.maxAttempts(); m > 0 && n >= m {
		s += fmt.Sprintf(": enough for FAILED (max %d attempts)", m)
	}
	return s
}

func (v *outboxView) Update(msg tea.Msg) tea.Cmd {
	// The tool lines follow the provider and the switch: the table gets what they leave.
	defer v.resize()
	switch m := msg.(type) {
	case outboxRunMsg:
		if m.err != nil {
			return status(errText(m.err), true)
		}
		return tea.Batch(status(m.text, false), func() tea.Msg { return uictx.DataChangedMsg{} })
	case tea.KeyMsg:
		if v.setting {
			return v.typeCount(m)
		}
	case tea.MouseMsg:
		return v.list.mouse(v.ctx, m, m.Y-v.headLines())
	}
	return v.listView.Update(msg)
}

// typeCount edits the number F asks for: enter sets it, esc keeps what was.
func (v *outboxView) typeCount(msg tea.KeyMsg) tea.Cmd {
	switch {
	case key.Matches(msg, v.ctx.Keys.Form.Cancel):
		v.setting = false
		return status("failures unchanged: "+v.failText(), false)
	case key.Matches(msg, v.ctx.Keys.Form.Enter):
		n, err := strconv.Atoi(strings.TrimSpace(v.input.Value()))
		if err != nil || n < 0 {
			return status("a number of calls, 0 or more", true)
		}
		v.setting = false
		v.tools.Provider.FailNext(n)
		return status(v.failText(), false)
	}
	if msg.Type == tea.KeyRunes {
		// Digits only, also out of runes typed fast or pasted in one piece.
		msg.Runes = slices.DeleteFunc(slices.Clone(msg.Runes), func(r rune) bool { return r < '0' || r > '9' })
		if len(msg.Runes) == 0 {
			return nil
		}
	} else if s := msg.String(); len(s) == 1 && (s[0] < '0' || s[0] > '9') {
		return nil
	}
	var cmd tea.Cmd
	v.input, cmd = v.input.Update(msg)
	return cmd
}

// Capturing is true while F's number is typed: digits and q go to it.
func (v *outboxView) Capturing() bool { return v.setting }

// SetSize leaves room for the tool lines and the detail.
func (v *outboxView) SetSize(w, h int) {
	v.w, v.h = w, h
	v.resize()
}

func (v *outboxView) resize() {
	if v.w > 0 {
		v.list.table.SetSize(v.w, max(3, v.h-v.headLines()-outboxDetailLines))
	}
}

// toolLines say how the worker and the provider are set.
func (v *outboxView) toolLines() []string {
	s := v.ctx.Styles
	if v.setting {
		return []string{s.Highlight.Render("fail the next ") + v.input.View() + s.Highlight.Render(" provider calls") +
			s.Subtle.Render(" · enter sets · esc keeps")}
	}
	var parts []string
	if p := v.tools.Provider; p != nil {
		n := p.PendingFailures()
		if n == 0 {
			parts = append(parts, "provider: delivers")
		} else {
			parts = append(parts, s.Warning.Render(fmt.Sprintf("provider: fails the next %d", n)))
		}
	}
	if c := v.tools.Crash; c != nil {
		if c.On() {
			parts = append(parts, s.Danger.Render("crash between call and settle: ON"))
		} else {
			parts = append(parts, "crash between call and settle: off")
		}
	}
	if w := v.tools.Worker; w != nil {
		o := w.Settings()
		parts = append(parts, s.Subtle.Render(fmt.Sprintf("max %d attempts · backoff %s doubling ±%d %% · lease %s", o.MaxAttempts,
			o.BaseBackoff, o.JitterPercent, o.Lease)))
	}
	return wrap(strings.Join(parts, " · "), v.w, 2)
}

func (v *outboxView) headLines() int { return 1 + len(v.toolLines()) }

// detailLines describe the selected message, wrapped to the width, most telling first: its
// state and attempts, its last error, what the provider saw, then its ids.
func (v *outboxView) detailLines() []string {
	s := v.ctx.Styles
	m := v.list.selected()
	if m == nil {
		return wrap(s.Subtle.Render("no message selected · a COMMITMENT's F02 notify queues one (in Records, a runs a feature; the Demo's outbox walk-through runs it too)"), v.w, 2)
	}
	when := ""
	switch m.Status {
	case "PENDING":
		when = " · next attempt " + m.NextAttemptAt.Local().Format("15:04:05.0") + " (" + dueIn(v.ctx.Now(), m.NextAttemptAt) + ")"
		if w := v.tools.Worker; w != nil && m.Attempts > 0 && m.NextAttemptAt.Sub(m.UpdatedAt) == w.Settings().Lease {
			when += ": claimed, not settled; the lease hides it"
		}
	case "DELIVERED", "FAILED":
		when = " · settled " + m.UpdatedAt.Local().Format("15:04:05.0")
	}
	out := wrap(s.Bold.Render(m.Status)+fmt.Sprintf(" · attempts %s%s", v.tries(m.Attempts), when), v.w, 2)
	if m.LastError != nil {
		out = append(out, wrap(s.Danger.Render("last error: ")+safe(*m.LastError), v.w, 2)...)
	} else {
		out = append(out, s.Subtle.Render("last error: none"))
	}
	// What the provider was asked, from the row (the Demo's walk-through reads the same row):
	// each attempt is one call with the message's idempotency id.
	out = append(out, wrap(s.Subtle.Render(providerText(*m)), v.w, 2)...)
	if p := v.tools.Provider; p != nil {
		calls := p.Calls(m.IdempotencyID)
		seen := "this session's simulated provider: " + plural(calls, "call", "calls") + " for it"
		if p.HasDelivered(m.IdempotencyID) {
			seen += ", its one effect held"
		}
		if calls < m.Attempts {
			seen += fmt.Sprintf(" (%d of the row's were another worker's: the Demo's walk-through, or idemwork outbox)", m.Attempts-calls)
		}
		out = append(out, wrap(s.Subtle.Render(seen), v.w, 2)...)
	}
	out = append(out, wrap(s.Subtle.Render(fmt.Sprintf("message %s · enter opens its record", safe(m.ID))), v.w, 2)...)
	return out
}

// View draws the heading, the tool line, the table and the selected message's detail.
func (v *outboxView) View() string {
	s := v.ctx.Styles
	head := v.list.heading(v.ctx, v.heading(), v.w)
	lines := append([]string{head}, v.toolLines()...)
	lines = append(lines, v.list.table.View(s, true))
	detail := v.detailLines()
	if len(detail) > outboxDetailLines {
		detail = detail[:outboxDetailLines]
	}
	lines = append(lines, detail...)
	return fitBlock(strings.Join(lines, "\n"), v.w, v.h)
}

// ShortHelp is the footer: the worker's d only where it may write.
func (v *outboxView) ShortHelp() []key.Binding {
	out := make([]key.Binding, 0, len(v.keys)+2)
	for _, b := range v.keys {
		if v.ctx.ReadOnly() && b.Help() == v.ctx.Keys.Outbox.Deliver.Help() {
			continue
		}
		out = append(out, b)
	}
	return append(out, v.ctx.Keys.List.Refresh, v.ctx.Keys.Global.Copy)
}

// providerText is what the provider was asked about one message, as its row records it.
func providerText(m model.OutboxMessage) string {
	what := "not settled yet"
	switch m.Status {
	case "DELIVERED":
		what = "DELIVERED"
	case "FAILED":
		what = "FAILED: the worker gave up"
	}
	return fmt.Sprintf("the row: %s to provider %s with idempotency id %s · %s", plural(m.Attempts, "call", "calls"),
		safe(m.Provider), safe(m.IdempotencyID), what)
}
