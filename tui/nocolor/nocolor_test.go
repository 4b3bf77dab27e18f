// Package nocolor tests the workbench under NO_COLOR in a binary of its own: the styles of a
// NO_COLOR terminal set lipgloss's process-wide profile, which the other TUI tests pin to plain
// text.
package nocolor_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/tui"
)

func TestMain(m *testing.M) {
	time.Local = time.UTC
	testdb.Main(m)
}

var (
	sgr    = regexp.MustCompile(`\x1b\[([0-9;:]*)m`)
	colour = regexp.MustCompile(`(^|;)(3[0-7]|38|4[0-7]|48|9[0-7]|10[0-7])(;|$)`)
)

// attributes lists the SGR parameter lists a line uses, failing on any colour.
func requireNoColour(t *testing.T, screen string) {
	t.Helper()
	for _, m := range sgr.FindAllStringSubmatch(screen, -1) {
		require.False(t, colour.MatchString(m[1]), "NO_COLOR: no colour, found SGR %q", m[0])
	}
}

// hasAttr reports whether line sets SGR attribute a (1 bold, 4 underline, 7 reverse).
func hasAttr(line, a string) bool {
	for _, m := range sgr.FindAllStringSubmatch(line, -1) {
		for _, p := range strings.Split(m[1], ";") {
			if p == a {
				return true
			}
		}
	}
	return false
}

func reversed(line string) bool { return hasAttr(line, "7") }

func key(s string) tea.KeyMsg {
	if s == "enter" {
		return tea.KeyMsg{Type: tea.KeyEnter}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
}

func TestNoColorKeepsSelectionFocusAndCursorsVisible(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	b := tuitest.New(t)
	b.Ctx.Styles = uictx.StylesForTerminal(os.Getenv("NO_COLOR") != "")
	tuitest.SeedFixed(t, b)
	m := tui.New(b.Ctx, b.Backend)
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	tuitest.Settle(t, tuitest.Updater(m), m.Init())
	screen := m.View()
	requireNoColour(t, screen)

	lines := strings.Split(screen, "\n")
	selected := -1
	for i, l := range lines {
		if strings.Contains(ansi.Strip(l), "│> ") {
			require.Equal(t, -1, selected, "one selected row")
			selected = i
			require.True(t, reversed(l), "the selected row is in reverse video: %q", l)
		}
	}
	require.NotEqual(t, -1, selected, "the selection is on screen:\n%s", ansi.Strip(screen))
	require.Contains(t, ansi.Strip(lines[1]), "> 1 Records", "the active view is marked")
	require.True(t, hasAttr(lines[1], "1") && hasAttr(lines[1], "4"), "and bold underlined: %q", lines[1])

	// j moves the selection, visibly.
	m.Update(key("j"))
	after := m.View()
	require.NotEqual(t, screen, after, "j changes the screen")
	lines = strings.Split(after, "\n")
	require.Contains(t, ansi.Strip(lines[selected+1]), "│> ")
	require.True(t, reversed(lines[selected+1]))

	// A form: the focused field is marked and its text cursor is in reverse video.
	m.Update(uictx.OpenFormMsg{Kind: "create", Module: "NOTE"})
	m.Update(tea.KeyMsg{Type: tea.KeyTab})
	form := m.View()
	requireNoColour(t, form)
	require.Contains(t, ansi.Strip(form), "> Idempotency-Key")
	cursor := false
	for _, l := range strings.Split(form, "\n") {
		if strings.Contains(ansi.Strip(l), "tui-") && reversed(l) {
			cursor = true
		}
	}
	require.True(t, cursor, "the text cursor is drawn in reverse video:\n%q", form)
}
