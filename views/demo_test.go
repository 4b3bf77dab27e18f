package views_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/views"
)

func runes(s string) tea.KeyMsg { return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)} }

// drain runs a command and feeds what it returns back to update, until nothing is left (a
// DataChangedMsg is dropped: no other view listens here).
func drain(t *testing.T, update func(tea.Msg) tea.Cmd, cmd tea.Cmd) {
	t.Helper()
	for i := 0; cmd != nil && i < 20; i++ {
		msg := cmd()
		switch m := msg.(type) {
		case uictx.DataChangedMsg, uictx.StatusMsg, nil:
			return
		case tea.BatchMsg:
			for _, c := range m {
				drain(t, update, c)
			}
			return
		}
		cmd = update(msg)
	}
}

// squash drops whitespace and the pane's borders, so text wrapped over lines (with hanging
// indents) compares with the text it came from.
func squash(s string) string {
	s = ansi.Strip(s)
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\n', '\t', '┃', '│':
			return -1
		}
		return r
	}, s)
}

// readWhole scrolls the Demo view's pane from top to bottom at w×h, requiring each screen to be
// exactly the view's block with no line cut short, and returns the pane's content as drawn,
// line by line (each drawn line at its place in the content, so text running over a page break
// reads on).
func readWhole(t *testing.T, v *views.Demo, w, h int) string {
	t.Helper()
	v.Update(runes("g"))
	content := map[int]string{}
	last := 0
	for i := 0; i < 200; i++ {
		screen := v.View()
		lines := strings.Split(screen, "\n")
		require.Len(t, lines, h)
		for _, l := range lines {
			require.LessOrEqual(t, ansi.StringWidth(l), w, "wider than the view: %q", l)
			// fitBlock marks what it had to cut with "…" at the line's end: nothing may be.
			require.False(t, strings.HasSuffix(strings.TrimRight(ansi.Strip(l), " ┃"), "…"), "a line was cut: %q", l)
		}
		// The pane: its top border, its title, then its body up to the bottom border.
		top := -1
		for i, l := range lines {
			if strings.HasPrefix(ansi.Strip(l), "┏") {
				top = i
				break
			}
		}
		require.NotEqual(t, -1, top, "the pane is drawn:\n%s", screen)
		off, bottom := v.PaneAt()
		for i, l := range lines[top+2:] {
			if strings.HasPrefix(ansi.Strip(l), "┗") {
				break
			}
			content[off+i] = ansi.Strip(l)
			last = max(last, off+i)
		}
		if bottom {
			var b strings.Builder
			for i := 0; i <= last; i++ {
				line, ok := content[i]
				require.True(t, ok, "content line %d was never drawn", i)
				b.WriteString(line + "\n")
			}
			return b.String()
		}
		v.Update(tea.KeyMsg{Type: tea.KeyPgDown})
	}
	t.Fatal("the pane never reached its bottom")
	return ""
}

// requireWholeSteps requires every step's title, notes, claims and evidence on the screens read.
func requireWholeSteps(t *testing.T, read string, steps []model.DemoStep) {
	t.Helper()
	got := squash(read)
	for _, s := range steps {
		require.Contains(t, got, squash(views.Safe(s.Step)))
		for _, n := range s.Notes {
			require.Contains(t, got, squash(views.Safe(n)), "note of %q", s.Step)
		}
		for _, c := range s.Checks {
			require.True(t, c.OK, "%s: %s", c.Claim, c.Text)
			require.Contains(t, got, squash("✓ "+views.Safe(c.Claim)+" — "+views.Safe(c.Text)), "check of %q", s.Step)
		}
	}
}

// The sizes the Demo view gets in an 80×24 and a 120×40 terminal (beside the navigator, between
// the header and the footer).
var demoSizes = [][2]int{{63, 21}, {103, 37}}

