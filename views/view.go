// Package views holds the workbench's screens. Each view is a small model with Update, View,
// SetSize and a key map; it reads the shared program context and never imports the shell.
// Every query runs as a command tagged with a request id, and a result whose id is stale is
// dropped, so Update never blocks and late answers never overwrite newer ones.
package views

import (
	gocontext "context"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"idemwork/apperr"
	tctx "idemwork/tui/context"
)

// View is one screen of the workbench.
type View interface {
	Title() string
	Init() tea.Cmd
	Update(msg tea.Msg) tea.Cmd
	View() string
	SetSize(w, h int)
	ShortHelp() []key.Binding
	FullHelp() [][]key.Binding
	// Capturing is true while a text field has focus: global keys (q, ?, /) go to the view.
	Capturing() bool
	// SetFilter narrows the rows shown ("" clears it).
	SetFilter(s string)
	// Selection is what `y` copies: the selected id, key or JSON ("" for none).
	Selection() string
}

// TickMsg arrives once a second: relative times and expiry countdowns are redrawn.
type TickMsg struct{}

// queryTimeout bounds every read a view issues.
const queryTimeout = 10 * time.Second

// query runs fn off the Update goroutine and returns its message.
func query(fn func(ctx gocontext.Context) tea.Msg) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := gocontext.WithTimeout(gocontext.Background(), queryTimeout)
		defer cancel()
		return fn(ctx)
	}
}

// errText renders an error for a user: the coded message, never a raw SQL error.
func errText(err error) string {
	e := apperr.As(err)
	if e.Code == apperr.Internal && e.Err != nil {
		return "internal error: " + e.Err.Error()
	}
	return string(e.Code) + ": " + e.Message
}

func status(text string, isErr bool) tea.Cmd {
	return func() tea.Msg { return tctx.StatusMsg{Text: text, Error: isErr} }
}

// Common keys of list views.
var (
	keyUp      = key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up"))
	keyDown    = key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down"))
	keyPgUp    = key.NewBinding(key.WithKeys("pgup", "ctrl+u"), key.WithHelp("pgup", "page up"))
	keyPgDown  = key.NewBinding(key.WithKeys("pgdown", "ctrl+d"), key.WithHelp("pgdn", "page down"))
	keyTop     = key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g", "top"))
	keyBottom  = key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G", "bottom"))
	keyOpen    = key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "open"))
	keyBack    = key.NewBinding(key.WithKeys("esc", "backspace"), key.WithHelp("esc", "back"))
	keyRefresh = key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "refresh"))
	keyCopy    = key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "copy"))
)

// moveTable applies navigation keys to a table; it reports whether the key was one.
func moveTable(t *Table, msg tea.KeyMsg, page int) bool {
	switch {
	case key.Matches(msg, keyUp):
		t.Move(-1)
	case key.Matches(msg, keyDown):
		t.Move(1)
	case key.Matches(msg, keyPgUp):
		t.Move(-page)
	case key.Matches(msg, keyPgDown):
		t.Move(page)
	case key.Matches(msg, keyTop):
		t.Top()
	case key.Matches(msg, keyBottom):
		t.Bottom()
	default:
		return false
	}
	return true
}

// wheelTable applies the mouse wheel and clicks (y relative to the table's first line).
func wheelTable(t *Table, msg tea.MouseMsg, y int) bool {
	switch {
	case msg.Button == tea.MouseButtonWheelUp:
		t.Move(-3)
	case msg.Button == tea.MouseButtonWheelDown:
		t.Move(3)
	case msg.Button == tea.MouseButtonLeft && msg.Action == tea.MouseActionPress:
		return t.Click(y)
	default:
		return false
	}
	return true
}
