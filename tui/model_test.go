package tui_test

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
	"github.com/stretchr/testify/require"

	"idemwork/internal/testdb"
	"idemwork/internal/tuitest"
	"idemwork/tui"
	tctx "idemwork/tui/context"
)

func TestMain(m *testing.M) {
	time.Local = time.UTC // screens show local times; pin them
	lipgloss.SetColorProfile(termenv.Ascii)
	testdb.Main(m)
}

func key(s string) tea.KeyMsg {
	switch s {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "ctrl+c":
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
}

func isQuit(cmd tea.Cmd) bool {
	if cmd == nil {
		return false
	}
	_, ok := cmd().(tea.QuitMsg)
	return ok
}

func newModel(t *testing.T, w, h int) (*tui.Model, tuitest.Bundle) {
	t.Helper()
	b := tuitest.New(t)
	m := tui.New(b.Ctx)
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	return m, b
}

func TestQQuitsButNotWhileTypingInAField(t *testing.T) {
	t.Parallel()
	m, _ := newModel(t, 120, 40)
	_, cmd := m.Update(key("/"))
	require.False(t, isQuit(cmd))
	_, cmd = m.Update(key("q"))
	require.False(t, isQuit(cmd), "q typed into the filter is text")
	require.Contains(t, m.View(), "/q")
	m.Update(key("esc"))
	_, cmd = m.Update(key("q"))
	require.True(t, isQuit(cmd))
}

func TestCtrlCAlwaysQuits(t *testing.T) {
	t.Parallel()
	m, _ := newModel(t, 120, 40)
	m.Update(key(":"))
	_, cmd := m.Update(key("ctrl+c"))
	require.True(t, isQuit(cmd))
}

func TestEveryViewFitsEverySizeDownTo80x24(t *testing.T) {
	t.Parallel()
	m, _ := newModel(t, 120, 40)
	for _, size := range [][2]int{{80, 24}, {81, 25}, {100, 30}, {120, 40}, {200, 60}} {
		m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		for v := 1; v <= 9; v++ {
			m.Update(key(string(rune('0' + v))))
			for _, overlay := range []string{"", "?"} {
				if overlay != "" {
					m.Update(key(overlay))
				}
				screen := m.View()
				lines := strings.Split(screen, "\n")
				require.Len(t, lines, size[1], "view %d (%s) at %dx%d", v, m.ActiveTitle(), size[0], size[1])
				for i, l := range lines {
					require.LessOrEqual(t, ansi.StringWidth(l), size[0], "view %s line %d at %dx%d: %q", m.ActiveTitle(), i, size[0], size[1], l)
				}
				if overlay != "" {
					m.Update(key("esc"))
				}
			}
		}
	}
}

func TestASmallerTerminalSaysWhatItNeeds(t *testing.T) {
	t.Parallel()
	m, _ := newModel(t, 60, 20)
	require.Contains(t, m.View(), "needs at least 80×24")
}

func TestJumpToAnOwnerSwitchesEveryView(t *testing.T) {
	t.Parallel()
	m, b := newModel(t, 120, 40)
	m.Update(key(":"))
	for _, r := range "owner bob" {
		m.Update(key(string(r)))
	}
	_, cmd := m.Update(key("enter"))
	require.NotNil(t, cmd)
	require.Equal(t, "bob", b.Ctx.Owner)

	m.Update(key("O"))
	for i := 0; i < 3; i++ {
		m.Update(tea.KeyMsg{Type: tea.KeyBackspace})
	}
	for _, r := range "bad owner!" {
		m.Update(key(string(r)))
	}
	_, cmd = m.Update(key("enter"))
	msg := cmd()
	st, ok := msg.(tctx.StatusMsg)
	require.True(t, ok, "%T", msg)
	require.True(t, st.Error)
	require.Contains(t, st.Text, "VALIDATION_FAILED")
	require.Equal(t, "bob", b.Ctx.Owner, "an invalid owner is refused")
}

func TestDigitsAndTheNavigatorSwitchViews(t *testing.T) {
	t.Parallel()
	m, _ := newModel(t, 120, 40)
	m.Update(key("7"))
	require.Equal(t, "Locks", m.ActiveTitle())
	m.Update(key("tab"))
	m.Update(tea.KeyMsg{Type: tea.KeyDown})
	require.Equal(t, "Outbox", m.ActiveTitle())
	m.Update(tea.MouseMsg{X: 3, Y: 2, Button: tea.MouseButtonLeft, Action: tea.MouseActionPress})
	require.Equal(t, "Keys", m.ActiveTitle(), "a click on the navigator's second line selects Keys")
}

func TestAReadOnlySessionRefusesWritesWithAClearMessage(t *testing.T) {
	t.Parallel()
	m, b := newModel(t, 120, 40)
	b.Ctx.Conn.ReadOnly = true
	require.Contains(t, m.View(), "READ-ONLY")
	_, cmd := m.Update(tctx.OpenFormMsg{Kind: "create", Module: "NOTE"})
	st := cmd().(tctx.StatusMsg)
	require.True(t, st.Error)
	require.Contains(t, st.Text, "READ_ONLY")
}

func TestTheClockMovesAndShowsItsOffset(t *testing.T) {
	t.Parallel()
	m, b := newModel(t, 120, 40)
	m.Update(key("}"))
	require.Equal(t, time.Hour, b.Ctx.Clock.Offset())
	require.Contains(t, m.View(), "clock +1h0m0s")
	m.Update(key("="))
	require.Zero(t, b.Ctx.Clock.Offset())
}

func TestInsideAnOpenRecordOneToThreeChoosePanesAndOtherDigitsSwitchViews(t *testing.T) {
	t.Parallel()
	m, b := newModel(t, 120, 40)
	tuitest.SeedFixed(t, b)
	m.Update(tctx.JumpMsg{Kind: tctx.JumpRecord, Module: "NOTE", ID: tuitest.NoteID})
	m.Update(key("2"))
	require.Equal(t, "Records", m.ActiveTitle(), "2 picks the diff pane of the open record")
	m.Update(key("6"))
	require.Equal(t, "Storm", m.ActiveTitle())
}
