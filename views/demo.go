package views

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
)

// Demo tells the whole story of SPEC §7 in three parts: the blocked_external walk-through (a
// direct provider call fails closed), the outbox walk-through that replaces it (queue, replay,
// deliver, retry, crash, FAILED), and the two modes side by side, read from the rows the two
// runs left. Each walk-through runs one kernel step per keypress — the same steps `idemwork demo
// blocked-external` and `idemwork demo outbox` run — each followed by its claims, checked
// against the database. Text wraps to the pane and scrolls; nothing is cut.
type Demo struct {
	ctx  *uictx.ProgramContext
	src  DemoRunner
	w, h int
	part int

	blocked      BlockedWalk
	blockedKeys  string
	blockedSteps []model.DemoStep
	outbox       OutboxWalk
	outboxSteps  []model.DemoStep
	compare      *model.ModeComparison
	errs         [demoParts]string

	busy bool
	req  int
	pane scrollPane
	// offsets keeps each part's scroll position; shown is the part the pane holds.
	offsets [demoParts]int
	shown   int
	// stepAt is the first content line of each step shown, so a new step scrolls into view.
	stepAt []int
}

// The Demo view's parts.
const (
	partBlocked = iota
	partOutbox
	partCompare
	demoParts
)

var demoPartNames = [demoParts]string{"blocked_external", "outbox instead", "side by side"}

type demoStepMsg struct {
	req  int
	part int
	step model.DemoStep
	err  error
}

type demoCompareMsg struct {
	req int
	cmp model.ModeComparison
	err error
}

// DemoRunner starts the Demo view's walk-throughs (package demo's, as `idemwork demo` runs them)
// and sets the two modes side by side from the rows their requests left.
type DemoRunner interface {
	// NewBlockedExternalDemo starts the blocked_external walk-through with keys under keyPrefix.
	NewBlockedExternalDemo(owner, keyPrefix string) BlockedWalk
	// NewOutboxDemo starts the outbox walk-through with keys under keyPrefix (its record is
	// reused by later runs), delivering with the session's worker settings.
	NewOutboxDemo(owner, keyPrefix string) (OutboxWalk, error)
	CompareModes(ctx context.Context, owner, blockedKey, outboxKey string) (model.ModeComparison, error)
}

// BlockedWalk is the blocked_external walk-through; PublishKey is its feature run's key.
type BlockedWalk interface {
	walk
	PublishKey() string
}

// OutboxWalk is the outbox walk-through; NotifyKey(n) is its n-th feature run's key.
type OutboxWalk interface {
	walk
	NotifyKey(n int) string
}

// demoKeyPrefix is where the Demo view's outbox walk-through keeps its keys (as `idemwork demo
// outbox` does, its record is reused by later runs).
const demoKeyPrefix = "demo-outbox"

// NewDemo returns the Demo view.
func NewDemo(ctx *uictx.ProgramContext, src DemoRunner) *Demo {
	v := &Demo{ctx: ctx, src: src}
	v.resetBlocked()
	v.resetOutbox()
	return v
}

func (v *Demo) resetBlocked() {
	v.blockedKeys = "demo-ui-" + strings.ToLower(FreshKey()[4:])
	v.blocked, v.blockedSteps, v.errs[partBlocked] = nil, nil, ""
	if v.src != nil {
		v.blocked = v.src.NewBlockedExternalDemo(v.ctx.Owner, v.blockedKeys)
	}
	v.compare = nil
}

func (v *Demo) resetOutbox() {
	v.outbox, v.outboxSteps, v.errs[partOutbox] = nil, nil, ""
	v.compare = nil
	if v.src == nil {
		return
	}
	d, err := v.src.NewOutboxDemo(v.ctx.Owner, demoKeyPrefix)
	if err != nil {
		v.errs[partOutbox] = errText(err)
		return
	}
	v.outbox = d
}

// Title names the view.
func (v *Demo) Title() string { return "Demo" }

// Init does nothing: the demo waits for the user.
func (v *Demo) Init() tea.Cmd { return nil }

// walk is the step runner of a walk-through part.
type walk interface {
	Done() bool
	StepsDone() int
	Next(context.Context) (model.DemoStep, error)
}

func (v *Demo) walk(part int) (walk, []string) {
	switch part {
	case partBlocked:
		if v.blocked != nil {
			return v.blocked, model.BlockedExternalSteps
		}
	case partOutbox:
		if v.outbox != nil {
			return v.outbox, model.OutboxSteps
		}
	}
	return nil, nil
}

func (v *Demo) next() tea.Cmd {
	if v.busy {
		return nil
	}
	if v.part == partCompare {
		return v.loadCompare()
	}
	d, _ := v.walk(v.part)
	if d == nil || d.Done() {
		return nil
	}
	if v.ctx.ReadOnly() {
		return status("the demo writes, so it does not run here: "+v.ctx.ReadOnlyMessage(), true)
	}
	v.busy = true
	v.req++
	v.layout(false)
	req, part := v.req, v.part // Next runs off the Update goroutine; busy keeps it to one at a time
	return query(func(ctx context.Context) tea.Msg {
		step, err := d.Next(ctx)
		return demoStepMsg{req: req, part: part, step: step, err: err}
	})
}

