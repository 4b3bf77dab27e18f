package tui_test

import (
	"bytes"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"

	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/tui"
)

// golden runs the real program at 120×40 on the fixed data set, sends keys, waits for want on
// screen, and compares the final screen with testdata/<name>.golden (go test -update rewrites).
func goldenScreen(t *testing.T, keys []tea.Msg, want string) {
	t.Helper()
	b := tuitest.New(t)
	tuitest.SeedFixed(t, b)
	m := tui.New(b.Ctx, b.Backend)
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 40))
	first := "Groceries"
	if len(keys) == 0 {
		first = want // the output is read once: wait for everything at the first look
	}
	teatest.WaitFor(t, tm.Output(), func(out []byte) bool { return bytes.Contains(out, []byte(first)) },
		teatest.WithDuration(20*time.Second))
	if len(keys) == 0 {
		want = ""
	}
	for _, k := range keys {
		tm.Send(k)
		time.Sleep(100 * time.Millisecond)
	}
	if want != "" {
		teatest.WaitFor(t, tm.Output(), func(out []byte) bool { return bytes.Contains(out, []byte(want)) },
			teatest.WithDuration(20*time.Second))
	}
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*tui.Model)
	golden.RequireEqual(t, []byte(final.View()))
}

func TestGoldenRecords(t *testing.T) {
	goldenScreen(t, nil, "Meeting notes")
}

func TestGoldenRecordDiff(t *testing.T) {
	goldenScreen(t, []tea.Msg{key("G"), key("enter"), key("2")}, "+ payload.items[2]")
}

func TestGoldenKeyDetailShowsDrift(t *testing.T) {
	goldenScreen(t, []tea.Msg{key("2"), key("G"), key("enter")}, "drift of 1 revision")
}

func TestGoldenExecutionsHighlightBlocked(t *testing.T) {
	goldenScreen(t, []tea.Msg{key("3")}, "blocked_external")
}
