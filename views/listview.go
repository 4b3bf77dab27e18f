package views

import (
	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemwork/idemwork/internal/uictx"
)

// listView is a screen that is one keyset-paged table: Executions, Audit, Timeline, Outbox.
// Each is configured with its columns, row mapping, heading and keys.
type listView[T any] struct {
	ctx   *uictx.ProgramContext
	w, h  int
	list  paged[T]
	title string
	// heading renders the line above the table.
	heading func() string
	// onKey handles the view's own keys for the selected row (nil when none is selected).
	onKey func(msg tea.KeyMsg, sel *T) tea.Cmd
	// onMsg handles the view's own messages (nil when it has none); it reports whether msg was one.
	onMsg func(msg tea.Msg) (tea.Cmd, bool)
	// selection is what `y` copies.
	selection func(T) string
	// hint says what `/` searches; "" means the view does not search.
	hint string
	keys []key.Binding
}

func (v *listView[T]) Title() string { return v.title }
func (v *listView[T]) Init() tea.Cmd { return v.list.reload(v.ctx) }

func (v *listView[T]) Update(msg tea.Msg) tea.Cmd {
	if v.list.handle(msg) {
		return nil
	}
	if v.onMsg != nil {
		if cmd, ok := v.onMsg(msg); ok {
			return cmd
		}
	}
	switch msg := msg.(type) {
	case uictx.OwnerChangedMsg:
		v.list.query = ""
		return v.list.restart(v.ctx)
	case uictx.DataChangedMsg:
		return v.list.reload(v.ctx)
	case TickMsg:
		v.list.refill()
	case tea.MouseMsg:
		return v.list.mouse(v.ctx, msg, msg.Y-1)
	case tea.KeyMsg:
		if ok, cmd := v.list.keyNav(v.ctx, msg, v.list.table.BodyHeight()); ok {
			return cmd
		}
		if key.Matches(msg, v.ctx.Keys.List.Refresh) {
			return v.list.reload(v.ctx)
		}
		if key.Matches(msg, v.ctx.Keys.List.ClearSearch) && v.list.query != "" {
			return v.list.search(v.ctx, "")
		}
		if v.onKey != nil {
			return v.onKey(msg, v.list.selected())
		}
	}
	return nil
}

func (v *listView[T]) SetSize(w, h int) { v.w, v.h = w, h; v.list.table.SetSize(w, h-1) }

func (v *listView[T]) View() string {
	s := v.ctx.Styles
	head := v.list.heading(v.ctx, v.heading(), v.w)
	return fitBlock(head+"\n"+v.list.table.View(s, true), v.w, v.h)
}

func (v *listView[T]) ShortHelp() []key.Binding {
	out := append([]key.Binding{}, v.keys...)
	if v.list.query != "" {
		out = append(out, v.ctx.Keys.List.ClearSearch)
	}
	return append(out, v.ctx.Keys.List.Refresh, v.ctx.Keys.Global.Copy)
}

func (v *listView[T]) FullHelp() [][]key.Binding {
	return [][]key.Binding{{v.ctx.Keys.List.Up, v.ctx.Keys.List.Down, v.ctx.Keys.List.PgUp, v.ctx.Keys.List.PgDown, v.ctx.Keys.List.Top, v.ctx.Keys.List.Bottom}, v.ShortHelp()}
}

func (v *listView[T]) Capturing() bool    { return false }
func (v *listView[T]) SetFilter(f string) { v.list.table.SetFilter(f) }
func (v *listView[T]) Selection() string {
	if r := v.list.selected(); r != nil && v.selection != nil {
		return v.selection(*r)
	}
	return ""
}

// searchableList is a listView whose `/` searches the database.
type searchableList[T any] struct{ *listView[T] }

func (v searchableList[T]) Search(q string) tea.Cmd { return v.list.search(v.ctx, q) }
func (v searchableList[T]) SearchHint() string      { return v.hint }
func (v searchableList[T]) Query() string           { return v.list.query }
