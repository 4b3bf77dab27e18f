package tui

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A line of the frame cut to the terminal's width ends in "…": the reader can tell text is
// missing. A line that fits is padded, never marked.
func TestFitMarksALineItCuts(t *testing.T) {
	t.Parallel()
	require.Equal(t, "abcdefghi…\nshort     ", fit("abcdefghijklmnop\nshort", 10, 2))
	require.Equal(t, "exactly10!", fit("exactly10!", 10, 1))
}

// A long host (a socket directory's path) shortens to at most maxConnFloor cells, so the mode —
// READ-ONLY and its reason — is never what gives way on a narrow terminal.
func TestALongHostNeverPushesTheModeOffTheHeader(t *testing.T) {
	conn := "/tmp/idemwork-test-3432744184/standby/sockets (unix socket) · db t_1"
	require.Equal(t, maxConnFloor, connFloor(conn))
	require.Equal(t, len("localhost:5432")+3, connFloor("localhost:5432 · db app"), "a short host keeps its whole name")
}
