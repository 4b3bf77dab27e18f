package views

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
)

// Verify shows `idemwork verify --owner <current owner>`: every invariant of the stored rows with
// its count and examples. It runs when the view is opened, on r, and when the owner or the data
// changes while it is open; it only reads (one read-only snapshot), so it runs read-only too. A
// run has no deadline of its own (an owner with a million audit events takes a while): it shows
// its progress — rows checked of an estimate — and ctrl+x cancels it.
type Verify struct {
	ctx    *uictx.ProgramContext
	src    InvariantChecker
	w, h   int
	active bool
	busy   bool
	req    int
	owner  string
	rep    *model.InvariantReport
	at     time.Time // when the shown report's check began (the workbench clock)
	err    string
	lines  []string // the report, rendered once per result
	offset int
	// cancel stops the running check; progress is how far it is.
	cancel   context.CancelFunc
	progress model.VerifyProgress
}

type verifyMsg struct {
	req int
	rep model.InvariantReport
	at  time.Time
	err error
}

// verifyProgressMsg is how far a running check is; ch brings the next one.
type verifyProgressMsg struct {
	req int
	p   model.VerifyProgress
	ch  <-chan tea.Msg
}

// listen waits for the running check's next message (progress, or its end).
func listen(ch <-chan tea.Msg) tea.Cmd {
	return func() tea.Msg {
		m, ok := <-ch
		if !ok {
			return nil
		}
		if p, isProgress := m.(verifyProgressMsg); isProgress {
			p.ch = ch
			return p
		}
		return m
	}
}

// NewVerify returns the Verify view.
// InvariantChecker checks SPEC §8's invariants over the owner's rows for the Verify view.
type InvariantChecker interface {
	VerifyInvariants(ctx context.Context, opts model.VerifyOptions) (model.InvariantReport, error)
}

// NewVerify returns the Verify view, checking through src (nil: the view says it needs a
// database).
func NewVerify(ctx *uictx.ProgramContext, src InvariantChecker) *Verify {
	return &Verify{ctx: ctx, src: src}
}

// Title names the view.
func (v *Verify) Title() string { return "Verify" }

// Init does nothing: the check runs when the view is opened.
func (v *Verify) Init() tea.Cmd { return nil }

// SetActive runs the check when the view comes on screen.
func (v *Verify) SetActive(on bool) tea.Cmd {
	v.active = on
	if on && (v.rep == nil || v.owner != v.ctx.Owner) {
		return v.run()
	}
	return nil
}

func (v *Verify) run() tea.Cmd {
	if v.src == nil {
		v.err = "verify needs a database"
		return nil
	}
	if v.cancel != nil {
		v.cancel() // a run for an older owner or state: its result would be dropped anyway
	}
	v.busy, v.err, v.progress = true, "", model.VerifyProgress{}
	v.req++
	req, k, owner, at := v.req, v.src, v.ctx.Owner, v.ctx.Now()
	c, cancel := context.WithCancel(context.Background())
	v.cancel = cancel
	// The check pushes its progress here without waiting: a screen behind skips a count. Its
	// result always gets through (the channel is drained by listen until it closes).
	ch := make(chan tea.Msg, 1)
	go func() {
		defer close(ch)
		defer cancel()
		rep, err := k.VerifyInvariants(c, model.VerifyOptions{Owner: owner, Progress: func(p model.VerifyProgress) {
			select {
			case ch <- verifyProgressMsg{req: req, p: p}:
			default:
			}
		}})
		ch <- verifyMsg{req: req, rep: rep, at: at, err: err}
	}()
	return listen(ch)
}

