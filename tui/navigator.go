package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/views"
)

// navigator is the list of views on the left, each labelled with the digit that switches to
// it. tab gives it the keys (focused), where the arrows move between views; a click selects one.
type navigator struct {
	focused bool
}

// key handles a key while the navigator has the focus: the view to switch to, and whether to
// switch. Leaving (enter, →) hands the keys back to the view.
func (n *navigator) key(k uictx.ShellKeys, msg tea.KeyMsg, active, count int) (int, bool) {
	switch {
	case key.Matches(msg, k.NavUp):
		return (active + count - 1) % count, true
	case key.Matches(msg, k.NavDown):
		return (active + 1) % count, true
	case key.Matches(msg, k.NavLeave):
		n.focused = false
	}
	return 0, false
}

// click handles the mouse on the navigator (y counted from its first line): a left click on a
// view selects it and gives the keys to it.
func (n *navigator) click(msg tea.MouseMsg, y, count int) (int, bool) {
	if msg.Button == tea.MouseButtonLeft && msg.Action == tea.MouseActionPress && y >= 0 && y < count {
		n.focused = false
		return y, true
	}
	return 0, false
}

// view draws the navigator h lines high.
func (n *navigator) view(s uictx.Styles, vs []views.View, active, h int) string {
	lines := make([]string, 0, h)
	for i, v := range vs {
		// The active view is marked in the text too (NO_COLOR, plain captures): ">" when the view
		// has the keys, "»" when the navigator has them.
		digit := uictx.ViewDigit(i)
		label := fmt.Sprintf("  %s %s", digit, v.Title())
		st := s.NavItem
		if i == active {
			st = s.NavActive
			label = fmt.Sprintf("> %s %s", digit, v.Title())
			if n.focused {
				st = s.NavFocused
				label = fmt.Sprintf("» %s %s", digit, v.Title())
			}
		}
		// Truncate before styling: lipgloss would wrap a long label onto a second line.
		lines = append(lines, st.Render(padRight(ansi.Truncate(label, navWidth-3, "…"), navWidth-3)))
	}
	for len(lines) < h {
		lines = append(lines, strings.Repeat(" ", navWidth-1))
	}
	return s.Nav.Height(h).Render(strings.Join(lines[:h], "\n"))
}