func TestBothWalkThroughsReadStartToEndWithNothingCut(t *testing.T) {
	t.Parallel()
	for _, size := range demoSizes {
		b := tuitest.New(t)
		v := views.NewDemo(b.Ctx, b.Backend.Demo)
		v.SetSize(size[0], size[1])
		require.Contains(t, ansi.Strip(v.View()), "next (n): step 1/3")
		for range model.BlockedExternalSteps {
			drain(t, v.Update, v.Update(runes("n")))
		}
		require.Len(t, blockedOf(v), 3)
		require.Contains(t, ansi.Strip(v.View()), "done · o: the outbox that replaces it")
		requireWholeSteps(t, readWhole(t, v, size[0], size[1]), blockedOf(v))
		require.Contains(t, squash(readWhole(t, v, size[0], size[1])), squash("BLOCKED (outcome EXECUTED): execution"),
			"step 2 says BLOCKED, not a bare EXECUTED")

		drain(t, v.Update, v.Update(runes("o")))
		require.Contains(t, ansi.Strip(v.View()), "▸o outbox instead", "the shown part is marked")
		for range model.OutboxSteps {
			drain(t, v.Update, v.Update(runes("n")))
		}
		require.Len(t, outboxOf(v), len(model.OutboxSteps), "%s", errOf(v, 1))
		read := readWhole(t, v, size[0], size[1])
		requireWholeSteps(t, read, outboxOf(v))
		require.Contains(t, ansi.Strip(v.View()), "done · c: both modes side by side")
		require.Positive(t, b.Clock.Offset(), "the walk-through moved the workbench clock, as its notes say")
	}
}

func TestANewStepScrollsIntoView(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	v := views.NewDemo(b.Ctx, b.Backend.Demo)
	v.SetSize(63, 21)
	drain(t, v.Update, v.Update(runes("o")))
	for range 5 {
		drain(t, v.Update, v.Update(runes("n")))
	}
	require.Contains(t, squash(v.View()), squash("step 5 · "+model.OutboxSteps[4]), "the step just run is on screen")
	v.Update(runes("g"))
	require.NotContains(t, squash(v.View()), squash("step 5 · "))
	drain(t, v.Update, v.Update(runes("b")))
	drain(t, v.Update, v.Update(runes("o")))
	require.Equal(t, 0, first(v.PaneAt()), "each part keeps its own scroll position")
}

func TestTheComparisonIsFilledFromTheRowsOfTheTwoRuns(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	v := views.NewDemo(b.Ctx, b.Backend.Demo)
	v.SetSize(103, 37)
	drain(t, v.Update, v.Update(runes("c")))
	require.Contains(t, ansi.Strip(v.View()), "run both walk-throughs to their step 2 first")
	require.Nil(t, v.Comparison())

	for range 2 {
		drain(t, v.Update, v.Update(runes("n"))) // in the comparison, n only reads: nothing runs
	}
	require.Empty(t, blockedOf(v))
	drain(t, v.Update, v.Update(runes("b")))
	for range 2 {
		drain(t, v.Update, v.Update(runes("n")))
	}
	drain(t, v.Update, v.Update(runes("o")))
	for range 2 {
		drain(t, v.Update, v.Update(runes("n")))
	}
	drain(t, v.Update, v.Update(runes("c")))
	require.NotNil(t, v.Comparison(), errOf(v, 2))
	screen := squash(readWhole(t, v, 103, 37))
	blocked, queued := blockedOf(v)[1].Execution.ID, outboxOf(v)[1].Execution.ID
	for _, want := range []string{"blocked_external", "outbox", blocked, queued, "BLOCKED (outcome EXECUTED)", "PENDING (outcome EXECUTED)",
		"no outbox message", "audit_event FEATURE_F02_BLOCKED", "audit_event FEATURE_F02_QUEUED", "nothing, ever", "still PENDING"} {
		require.Contains(t, screen, squash(want))
	}

	// The outbox run goes on; the comparison reads the rows again.
	drain(t, v.Update, v.Update(runes("o")))
	for range 2 {
		drain(t, v.Update, v.Update(runes("n")))
	}
	drain(t, v.Update, v.Update(runes("c")))
	require.Contains(t, v.Selection(), queued, "y copies the comparison")
	for _, size := range demoSizes {
		// Every cell reads whole in its column, at 80 columns too.
		v.SetSize(size[0], size[1])
		left, right := columns(readWhole(t, v, size[0], size[1]))
		c := v.Comparison()
		for _, side := range []struct {
			col string
			s   model.ModeSide
		}{{left, c.Blocked}, {right, c.Outbox}} {
			for _, text := range append(append([]string{}, side.s.Committed...), side.s.Client, side.s.Replay, side.s.Provider, "key "+side.s.Key) {
				require.Contains(t, side.col, squash(text), "at %v", size)
			}
		}
		require.Contains(t, right, squash("now DELIVERED"))
		require.Contains(t, right, squash("DELIVERED after 1 attempt"))
		require.Contains(t, left, squash("nothing, ever: no outbox message exists"))
	}
}

