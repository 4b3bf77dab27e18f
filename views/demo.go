package views

import (
	gocontext "context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"idemwork/kernel"
	tctx "idemwork/tui/context"
)

// Demo is the guided blocked_external walk-through (SPEC §7), one step per keypress, each
// followed by a check of the rows it wrote: a MEM-001 record, its direct_external F02 failing
// closed (BLOCKED execution, revision unchanged, FEATURE_F02_BLOCKED audit), and a replay that
// returns the very same execution.
type Demo struct {
	ctx    *tctx.ProgramContext
	w, h   int
	step   int // steps done
	busy   bool
	prefix string
	lines  []demoLine
	record *kernel.WriteResult
	first  *kernel.WriteResult
	err    string
	req    int
}

type demoLine struct {
	ok   *bool // nil: narration; true/false: a check against the database
	text string
}

type demoStepMsg struct {
	req   int
	step  int
	res   *kernel.WriteResult
	lines []demoLine
	err   error
}

var (
	keyDemoNext  = key.NewBinding(key.WithKeys("n", "enter"), key.WithHelp("n/enter", "next step"))
	keyDemoReset = key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "restart"))
)

var demoSteps = []string{
	"Create a MEM-001 record (internal write: record, revision 1, audit, key)",
	"Run F02 publish: a direct_external feature, which must fail closed",
	"Replay F02 with the same Idempotency-Key",
}

// NewDemo returns the Demo view.
func NewDemo(ctx *tctx.ProgramContext) *Demo {
	return &Demo{ctx: ctx, prefix: "demo-ui-" + strings.ToLower(FreshKey()[4:])}
}

// Title names the view.
func (v *Demo) Title() string { return "Demo" }

// Init does nothing: the demo waits for the user.
func (v *Demo) Init() tea.Cmd { return nil }

func check(ok bool, format string, args ...any) demoLine {
	return demoLine{ok: &ok, text: fmt.Sprintf(format, args...)}
}

func say(format string, args ...any) demoLine { return demoLine{text: fmt.Sprintf(format, args...)} }