// Update handles messages.
func (v *Verify) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case verifyProgressMsg:
		if msg.req == v.req && v.busy {
			v.progress = msg.p
		}
		return listen(msg.ch)
	case verifyMsg:
		if msg.req != v.req {
			return nil // an older run, or one for another owner
		}
		v.busy, v.cancel = false, nil
		if errors.Is(msg.err, context.Canceled) {
			v.err, v.rep, v.lines = fmt.Sprintf("cancelled after %s rows (reading %s): no verdict · r runs it again", count(v.progress.Checked), v.progress.Table), nil, nil
			return nil
		}
		if msg.err != nil {
			v.err, v.rep, v.lines = errText(msg.err), nil, nil
			return nil
		}
		v.rep, v.owner, v.at = &msg.rep, msg.rep.Owner, msg.at
		v.lines = v.render(msg.rep)
		v.offset = min(v.offset, max(len(v.lines)-1, 0))
	case uictx.OwnerChangedMsg:
		v.rep, v.lines, v.offset = nil, nil, 0
		if v.active {
			return v.run()
		}
	case uictx.DataChangedMsg:
		if v.active && !v.busy {
			return v.run()
		}
		v.rep = nil // stale: run again when opened
	case tea.KeyMsg:
		switch {
		case key.Matches(msg, v.ctx.Keys.Verify.Cancel):
			if v.busy && v.cancel != nil {
				v.cancel()
				return status("cancelling the check…", false)
			}
		case key.Matches(msg, v.ctx.Keys.List.Refresh):
			if !v.busy {
				return v.run()
			}
		case key.Matches(msg, v.ctx.Keys.List.Down):
			v.scroll(1)
		case key.Matches(msg, v.ctx.Keys.List.Up):
			v.scroll(-1)
		case key.Matches(msg, v.ctx.Keys.List.PgDown):
			v.scroll(v.body())
		case key.Matches(msg, v.ctx.Keys.List.PgUp):
			v.scroll(-v.body())
		case key.Matches(msg, v.ctx.Keys.List.Top):
			v.offset = 0
		case key.Matches(msg, v.ctx.Keys.List.Bottom):
			v.scroll(len(v.lines))
		}
	case tea.MouseMsg:
		switch msg.Button {
		case tea.MouseButtonWheelDown:
			v.scroll(3)
		case tea.MouseButtonWheelUp:
			v.scroll(-3)
		}
	}
	return nil
}

// body is how many report lines fit under the heading.
func (v *Verify) body() int { return max(v.h-2, 1) }

func (v *Verify) scroll(d int) {
	v.offset = max(min(v.offset+d, len(v.lines)-v.body()), 0)
}

// render lays the report out as lines: one per invariant, its examples under it.
func (v *Verify) render(rep model.InvariantReport) []string {
	s := v.ctx.Styles
	var out []string
	if rep.OK {
		out = append(out, s.Success.Render(fmt.Sprintf("✓ every invariant holds for %s", terminalSafe(rep.Owner)))+s.Subtle.Render(" "+asOf(v.at)))
	} else {
		out = append(out, s.Danger.Render(fmt.Sprintf("✗ %d violation(s) for %s", rep.Violations, terminalSafe(rep.Owner)))+s.Subtle.Render(" "+asOf(v.at)))
	}
	out = append(out, s.Subtle.Render(fmt.Sprintf("read %d keys, %d records, %d revisions, %d executions, %d outbox messages, %d audit events, %d keys' lives in %d pages (%.0f ms)",
		rep.Checked["keys"], rep.Checked["records"], rep.Checked["revisions"], rep.Checked["executions"], rep.Checked["outboxMessages"],
		rep.Checked["auditEvents"], rep.Checked["keyLives"], rep.Batches, rep.TookMs)), "")
	if n := rep.Unattributed["revisions"] + rep.Unattributed["executions"] + rep.Unattributed["auditEvents"] + rep.Unattributed["outboxMessages"] + rep.Unattributed["reviews"]; n > 0 {
		out = append(out, s.Subtle.Render(fmt.Sprintf("%d rows written before migration 0004 record no transaction: judged by their key alone (not violations)", n)), "")
	}
	for _, inv := range rep.Invariants {
		mark, st := "✓", s.Success
		if inv.Count > 0 {
			mark, st = "✗", s.Danger
		}
		out = append(out, st.Render(fmt.Sprintf("%s %-26s %5d", mark, inv.Name, inv.Count))+"  "+s.Subtle.Render(inv.Description))
		// Examples wrap, so what is wrong stays readable at 80 columns.
		width := max(v.w-6, 20)
		for _, ex := range inv.Examples {
			for _, l := range strings.Split(ansi.Wrap(terminalSafe(ex.String()), width, " "), "\n") {
				out = append(out, "      "+l)
			}
		}
		if more := inv.Count - int64(len(inv.Examples)); more > 0 {
			out = append(out, s.Subtle.Render(fmt.Sprintf("      … and %d more (idemwork verify --owner %s --json)", more, terminalSafe(rep.Owner))))
		}
	}
	return out
}

