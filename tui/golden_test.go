package tui_test

import (
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/tuitest"
)

// goldenScreen runs the workbench at 120×40 on the fixed data set, presses keys — each drained
// to the end of the work it sets off, no sleeps — checks want is on screen, and compares the
// screen with testdata/<name>.golden (go test -update rewrites).
func goldenScreen(t *testing.T, keys []tea.Msg, want string) {
	t.Helper()
	m, b := newModel(t, 120, 40)
	tuitest.SeedFixed(t, b)
	tuitest.Drain(t, tuitest.Updater(m), m.Init())
	for _, k := range keys {
		tuitest.Drain(t, tuitest.Updater(m), cmdOf(m.Update(k)))
	}
	screen := m.View()
	require.Contains(t, screen, want)
	golden.RequireEqual(t, []byte(screen))
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
