package views

import (
	gocontext "context"
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"idemwork/kernel"
	tctx "idemwork/tui/context"
)

// Demo is the guided blocked_external walk-through (SPEC §7), one kernel step per keypress
// (kernel.BlockedExternalDemo, the same steps `idemwork demo blocked-external` runs), each
// followed by its checks against the database.
type Demo struct {
	ctx   *tctx.ProgramContext
	w, h  int
	demo  *kernel.BlockedExternalDemo
	keys  string // the demo's key prefix
	busy  bool
	steps []kernel.DemoStep
	err   string
	req   int
}

type demoStepMsg struct {
	req  int
	step kernel.DemoStep
	err  error
}

var (
	keyDemoNext  = key.NewBinding(key.WithKeys("n", "enter"), key.WithHelp("n/enter", "next step"))
	keyDemoReset = key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "restart"))
)

// NewDemo returns the Demo view.
func NewDemo(ctx *tctx.ProgramContext) *Demo {
	v := &Demo{ctx: ctx}
	v.reset()
	return v
}

func (v *Demo) reset() {
	v.keys = "demo-ui-" + strings.ToLower(FreshKey()[4:])
	v.demo, v.steps, v.err, v.busy = nil, nil, "", false
	if v.ctx.Kernel != nil {
		v.demo = v.ctx.Kernel.NewBlockedExternalDemo(v.ctx.Owner, v.keys)
	}
}

// Title names the view.
func (v *Demo) Title() string { return "Demo" }

// Init does nothing: the demo waits for the user.
func (v *Demo) Init() tea.Cmd { return nil }

func (v *Demo) next() tea.Cmd {
	if v.busy || v.demo == nil || v.demo.Done() {
		return nil
	}
	if v.ctx.ReadOnly() {
		return status("read-only session: the demo writes, so it does not run here", true)
	}
	v.busy = true
	v.req++
	req, d := v.req, v.demo // Next runs off the Update goroutine; busy keeps it to one at a time
	return query(func(ctx gocontext.Context) tea.Msg {
		step, err := d.Next(ctx)
		return demoStepMsg{req: req, step: step, err: err}
	})
}

// Update handles messages.
func (v *Demo) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case demoStepMsg:
		if msg.req != v.req {
			return nil
		}
		v.busy = false
		if msg.err != nil {
			v.err = errText(msg.err)
			return nil
		}
		v.err = ""
		v.steps = append(v.steps, msg.step)
		return func() tea.Msg { return tctx.DataChangedMsg{} }
	case tctx.OwnerChangedMsg:
		if !v.busy {
			v.reset()
		}
	case tea.KeyMsg:
		switch {
		case key.Matches(msg, keyDemoNext):
			return v.next()
		case key.Matches(msg, keyDemoReset):
			if !v.busy {
				v.reset()
			}
		}
	}
	return nil
}

// SetSize sets the drawing area.
func (v *Demo) SetSize(w, h int) { v.w, v.h = w, h }

// View renders the view.
func (v *Demo) View() string {
	s := v.ctx.Styles
	out := []string{s.Title.Render("blocked_external, guided") + s.Subtle.Render(" · owner "+safe(v.ctx.Owner)+" · keys "+safe(v.keys)+":…")}
	for i, st := range v.steps {
		out = append(out, "", s.Bold.Render(fmt.Sprintf("step %d · %s", i+1, st.Step)))
		for _, n := range st.Notes {
			out = append(out, "  "+safe(n))
		}
		for _, c := range st.Checks {
			if c.OK {
				out = append(out, s.Success.Render("  ✓ ")+safe(c.Text))
			} else {
				out = append(out, s.Danger.Render("  ✗ ")+safe(c.Text))
			}
		}
	}
	out = append(out, "")
	switch {
	case v.err != "":
		out = append(out, s.Danger.Render(v.err))
	case v.busy:
		out = append(out, s.Subtle.Render("running…"))
	case v.demo == nil:
		out = append(out, s.Subtle.Render("the demo needs a database"))
	case !v.demo.Done():
		n := v.demo.StepsDone()
		out = append(out, s.Highlight.Render(fmt.Sprintf("next (n): step %d · %s", n+1, kernel.BlockedExternalSteps[n])))
	default:
		out = append(out, s.Success.Render("done."), s.Subtle.Render("Executions and Audit show the rows; x restarts with new keys. The replacement is the outbox: COMMITMENT F02 commits PENDING + an outbox message (see Outbox)."))
	}
	if len(out) > v.h {
		out = out[len(out)-v.h:]
	}
	return fitBlock(strings.Join(out, "\n"), v.w, v.h)
}

// ShortHelp is the footer help.
func (v *Demo) ShortHelp() []key.Binding { return []key.Binding{keyDemoNext, keyDemoReset} }

// FullHelp is the ? help.
func (v *Demo) FullHelp() [][]key.Binding { return [][]key.Binding{{keyDemoNext, keyDemoReset}} }

// Capturing is false.
func (v *Demo) Capturing() bool { return false }

// SetFilter does nothing here.
func (v *Demo) SetFilter(string) {}

// Selection is the demo's record id.
func (v *Demo) Selection() string {
	if len(v.steps) > 0 && v.steps[0].Record != nil {
		return v.steps[0].Record.ID
	}
	return ""
}