// terminalSafe escapes control characters (ESC, newlines, C1 controls) so stored text cannot
// move the cursor or split a line.
func terminalSafe(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// SetSize sets the drawing area.
func (v *Verify) SetSize(w, h int) {
	if w != v.w && v.rep != nil {
		v.w = w
		v.lines = v.render(*v.rep)
	}
	v.w, v.h = w, h
	v.scroll(0)
}

// View renders the view.
func (v *Verify) View() string {
	s := v.ctx.Styles
	head := s.Title.Render("Verify") + s.Subtle.Render(" · owner "+terminalSafe(v.ctx.Owner)+" · the invariants of its stored rows · r runs again")
	var body []string
	switch {
	case v.busy:
		p := v.progress
		done := "verifying… " + count(p.Checked) + " rows checked"
		if pct := p.Percent(); pct >= 0 {
			done = fmt.Sprintf("verifying… %s of ~%s rows checked (%d%%)", count(p.Checked), count(p.Estimate), pct)
		}
		if p.Table != "" {
			done += " · reading " + p.Table
		}
		body = []string{s.Bold.Render(done), s.Subtle.Render("ctrl+x cancels · every row of the owner, in keyset pages, in one read-only snapshot, with no time limit")}
	case v.err != "":
		body = []string{s.Danger.Render(v.err)}
	case v.rep == nil:
		body = []string{s.Subtle.Render("r runs the check")}
	default:
		end := min(v.offset+v.body(), len(v.lines))
		body = v.lines[v.offset:end]
	}
	return fitBlock(head+"\n\n"+strings.Join(body, "\n"), v.w, v.h)
}

// ShortHelp is the footer help.
func (v *Verify) ShortHelp() []key.Binding {
	if v.busy {
		return []key.Binding{v.ctx.Keys.Verify.Cancel}
	}
	return []key.Binding{v.ctx.Keys.List.Refresh, v.ctx.Keys.List.Down, v.ctx.Keys.List.Up}
}

// FullHelp is the ? help.
func (v *Verify) FullHelp() [][]key.Binding {
	return [][]key.Binding{{v.ctx.Keys.List.Refresh, v.ctx.Keys.Verify.Cancel}, {v.ctx.Keys.List.Up, v.ctx.Keys.List.Down, v.ctx.Keys.List.PgUp, v.ctx.Keys.List.PgDown, v.ctx.Keys.List.Top, v.ctx.Keys.List.Bottom}}
}

// count writes n with thousands separators.
func count(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Capturing is false: the view has no text field.
func (v *Verify) Capturing() bool { return false }

// Selection is the first example's record or key, for y.
func (v *Verify) Selection() string {
	if v.rep == nil {
		return ""
	}
	for _, inv := range v.rep.Invariants {
		for _, ex := range inv.Examples {
			for _, id := range []string{ex.Record, ex.Key, ex.Execution} {
				if id != "" {
					return id
				}
			}
		}
	}
	return ""
}