// columns splits the side-by-side lines read into the left and the right column, each squashed
// (a screen repeated while scrolling only repeats text).
func columns(read string) (string, string) {
	var left, right strings.Builder
	for _, l := range strings.Split(ansi.Strip(read), "\n") {
		if a, b, ok := strings.Cut(l, " │ "); ok {
			left.WriteString(a + "\n")
			right.WriteString(b + "\n")
		}
	}
	return squash(left.String()), squash(right.String())
}

func TestTheDemoIsRefusedInAReadOnlySession(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		readOnly bool
		gate     uictx.WriteGate
		reason   string
	}{
		{true, writable, "READ_ONLY: this session is read-only"},
		{false, standby, "READ_ONLY: this is a hot standby; writes go to the primary"},
	} {
		ctx := plainCtx()
		ctx.Conn.ReadOnly, ctx.Writes = c.readOnly, c.gate
		v := views.NewDemo(ctx, walkNever{t})
		v.SetSize(63, 21)
		msg := v.Update(runes("n"))()
		require.Equal(t, uictx.StatusMsg{Text: "the demo writes, so it does not run here: " + ctx.ReadOnlyMessage(), Error: true}, msg)
		require.Contains(t, msg.(uictx.StatusMsg).Text, c.reason, "the session's own reason")
		require.Empty(t, blockedOf(v))
	}
}

// walkNever is a DemoRunner whose walk-throughs must not take a step.
type walkNever struct{ t *testing.T }

func (w walkNever) NewBlockedExternalDemo(string, string) views.BlockedWalk { return w }
func (w walkNever) NewOutboxDemo(string, string) (views.OutboxWalk, error)  { return w, nil }
func (w walkNever) CompareModes(context.Context, string, string, string) (model.ModeComparison, error) {
	w.t.Error("the comparison was read")
	return model.ModeComparison{}, nil
}
func (w walkNever) Done() bool             { return false }
func (w walkNever) StepsDone() int         { return 0 }
func (w walkNever) PublishKey() string     { return "never:publish" }
func (w walkNever) NotifyKey(n int) string { return fmt.Sprintf("never:notify-%d", n) }
func (w walkNever) Next(context.Context) (model.DemoStep, error) {
	w.t.Error("a demo step ran in a read-only session")
	return model.DemoStep{}, nil
}

// queuedNotification is a workbench whose owner alice has one PENDING outbox message (a
// COMMITMENT's F02 notify).
func queuedNotification(t *testing.T) (tuitest.Bundle, model.WriteResult) {
	t.Helper()
	b := tuitest.New(t)
	ctx := context.Background()
	c, err := b.Kernel.Create(ctx, model.CreateInput{Owner: "alice", Module: "COMMITMENT", Title: "call", Payload: []byte(`{"status":"OPEN"}`)})
	require.NoError(t, err)
	res, err := b.Kernel.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: "COMMITMENT", RecordID: c.Record.ID, FeatureID: "F02", Key: "n-1"})
	require.NoError(t, err)
	return b, res
}

