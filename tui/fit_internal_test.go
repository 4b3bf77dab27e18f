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