func (v *Demo) next() tea.Cmd {
	if v.busy || v.step >= len(demoSteps) {
		return nil
	}
	if v.ctx.ReadOnly() {
		return status("read-only session: the demo writes, so it does not run here", true)
	}
	v.busy = true
	v.req++
	req, step, k, owner, prefix := v.req, v.step, v.ctx.Kernel, v.ctx.Owner, v.prefix
	rec, first := v.record, v.first
	return query(func(ctx gocontext.Context) tea.Msg {
		db := k.DB()
		switch step {
		case 0:
			res, err := k.Create(ctx, kernel.CreateInput{Owner: owner, Module: kernel.ModuleMem, Key: prefix + ":create", Title: "Blocked external demo",
				Payload: json.RawMessage(`{"originalContent":"publish me","currentContent":"publish me"}`)})
			if err != nil {
				return demoStepMsg{req: req, step: step, err: err}
			}
			return demoStepMsg{req: req, step: step, res: &res, lines: []demoLine{
				say("%s: MEM-001 record %s at revision %d (key %s)", res.Outcome, res.Record.ID, res.Record.Revision, prefix+":create"),
				say("envelope %s — a reference, no content", compactJSON(res.Envelope)),
			}}
		case 1:
			in := kernel.FeatureInput{Owner: owner, Module: kernel.ModuleMem, RecordID: rec.Record.ID, FeatureID: "F02", Key: prefix + ":publish"}
			res, err := k.RunFeature(ctx, in)
			if err != nil {
				return demoStepMsg{req: req, step: step, err: err}
			}
			latest, err := db.LatestRecord(ctx, owner, kernel.ModuleMem, rec.Record.ID)
			if err != nil {
				return demoStepMsg{req: req, step: step, err: err}
			}
			audit, err := db.AuditForKey(ctx, owner, in.Key)
			if err != nil {
				return demoStepMsg{req: req, step: step, err: err}
			}
			var actions []string
			for _, a := range audit {
				actions = append(actions, a.Action)
			}
			e := res.Execution
			return demoStepMsg{req: req, step: step, res: &res, lines: []demoLine{
				say("%s: execution %s", res.Outcome, e.ID),
				check(e.Mode == "blocked_external", "execution.mode = %s", e.Mode),
				check(e.Status == "BLOCKED", "execution.status = %s (a persisted fact, not a success)", e.Status),
				check(latest.Revision == rec.Record.Revision, "record.revision in the database = %d (before the request: %d)", latest.Revision, rec.Record.Revision),
				check(len(actions) == 1 && actions[0] == "FEATURE_F02_BLOCKED", "audit events of this key: %s", strings.Join(actions, ", ")),
				say("no provider was called: a database rollback could never undo it"),
			}}
		default:
			in := kernel.FeatureInput{Owner: owner, Module: kernel.ModuleMem, RecordID: rec.Record.ID, FeatureID: "F02", Key: prefix + ":publish"}
			res, err := k.RunFeature(ctx, in)
			if err != nil {
				return demoStepMsg{req: req, step: step, err: err}
			}
			var execs int
			if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM feature_execution WHERE owner_id = $1 AND idempotency_key = $2`, owner, in.Key).Scan(&execs); err != nil {
				return demoStepMsg{req: req, step: step, err: err}
			}
			return demoStepMsg{req: req, step: step, res: &res, lines: []demoLine{
				check(res.Outcome == "REPLAYED", "outcome %s", res.Outcome),
				check(res.Execution.ID == first.Execution.ID, "the same execution %s, still %s", res.Execution.ID, res.Execution.Status),
				check(execs == 1, "feature_execution rows for this key in the database: %d", execs),
			}}
		}
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
		switch msg.step {
		case 0:
			v.record = msg.res
		case 1:
			v.first = msg.res
		}
		v.lines = append(v.lines, demoLine{text: fmt.Sprintf("step %d · %s", msg.step+1, demoSteps[msg.step])})
		v.lines = append(v.lines, msg.lines...)
		v.step++
		return func() tea.Msg { return tctx.DataChangedMsg{} }
	case tea.KeyMsg:
		switch {
		case key.Matches(msg, keyDemoNext):
			return v.next()
		case key.Matches(msg, keyDemoReset):
			*v = *NewDemo(v.ctx)
			v.SetSize(v.w, v.h)
		case key.Matches(msg, keyOpen):
		}
	}
	return nil
}

// SetSize sets the drawing area.
func (v *Demo) SetSize(w, h int) { v.w, v.h = w, h }

// View renders the view.
func (v *Demo) View() string {
	s := v.ctx.Styles
	out := []string{s.Title.Render("blocked_external, guided") + s.Subtle.Render(" · owner "+v.ctx.Owner+" · keys "+v.prefix+":…")}
	for _, l := range v.lines {
		switch {
		case l.ok == nil && strings.HasPrefix(l.text, "step "):
			out = append(out, "", s.Bold.Render(l.text))
		case l.ok == nil:
			out = append(out, "  "+l.text)
		case *l.ok:
			out = append(out, s.Success.Render("  ✓ ")+l.text)
		default:
			out = append(out, s.Danger.Render("  ✗ ")+l.text)
		}
	}
	out = append(out, "")
	switch {
	case v.err != "":
		out = append(out, s.Danger.Render(v.err))
	case v.busy:
		out = append(out, s.Subtle.Render("running…"))
	case v.step < len(demoSteps):
		out = append(out, s.Highlight.Render(fmt.Sprintf("next (n): step %d · %s", v.step+1, demoSteps[v.step])))
	default:
		out = append(out, s.Success.Render("done."), s.Subtle.Render("Executions and Audit show the rows; x restarts with new keys. The replacement is the outbox: COMMITMENT F02 commits PENDING + an outbox message (see Outbox)."))
	}
	lines := out
	if len(lines) > v.h {
		lines = lines[len(lines)-v.h:]
	}
	return fitBlock(strings.Join(lines, "\n"), v.w, v.h)
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
	if v.record != nil && v.record.Record != nil {
		return v.record.Record.ID
	}
	return ""
}