func TestTheOutboxViewDrivesAMessageToFailedWithinMaxAttempts(t *testing.T) {
	t.Parallel()
	b, res := queuedNotification(t)
	ctx := context.Background()
	b.Ctx.NowFunc = nil // NEXT counts from the workbench clock the worker uses
	v := views.NewOutbox(b.Ctx, b.Backend.Outbox)
	v.SetSize(63, 21)
	drain(t, v.Update, v.Init())
	p := b.Provider

	// Failures stack: f adds, 0 clears, F sets a number (prefilled with max attempts).
	v.Update(runes("f"))
	v.Update(runes("f"))
	require.Equal(t, 2, p.PendingFailures(), "f twice is two failures, not a reset to a fixed count")
	require.Contains(t, ansi.Strip(v.View()), "provider: fails the next 2")
	v.Update(runes("0"))
	require.Zero(t, p.PendingFailures())
	v.Update(runes("F"))
	require.True(t, v.Capturing(), "F takes a number: digits and q go to it")
	require.Contains(t, ansi.Strip(v.View()), "fail the next 5")
	v.Update(tea.KeyMsg{Type: tea.KeyBackspace})
	v.Update(runes("x")) // not a digit: ignored
	v.Update(runes("7"))
	v.Update(tea.KeyMsg{Type: tea.KeyEnter})
	require.False(t, v.Capturing())
	require.Equal(t, 7, p.PendingFailures())
	v.Update(runes("F"))
	v.Update(tea.KeyMsg{Type: tea.KeyBackspace})
	v.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("1x2"), Paste: true}) // pasted: its digits only
	v.Update(tea.KeyMsg{Type: tea.KeyEnter})
	require.Equal(t, 12, p.PendingFailures())
	v.Update(runes("F"))
	v.Update(tea.KeyMsg{Type: tea.KeyBackspace})
	v.Update(tea.KeyMsg{Type: tea.KeyBackspace})
	v.Update(runes("7"))
	v.Update(tea.KeyMsg{Type: tea.KeyEnter})
	require.Equal(t, 7, p.PendingFailures())
	v.Update(runes("F"))
	v.Update(tea.KeyMsg{Type: tea.KeyEnter}) // the prefill: max attempts
	require.Equal(t, b.Outbox.MaxAttempts(), p.PendingFailures())

	last := b.Outbox.MaxAttempts()
	for attempt := 1; attempt <= last; attempt++ {
		drain(t, v.Update, v.Update(runes("d")))
		drain(t, v.Update, v.Update(uictx.DataChangedMsg{}))
		var status string
		var next time.Time
		require.NoError(t, b.DB.Pool.QueryRow(ctx, `SELECT status, next_attempt_at FROM outbox_message WHERE execution_id = $1`, res.Execution.ID).Scan(&status, &next))
		screen := ansi.Strip(v.View())
		require.Contains(t, screen, fmt.Sprintf("attempts %d/%d", attempt, last))
		require.Contains(t, screen, "last error: provider unavailable (simulated)")
		if attempt < last {
			require.Equal(t, "PENDING", status)
			require.Contains(t, screen, "(in ", "NEXT counts down to the retry")
			b.Clock.Advance(next.Sub(b.Clock.Now()) + time.Millisecond)
			v.Update(views.TickMsg{})
			require.Contains(t, ansi.Strip(v.View()), " due ", "due once its backoff passed")
			continue
		}
		require.Equal(t, "FAILED", status, "FAILED after max attempts, reached from the Outbox view")
		require.Contains(t, screen, "FAILED")
	}
}

func TestTheCrashSwitchRedeliversWithOneEffect(t *testing.T) {
	t.Parallel()
	b, res := queuedNotification(t)
	ctx := context.Background()
	b.Ctx.NowFunc = nil
	v := views.NewOutbox(b.Ctx, b.Backend.Outbox)
	v.SetSize(103, 37)
	drain(t, v.Update, v.Init())
	id := res.Execution.ID

	v.Update(runes("c"))
	require.True(t, b.Crash.On())
	require.Contains(t, ansi.Strip(v.View()), "crash between call and settle: ON")
	drain(t, v.Update, v.Update(runes("d")))
	drain(t, v.Update, v.Update(uictx.DataChangedMsg{}))
	screen := ansi.Strip(v.View())
	require.Contains(t, screen, "claimed, not settled; the lease hides it")
	require.Contains(t, squash(screen), squash("the row: 1 call to provider notifier with idempotency id "+id+" · not settled yet"))
	require.Contains(t, squash(screen), squash("this session's simulated provider: 1 call for it, its one effect held"))
	var status string
	require.NoError(t, b.DB.Pool.QueryRow(ctx, `SELECT status FROM outbox_message WHERE execution_id = $1`, id).Scan(&status))
	require.Equal(t, "PENDING", status, "the provider delivered; the rows do not know")

	v.Update(runes("c"))
	require.False(t, b.Crash.On())
	b.Clock.Advance(b.Outbox.Lease() + time.Second)
	drain(t, v.Update, v.Update(runes("d")))
	drain(t, v.Update, v.Update(uictx.DataChangedMsg{}))
	require.NoError(t, b.DB.Pool.QueryRow(ctx, `SELECT status FROM outbox_message WHERE execution_id = $1`, id).Scan(&status))
	require.Equal(t, "DELIVERED", status)
	require.Equal(t, 2, b.Provider.Calls(id))
	require.Equal(t, 1, b.Provider.Delivered(), "redelivered under the same idempotency id: one effect")
	require.Contains(t, squash(v.View()), squash("the row: 2 calls to provider notifier with idempotency id "+id+" · DELIVERED"))
	require.Contains(t, squash(v.View()), squash("this session's simulated provider: 2 calls for it, its one effect held"))
}

func blockedOf(v *views.Demo) []model.DemoStep { b, _ := v.Steps(); return b }
func outboxOf(v *views.Demo) []model.DemoStep  { _, o := v.Steps(); return o }

// errOf is the error line of part 0 (blocked_external), 1 (outbox) or 2 (the comparison).
func errOf(v *views.Demo, part int) string {
	b, o, c := v.Errs()
	return [...]string{b, o, c}[part]
}

func first(a int, _ bool) int { return a }
