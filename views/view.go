// Package views holds the workbench's screens. Each view is a small model with Update, View,
// SetSize and a key map; it reads the shared program context and never imports the shell.
// Every query runs as a command tagged with a request id, and a result whose id is stale is
// dropped, so Update never blocks and late answers never overwrite newer ones.
package views

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/internal/uictx"
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
	// Selection is what `y` copies: the selected id or key, or the focused pane's content
	// ("" for none).
	Selection() string
}

// Filterer is a view whose `/` narrows the rows it has loaded, as typed ("" clears it). Views of
// stored rows are Searchers instead, and the shell uses that; a view that is neither has no rows
// for `/` to narrow.
type Filterer interface{ SetFilter(s string) }

// TextFocuser is a view (or the write form) that says whether the field with the keys is a
// text field; a view that captures keys without it has one. Keys typed there are text (digits
// too, and several runes in one read); on a choice field a digit still switches views.
type TextFocuser interface{ TextFocused() bool }

// Searcher is a view whose `/` searches the database, not the rows it has loaded (SPEC §10.4).
type Searcher interface {
	// Search shows the first page of the owner's rows matching q; "" shows every row again.
	Search(q string) tea.Cmd
	// SearchHint says what a search matches, for the prompt.
	SearchHint() string
	// Query is the active search ("" none).
	Query() string
}

// searchField splits a query "field:value" naming one of fields; any other query is a value of
// the default field def. Values keep inner spaces but lose the ends': a trailing space typed
// into the prompt must not change what is searched.
func searchField(q, def string, fields ...string) (string, string) {
	q = strings.TrimSpace(q)
	if f, v, ok := strings.Cut(q, ":"); ok {
		for _, name := range fields {
			if strings.EqualFold(strings.TrimSpace(f), name) {
				return name, strings.TrimSpace(v)
			}
		}
	}
	return def, q
}

// TickMsg arrives once a second: relative times and expiry countdowns are redrawn.
type TickMsg struct{}

// queryTimeout bounds every read a view issues.
const queryTimeout = 10 * time.Second

// query runs fn off the Update goroutine and returns its message.
func query(fn func(ctx context.Context) tea.Msg) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
		defer cancel()
		return fn(ctx)
	}
}

// Unreachable marks coded as the error of a database that could not be reached or went away (a
// stopped cluster, a refused or dropped connection), which the views word as such rather than
// by its code. The readers and writers wired in cli return such errors; errors.As finds coded.
func Unreachable(coded *apperr.Error) error { return unreachableError{coded} }

// IsUnreachable reports whether err was marked with Unreachable.
func IsUnreachable(err error) bool { return errors.As(err, new(unreachableError)) }

type unreachableError struct{ coded *apperr.Error }

func (e unreachableError) Error() string { return e.coded.Error() }
func (e unreachableError) Unwrap() error { return e.coded }

// errText renders an error for a user: the coded message (the readers and writers wired in cli
// code a known database failure with what to do; anything uncoded is INTERNAL naming the step
// and the SQLSTATE), never a raw SQL or driver error. An unreachable database (Unreachable)
// says so and what to do from here.
func errText(err error) string {
	if IsUnreachable(err) {
		// Short, for a view's heading: the status line says which database and what to do
		// (ProgramContext.UnreachableText), wrapped, for as long as it stays unreachable.
		return "DATABASE_UNAVAILABLE: the database is not reachable (the status line says what to do)"
	}
	e := apperr.As(err)
	if e.Code == apperr.Internal {
		return termsafe.Line("INTERNAL: " + e.Message + "; r retries")
	}
	return termsafe.Line(string(e.Code) + ": " + e.Message)
}

func status(text string, isErr bool) tea.Cmd {
	return func() tea.Msg { return uictx.StatusMsg{Text: text, Error: isErr} }
}

// moveTable applies navigation keys to a table; it reports whether the key was one.
func moveTable(k uictx.ListKeys, t *Table, msg tea.KeyMsg, page int) bool {
	switch {
	case key.Matches(msg, k.Up):
		t.Move(-1)
	case key.Matches(msg, k.Down):
		t.Move(1)
	case key.Matches(msg, k.PgUp):
		t.Move(-page)
	case key.Matches(msg, k.PgDown):
		t.Move(page)
	case key.Matches(msg, k.Top):
		t.Top()
	case key.Matches(msg, k.Bottom):
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
