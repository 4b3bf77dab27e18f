package tui_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/internal/uictx"
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
	m.Update(uictx.StatusMsg{Text: notice, Error: true})
	lines := screenLines(t, m.View(), 80, 24)
	var status []string
	for _, l := range lines[len(lines)-3:] {
		status = append(status, strings.TrimSpace(l))
	}
	require.Equal(t, notice, strings.Join(status, " "), "the last three lines hold the whole message:\n%s", strings.Join(lines, "\n"))
	require.Contains(t, lines[len(lines)-4], "? help", "the footer's keys stay, above the message")
	require.Contains(t, lines[1], "Records of alice", "the body starts where it did")

	// Once it is gone, the body has its lines back.
	m.Update(uictx.StatusMsg{Text: "copied x"})
	lines = screenLines(t, m.View(), 80, 24)
	require.Equal(t, " copied x", strings.TrimRight(lines[23], " "))
	require.Contains(t, lines[22], "? help")
}

// A message too long even for the lines it may take is cut with "…", never silently.
func TestAStatusLongerThanItsLinesEndsInAnEllipsis(t *testing.T) {
	t.Parallel()
	m, _ := newModel(t, 80, 24)
	m.Update(uictx.StatusMsg{Text: strings.Repeat("word ", 200) + "END"})
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

// The header keeps the connection, the owner and the mode at 80 columns whatever else it
// shows: a moved clock's badge takes its short form and the MEM-001 limit gives way; it never
// drops the connection (it did once the clock moved) nor cuts the time mid-way unmarked. A
// minute of the clock ticking changes none of that.
func TestTheHeaderKeepsTheConnectionWhenTheClockMoves(t *testing.T) {
	t.Parallel()
	m, b := newModel(t, 80, 24)
	b.Ctx.Conn.Display = "embedded /var/lib/idemwork/pg"
	sec := 0
	b.Ctx.NowFunc = func() time.Time { return tuitest.Now.Add(b.Clock.Offset() + time.Duration(sec)*time.Second) }
	head := func() string { return strings.TrimRight(screenLines(t, m.View(), 80, 24)[0], " ") }
	require.Equal(t, " idemwork │ embedded /… │ owner alice │ read-write │ MEM-001 max 2000 │ 12:00:00", head())

	for _, c := range []struct{ moves, want string }{
		{"}", " idemwork │ embedded /… │ owner alice │ read-write │ clock +1h │ 13:00:"},
		{strings.Repeat("}", 25), " idemwork │ embedded /… │ owner alice │ read-write │ clock +26h │ 14:00:"},
		{"={", " idemwork │ embedded /… │ owner alice │ read-write │ clock -1h │ 11:00:"},
	} {
		for _, k := range c.moves {
			m.Update(key(string(k)))
		}
		for sec = 0; sec < 60; sec++ {
			require.Equal(t, fmt.Sprintf("%s%02d", c.want, sec), head(), "after %q, %d s on", c.moves, sec)
		}
		sec = 0
	}

	// A read-only session's reason and a long owner: the connection and the mode still stay.
	b.Ctx.Conn.ReadOnly, b.Ctx.Conn.ReadOnlyReason = true, "hot standby"
	b.Ctx.Owner = "an-owner-with-a-rather-long-identifier-0123456789"
	got := head()
	require.Contains(t, got, "embedded /…")
	require.Contains(t, got, "READ-ONLY · hot standby")
	require.Contains(t, got, "owner an-owne…", "a long owner is cut last, marked")
	require.Contains(t, got, "clock -1h")
}

// replicationRisk is a session whose replication can lose acknowledged keys (or not).
type replicationRisk string

func (r replicationRisk) ReplicationRisk() string { return string(r) }

// Issue 21: while writes are accepted with only asynchronous standbys, the header says that
// acknowledged keys can be lost on failover — in full where there is room, as "ASYNC REPL" at 80
// columns, the connection, the owner and the mode still there — and says nothing once replication
// is synchronous, or on a read-only session (it writes nothing to lose).
func TestTheHeaderWarnsWhileAcknowledgedKeysCanBeLostOnFailover(t *testing.T) {
	t.Parallel()
	m, b := newModel(t, 80, 24)
	b.Ctx.Conn.Display = "db-a:5432"
	head := func(w, h int) string { return strings.TrimRight(screenLines(t, m.View(), w, h)[0], " ") }
	require.NotContains(t, head(80, 24), "REPL")

	risk := replicationRisk("the 1 attached standby(s) replicate asynchronously")
	b.Ctx.Replication = &risk
	got := head(80, 24)
	require.Contains(t, got, "ASYNC REPL")
	require.Contains(t, got, "db-a:5432")
	require.Contains(t, got, "owner alice")
	require.Contains(t, got, "read-write")

	m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
	got = head(120, 40)
	require.Contains(t, got, "async repl: failover can lose acked keys")
	require.Contains(t, got, "db-a:5432")
	require.NotContains(t, got, "MEM-001", "the limit gives way to the warning")

	risk = ""
	require.NotContains(t, head(120, 40), "async repl")
	risk = "asynchronous"
	b.Ctx.Conn.ReadOnly, b.Ctx.Conn.ReadOnlyReason = true, "read-only session"
	require.NotContains(t, head(120, 40), "async repl", "a read-only session writes nothing a failover could lose")
}
