package tui_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/tui"
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

// settleModel runs cmd as Bubble Tea would, feeding every message back to the model.
func settleModel(t *testing.T, m *tui.Model, cmd tea.Cmd) {
	t.Helper()
	tuitest.Settle(t, tuitest.Updater(m), cmd)
}

func cmdOf(_ tea.Model, cmd tea.Cmd) tea.Cmd { return cmd }

// selectedRow is the body line that carries the cursor mark.
func selectedRow(t *testing.T, screen string) string {
	t.Helper()
	for _, l := range strings.Split(ansi.Strip(screen), "\n") {
		if i := strings.Index(l, "│> "); i >= 0 {
			return l[i:]
		}
	}
	t.Fatalf("no selected row on screen:\n%s", screen)
	return ""
}

func newModel(t *testing.T, w, h int) (*tui.Model, tuitest.Bundle) {
	t.Helper()
	b := tuitest.New(t)
	m := tui.New(b.Ctx, b.Backend)
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

// Every view at every size: exactly the terminal's lines, each exactly its width, the header
// and navigator in place, the active view marked, the view's own heading at the top of the
// body, and — in lists — exactly one selected row, on screen.
func TestEveryViewShowsItsContentAtEverySizeDownTo80x24(t *testing.T) {
	t.Parallel()
	m, b := newModel(t, 120, 40)
	tuitest.SeedFixed(t, b)
	settleModel(t, m, m.Init())
	headings := map[string]string{"Records": "Records of alice", "Keys": "Idempotency keys of alice", "Executions": "Feature executions of alice",
		"Audit": "Audit events of alice", "Timeline": "Timeline of alice", "Storm": "Replay storm", "Locks": "Locks", "Outbox": "Outbox of alice",
		"Demo": "Demo ▸b blocked_external"}
	lists := map[string]bool{"Records": true, "Keys": true, "Executions": true, "Audit": true, "Timeline": true}
	for _, size := range [][2]int{{80, 24}, {81, 25}, {100, 30}, {120, 40}, {200, 60}} {
		m.Update(tea.WindowSizeMsg{Width: size[0], Height: size[1]})
		for v := 1; v <= 9; v++ {
			m.Update(key(string(rune('0' + v))))
			title := m.ActiveTitle()
			for _, overlay := range []string{"", "?"} {
				if overlay != "" {
					m.Update(key(overlay))
				}
				lines := strings.Split(m.View(), "\n")
				at := fmt.Sprintf("view %s at %dx%d%s", title, size[0], size[1], overlay)
				require.Len(t, lines, size[1], at)
				for i, l := range lines {
					require.Equal(t, size[0], ansi.StringWidth(l), "%s line %d: %q", at, i, l)
				}
				require.Contains(t, lines[0], "idemwork", at)
				require.Contains(t, lines[0], "owner alice", at)
				nav := ansi.Strip(lines[v])
				require.True(t, strings.HasPrefix(strings.TrimSpace(nav), fmt.Sprintf("> %d %s", v, title)), "%s: the active view is marked: %q", at, nav)
				body := func(i int) string {
					return ansi.Strip(lines[i])[strings.Index(ansi.Strip(lines[i]), "│")+len("│"):]
				}
				if overlay == "" {
					require.Contains(t, body(1), headings[title], at)
					if lists[title] {
						selected := 0
						for i := 2; i < len(lines)-2; i++ {
							if strings.HasPrefix(body(i), "> ") {
								selected++
							}
						}
						require.Equal(t, 1, selected, "%s: one selected row on screen:\n%s", at, m.View())
					}
				} else {
					require.Contains(t, m.View(), "In "+title, at)
					m.Update(key("esc"))
				}
			}
		}
	}
}

func TestRunesArrivingInOneReadAreSeveralKeypresses(t *testing.T) {
	t.Parallel()
	m, b := newModel(t, 120, 40)
	tuitest.SeedFixed(t, b)
	m.Update(key("4")) // Audit: three events
	settleModel(t, m, m.Init())
	settleModel(t, m, cmdOf(m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("jj")})))
	require.Contains(t, selectedRow(t, m.View()), "RECORD_CREATED", "jj moved twice: the third event")
	// Typed into a prompt, the same runes are text.
	m.Update(key(":"))
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("jjj")})
	require.Contains(t, m.View(), ":jjj")
}

func TestTheHelpNamesTheViewOnce(t *testing.T) {
	t.Parallel()
	m, _ := newModel(t, 120, 40)
	m.Update(key("2"))
	m.Update(key("?"))
	require.Contains(t, m.View(), "In Keys")
	require.NotContains(t, m.View(), "Keys keys")
}