// compareKeys are the two requests the comparison reads, once both walk-throughs ran them.
func (v *Demo) compareKeys() (string, string, bool) {
	if v.blocked == nil || v.outbox == nil || v.blocked.StepsDone() < 2 || v.outbox.StepsDone() < 2 {
		return "", "", false
	}
	return v.blocked.PublishKey(), v.outbox.NotifyKey(1), true
}

func (v *Demo) loadCompare() tea.Cmd {
	b, o, ok := v.compareKeys()
	if !ok || v.busy {
		return nil
	}
	v.busy = true
	v.req++
	v.layout(false)
	req, k, owner := v.req, v.src, v.ctx.Owner
	return query(func(ctx context.Context) tea.Msg {
		c, err := k.CompareModes(ctx, owner, b, o)
		return demoCompareMsg{req: req, cmp: c, err: err}
	})
}

func (v *Demo) switchTo(part int) tea.Cmd {
	v.part = (part + demoParts) % demoParts
	v.layout(false)
	if v.part == partCompare {
		return v.loadCompare()
	}
	return nil
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
			v.errs[msg.part] = errText(msg.err)
			v.layout(false)
			return nil
		}
		v.errs[msg.part] = ""
		if msg.part == partBlocked {
			v.blockedSteps = append(v.blockedSteps, msg.step)
		} else {
			v.outboxSteps = append(v.outboxSteps, msg.step)
		}
		v.compare = nil // the rows moved on; the comparison is read again when shown
		v.layout(true)
		return func() tea.Msg { return uictx.DataChangedMsg{} }
	case demoCompareMsg:
		if msg.req != v.req {
			return nil
		}
		v.busy = false
		if msg.err != nil {
			v.errs[partCompare] = errText(msg.err)
		} else {
			v.errs[partCompare], v.compare = "", &msg.cmp
		}
		v.layout(false)
	case uictx.OwnerChangedMsg:
		if !v.busy {
			v.resetBlocked()
			v.resetOutbox()
			v.layout(false)
		}
	case tea.MouseMsg:
		v.pane.Wheel(msg)
	case tea.KeyMsg:
		switch {
		case key.Matches(msg, v.ctx.Keys.Demo.Next):
			return v.next()
		case key.Matches(msg, v.ctx.Keys.Demo.Reset):
			if !v.busy {
				switch v.part {
				case partBlocked:
					v.resetBlocked()
				case partOutbox:
					v.resetOutbox()
				}
				v.layout(false)
			}
		case key.Matches(msg, v.ctx.Keys.Demo.Blocked):
			return v.switchTo(partBlocked)
		case key.Matches(msg, v.ctx.Keys.Demo.Outbox):
			return v.switchTo(partOutbox)
		case key.Matches(msg, v.ctx.Keys.Demo.Compare):
			return v.switchTo(partCompare)
		case key.Matches(msg, v.ctx.Keys.Demo.PrevPart):
			return v.switchTo(v.part - 1)
		case key.Matches(msg, v.ctx.Keys.Demo.NextPart):
			return v.switchTo(v.part + 1)
		default:
			v.pane.Scroll(&v.ctx.Keys, msg)
		}
	}
	return nil
}

// SetSize sets the drawing area.
func (v *Demo) SetSize(w, h int) {
	v.w, v.h = w, h
	v.pane.SetSize(w, max(3, h-demoChromeLines))
	v.layout(false)
}

// ShortHelp is the footer help: the walk-throughs write, so a read-only session has no next step.
func (v *Demo) ShortHelp() []key.Binding {
	k := v.ctx.Keys.Demo
	if v.ctx.ReadOnly() {
		return []key.Binding{k.Blocked, k.Outbox, k.Compare}
	}
	return []key.Binding{k.Next, k.Blocked, k.Outbox, k.Compare, k.Reset}
}

// FullHelp is the ? help.
func (v *Demo) FullHelp() [][]key.Binding {
	k := v.ctx.Keys
	steps := []key.Binding{k.Demo.Next, k.Demo.Reset}
	if v.ctx.ReadOnly() {
		steps = nil
	}
	return [][]key.Binding{steps, {k.Demo.Blocked, k.Demo.Outbox, k.Demo.Compare, k.Demo.PrevPart, k.Demo.NextPart},
		{k.List.Up, k.List.Down, k.List.PgUp, k.List.PgDown, k.List.Top, k.List.Bottom, k.Pane.Page}}
}

// Capturing is false.
func (v *Demo) Capturing() bool { return false }

// Selection is the shown walk-through's record id, or the comparison as JSON.
func (v *Demo) Selection() string {
	steps := v.blockedSteps
	switch v.part {
	case partOutbox:
		steps = v.outboxSteps
	case partCompare:
		if v.compare != nil {
			b, _ := json.Marshal(v.compare)
			return string(b)
		}
		return ""
	}
	if len(steps) > 0 && steps[0].Record != nil {
		return steps[0].Record.ID
	}
	return ""
}
