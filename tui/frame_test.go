package tui_test

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"idemwork/internal/tuitest"
	"idemwork/tui/shared"
)

// screenLines is the frame as plain text, one string a line.
func screenLines(t *testing.T, view string, w, h int) []string {
	t.Helper()
	lines := strings.Split(ansi.Strip(view), "\n")
	require.Len(t, lines, h)
	for i, l := range lines {
		require.Equal(t, w, ansi.StringWidth(l), "line %d: %q", i, l)
	}
	return lines
}

// A status message longer than the line is wrapped over the lines it needs, the body giving
// them up while it shows: its reason and what to do, at its end, stay readable at 80 columns.
func TestAStatusLongerThanTheLineWrapsOntoMoreLinesAndIsNotCut(t *testing.T) {
	t.Parallel()
	m, b := newModel(t, 80, 24)
	tuitest.SeedFixed(t, b)
	settleModel(t, m, m.Init())
	notice := `demo data is not fully seeded: SNAPSHOT_INTEGRITY_VIOLATION: stored envelope carries an unknown field "unknownField" ` +
		`(the workbench opens without it; idemwork verify --owner alice names what is wrong)`
	m.Update(shared.StatusMsg{Text: notice, Error: true})
	lines := screenLines(t, m.View(), 80, 24)
	var status []string
	for _, l := range lines[len(lines)-3:] {
		status = append(status, strings.TrimSpace(l))
	}
	require.Equal(t, notice, strings.Join(status, " "), "the last three lines hold the whole message:\n%s", strings.Join(lines, "\n"))
	require.Contains(t, lines[len(lines)-4], "? help", "the footer's keys stay, above the message")
	require.Contains(t, lines[1], "Records of alice", "the body starts where it did")

	// Once it is gone, the body has its lines back.
	m.Update(shared.StatusMsg{Text: "copied x"})
	lines = screenLines(t, m.View(), 80, 24)
	require.Equal(t, " copied x", strings.TrimRight(lines[23], " "))
	require.Contains(t, lines[22], "? help")
}

// A message too long even for the lines it may take is cut with "…", never silently.
func TestAStatusLongerThanItsLinesEndsInAnEllipsis(t *testing.T) {
	t.Parallel()
	m, _ := newModel(t, 80, 24)
	m.Update(shared.StatusMsg{Text: strings.Repeat("word ", 200) + "END"})
	lines := screenLines(t, m.View(), 80, 24)
	last := strings.TrimRight(lines[23], " ")
	require.True(t, strings.HasSuffix(last, "…"), "%q", last)
	require.NotContains(t, strings.Join(lines, "\n"), "END")
	require.Contains(t, lines[19], "? help", "four lines of status, the footer above them")
}

// The footer's keys at 80 columns: the ones that do not fit are left out and marked "…", and
// "? help", where they all are, and "q quit" are still at the end.
func TestTheFooterMarksTheKeysItLeavesOutAndKeepsHelp(t *testing.T) {
	t.Parallel()
	m, _ := newModel(t, 80, 24)
	lines := screenLines(t, m.View(), 80, 24)
	footer := strings.TrimRight(lines[22], " ")
	require.True(t, strings.HasSuffix(footer, "? help · q quit"), "%q", footer)
	require.Contains(t, footer, "… ·", "%q", footer)
	require.NotContains(t, footer, "thi", "no key cut mid-word: %q", footer)

	// Wide enough, every key is there and nothing is marked.
	m2, _ := newModel(t, 200, 40)
	footer = strings.TrimRight(screenLines(t, m2.View(), 200, 40)[38], " ")
	require.NotContains(t, footer, "…")
	require.Contains(t, footer, "q quit")
}