func TestSlashSearchesTheDatabaseAsYouType(t *testing.T) {
	t.Parallel()
	m, b := newModel(t, 120, 40)
	tuitest.SeedFixed(t, b)
	m.Update(key("2"))
	settleModel(t, m, m.Init())
	m.Update(key("/"))
	require.Contains(t, m.View(), "search Keys: key prefix", "the prompt says what a search matches")
	var cmd tea.Cmd
	for _, r := range "fixed-p" {
		_, cmd = m.Update(key(string(r)))
	}
	// The last edit's pause runs the search; earlier edits' pauses find a newer edit and do nothing.
	settleModel(t, m, cmd)
	require.Contains(t, m.View(), `2 matches: keys starting with "fixed-p"`)
	settleModel(t, m, cmdOf(m.Update(key("enter"))))
	require.Contains(t, selectedRow(t, m.View()), "fixed-patch")
	m.Update(key("/"))
	settleModel(t, m, cmdOf(m.Update(key("esc"))))
	require.Contains(t, m.View(), "3 loaded", "esc leaves the search")
}

func TestWhateverAViewLetsThroughOnlyStylingReachesTheTerminal(t *testing.T) {
	t.Parallel()
	m, _ := newModel(t, 120, 40)
	m.Update(uictx.StatusMsg{Text: "evil \x1b[2J\x1b]52;c;aGk=\x07 done"})
	screen := m.View()
	require.NotContains(t, screen, "\x1b[2J")
	require.NotContains(t, screen, "\x1b]52")
	require.Contains(t, screen, "evil ␛[2J␛]52;c;aGk=␇ done")
}

func TestTheFirstFrameSaysWhatIsBeingPrepared(t *testing.T) {
	t.Parallel()
	done := make(chan tui.BootResult)
	boot := tui.NewBoot(uictx.NewStyles(uictx.DefaultTheme()), "creating the database cluster in /x (first run: initdb takes a few seconds)…", done)
	require.Contains(t, boot.View(), "creating the database cluster in /x", "before the terminal's size is known")
	boot.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	require.Contains(t, boot.View(), "creating the database cluster")
	require.Len(t, strings.Split(boot.View(), "\n"), 24)
	_, cmd := boot.Update(key("q"))
	require.True(t, isQuit(cmd), "q gives up while waiting")
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
	st, ok := msg.(uictx.StatusMsg)
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

	// Ten views, ten digits: 0 is the tenth, and the navigator labels each view with its digit.
	m.Update(key("0"))
	require.Equal(t, "Verify", m.ActiveTitle())
	screen := ansi.Strip(m.View())
	require.Contains(t, screen, "> 0 Verify")
	require.Contains(t, screen, "  9 Demo")
	require.NotContains(t, screen, "10 Verify")
	m.Update(key("1"))
	require.Equal(t, "Records", m.ActiveTitle())
	m.Update(key("?"))
	require.Contains(t, ansi.Strip(m.View()), "1-9 0 switch view (0 is the tenth)", "the help says so")
	m.Update(key("?"))

	// A digit the focused view has a key of its own for goes to the view: Outbox's 0.
	m.Update(key("8"))
	require.Equal(t, "Outbox", m.ActiveTitle())
	m.Update(key("0"))
	require.Equal(t, "Outbox", m.ActiveTitle(), "0 in Outbox clears the provider's failures")
	m.Update(key("2"))
	require.Equal(t, "Keys", m.ActiveTitle())
}

func TestAReadOnlySessionRefusesWritesWithAClearMessage(t *testing.T) {
	t.Parallel()
	m, b := newModel(t, 120, 40)
	b.Ctx.Conn.ReadOnly = true
	require.Contains(t, m.View(), "READ-ONLY")
	_, cmd := m.Update(uictx.OpenFormMsg{Kind: "create", Module: "NOTE"})
	st := cmd().(uictx.StatusMsg)
	require.True(t, st.Error)
	require.Contains(t, st.Text, "READ_ONLY")
}

func TestTheClockMovesAndShowsItsOffset(t *testing.T) {
	t.Parallel()
	m, b := newModel(t, 120, 40)
	m.Update(key("}"))
	require.Equal(t, time.Hour, b.Clock.Offset())
	require.Contains(t, m.View(), "clock +1h0m0s")
	m.Update(key("="))
	require.Zero(t, b.Clock.Offset())
}

func TestInsideAnOpenRecordOneToThreeChoosePanesAndOtherDigitsSwitchViews(t *testing.T) {
	t.Parallel()
	m, b := newModel(t, 120, 40)
	tuitest.SeedFixed(t, b)
	m.Update(uictx.JumpMsg{Kind: uictx.JumpRecord, Module: "NOTE", ID: tuitest.NoteID})
	m.Update(key("2"))
	require.Equal(t, "Records", m.ActiveTitle(), "2 picks the diff pane of the open record")
	m.Update(key("6"))
	require.Equal(t, "Storm", m.ActiveTitle())
}

// Digits switch views wherever no text field has the keys: over the help, in the storm's
// settings and in a write form on a choice field (the form closes as esc closes it). In a text
// field they are typed.
func TestDigitsSwitchViewsUnlessATextFieldHasTheKeys(t *testing.T) {
	t.Parallel()
	m, _ := newModel(t, 80, 24)

	m.Update(key("?"))
	m.Update(key("4"))
	require.Equal(t, "Audit", m.ActiveTitle(), "over the help")
	require.NotContains(t, m.View(), "In Audit", "the help closed")

	m.Update(key("6"))
	m.Update(key("e")) // the settings, on Operation (a choice)
	require.True(t, m.Active().Capturing())
	m.Update(key("7"))
	require.Equal(t, "Locks", m.ActiveTitle(), "the storm's settings on a choice field")
	m.Update(key("6"))
	require.True(t, m.Active().Capturing(), "the settings are still open")
	m.Update(key("tab"))                     // Module, a choice (a create's)
	m.Update(key("tab"))                     // Idempotency-Key, a text field
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlU}) // empty it
	m.Update(key("7"))
	require.Equal(t, "Storm", m.ActiveTitle(), "a digit typed into the key")
	require.Equal(t, "7", m.Active().Selection())
	m.Update(key("esc"))

	m.Update(key("1"))
	m.Update(uictx.OpenFormMsg{Kind: "create", Module: "NOTE"}) // on Module, a choice
	require.Contains(t, m.View(), "Create a record")
	m.Update(key("3"))
	require.Equal(t, "Executions", m.ActiveTitle(), "a form on a choice field")
	require.NotContains(t, m.View(), "Create a record", "the form closed")

	m.Update(key("1"))
	m.Update(uictx.OpenFormMsg{Kind: "create", Module: "NOTE"})
	m.Update(key("tab")) // Idempotency-Key
	m.Update(key("3"))
	require.Equal(t, "Records", m.ActiveTitle())
	require.Contains(t, m.View(), "Create a record", "typed into the key, the form open")
}

// chunk is runes that arrived in one read: typed fast, or pasted without bracketed paste.
func chunk(s string) tea.KeyMsg { return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)} }

// Runes arriving in one read where a text field has the keys are text, whole: a chunk that
// spells a key's name ("down", "esc", "enter", "home") triggers no binding of the shell, the
// view, the form or the text input itself.
func TestAChunkOfRunesIsTextInATextFieldNeverAKeyName(t *testing.T) {
	t.Parallel()
	m, _ := newModel(t, 80, 24)

	m.Update(key("6"))
	m.Update(key("e"))
	m.Update(key("tab")) // Module
	m.Update(key("tab")) // Idempotency-Key
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlU})
	for _, c := range []string{"down", "up", "esc", "left", "home", "enter"} {
		settleModel(t, m, cmdOf(m.Update(chunk(c))))
	}
	require.Equal(t, "downupesclefthomeenter", m.Active().Selection(), "every chunk typed into the storm's key, in order")
	require.True(t, m.Active().Capturing(), "the settings are still open: esc and enter were text")
	m.Update(key("esc"))

	m.Update(key(":"))
	m.Update(chunk("esc"))
	m.Update(chunk("enter"))
	require.Contains(t, m.View(), ":escenter", "the prompt is still open, both chunks typed")
	m.Update(key("esc"))

	m.Update(key("1"))
	m.Update(uictx.OpenFormMsg{Kind: "create", Module: "NOTE"})
	m.Update(key("tab")) // Idempotency-Key
	m.Update(tea.KeyMsg{Type: tea.KeyCtrlU})
	m.Update(chunk("tab"))
	m.Update(chunk("end"))
	m.Update(key("tab")) // Title
	m.Update(chunk("esc"))
	screen := ansi.Strip(m.View())
	require.Contains(t, screen, "Create a record", "esc typed as text did not close the form")
	require.Contains(t, screen, "tabend")
	require.Regexp(t, `> Title\s+│ \n[^\n]*│ │   esc\s`, screen, "typed into the title")
}
