package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/views"
)

// helpOverlay renders key bindings with bubbles/help: the footer's line (the focused view's
// ShortHelp and the keys used most) and, when shown (?), the overlay with the focused view's
// FullHelp above the keys that act everywhere.
type helpOverlay struct {
	shown bool
	model help.Model
}

func newHelpOverlay(s uictx.Styles) helpOverlay {
	h := help.New()
	h.ShortSeparator = " · "
	h.FullSeparator = "   "
	h.Styles = help.Styles{
		Ellipsis:       s.Subtle,
		ShortKey:       s.HelpKey,
		ShortDesc:      s.HelpDesc,
		ShortSeparator: s.Subtle,
		FullKey:        s.HelpKey,
		FullDesc:       s.HelpDesc,
		FullSeparator:  s.Subtle,
	}
	return helpOverlay{model: h}
}

// globalGroups are the keys that act in every view, as the overlay's columns.
func globalGroups(g uictx.GlobalKeys) [][]key.Binding {
	return [][]key.Binding{
		{g.Filter, g.Jump, g.Owner, g.Rules, g.Copy},
		{g.NextFocus, g.PrevFocus, g.Help, g.Quit, g.ForceQuit},
		{g.Views, g.ClockFwd, g.ClockBack, g.ClockReset},
	}
}

// navigatorGroups are the keys of the focused navigator.
func navigatorGroups(k uictx.ShellKeys) [][]key.Binding {
	return [][]key.Binding{{k.NavUp, k.NavDown, k.NavLeave}}
}

// view is the overlay for the view v, centred in w×h: every binding of v's FullHelp, then the
// global keys. Each group is a column (bubbles/help's full view) where the columns fit the
// space; where they do not (80×24), each group flows over lines of "key desc · key desc"
// (bubbles/help's short view), so every key is still on screen.
func (o *helpOverlay) view(s uictx.Styles, km uictx.KeyMap, v views.View, w, h int) string {
	inner := w - s.Modal.GetHorizontalFrameSize()
	layout := func(lay func([][]key.Binding, int) []string) []string {
		lines := []string{s.Title.Render("In " + v.Title())}
		lines = append(lines, indent(lay(v.FullHelp(), inner-2))...)
		lines = append(lines, "", s.Title.Render("Everywhere"))
		lines = append(lines, indent(lay(globalGroups(km.Global), inner-2))...)
		lines = append(lines, "", s.Title.Render("In the navigator")+s.Subtle.Render(" ("+km.Global.NextFocus.Help().Key+" gives it the keys)"))
		lines = append(lines, indent(lay(navigatorGroups(km.Shell), inner-2))...)
		return append(lines, "",
			s.Subtle.Render(km.Global.Jump.Help().Key+" takes owner bob, key K, record ID, or a bare ULID/key"),
			s.Subtle.Render("mouse: wheel scrolls, click selects · "+km.Global.Help.Help().Key+" or "+km.Shell.HelpClose.Help().Key+" closes"))
	}
	lines := layout(o.columns)
	if len(lines)+s.Modal.GetVerticalFrameSize() > h {
		lines = layout(o.flow)
	}
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, inner, "…")
	}
	return lipgloss.Place(w, h, lipgloss.Center, lipgloss.Center, s.Modal.Render(strings.Join(lines, "\n")))
}

func indent(lines []string) []string {
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return lines
}

// columns lays groups out with bubbles/help's full view: groups side by side while they fit
// the width, the next ones on the lines below.
func (o *helpOverlay) columns(groups [][]key.Binding, w int) []string {
	var rows [][][]key.Binding
	var row [][]key.Binding
	for _, grp := range groups {
		if len(row) > 0 && lipgloss.Width(o.model.FullHelpView(append(row, grp))) > w {
			rows = append(rows, row)
			row = nil
		}
		row = append(row, grp)
	}
	if len(row) > 0 {
		rows = append(rows, row)
	}
	var out []string
	for _, r := range rows {
		if block := o.model.FullHelpView(r); block != "" {
			out = append(out, strings.Split(block, "\n")...)
		}
	}
	return out
}

// flow lays each group out with bubbles/help's short view, over as many lines of the width as
// it needs.
func (o *helpOverlay) flow(groups [][]key.Binding, w int) []string {
	var out []string
	for _, grp := range groups {
		var line []key.Binding
		for _, b := range grp {
			if !b.Enabled() {
				continue
			}
			if len(line) > 0 && lipgloss.Width(o.model.ShortHelpView(append(line, b))) > w {
				out = append(out, o.model.ShortHelpView(line))
				line = nil
			}
			line = append(line, b)
		}
		if len(line) > 0 {
			out = append(out, o.model.ShortHelpView(line))
		}
	}
	return out
}

// footerKeys is the line above the status: the prompt when one is open, else the form's or the
// focused view's keys and the keys used most, as many as fit.
func (m *Model) footerKeys() string {
	if m.prompt != nil {
		return fit(" "+m.prompt.input.View(), m.width, 1)
	}
	// The keys that do not fit are left out and marked "…"; "? help", which shows them all, and
	// "q quit" stay at the end of the line.
	h := m.help.model
	g := m.ctx.Keys.Global
	var rest, last []key.Binding
	for _, b := range m.shortHelp() {
		if b.Help() == g.Help.Help() || b.Help() == g.Quit.Help() {
			last = append(last, b)
		} else if b.Enabled() {
			rest = append(rest, b)
		}
	}
	sep := h.Styles.ShortSeparator.Render(h.ShortSeparator)
	tail := h.ShortHelpView(last)
	avail := m.width - 1
	if tail != "" {
		avail -= lipgloss.Width(sep + tail)
	}
	line := h.ShortHelpView(rest)
	if lipgloss.Width(line) > avail {
		// As many as fit with the mark after them (bubbles/help's own cut can overflow by one).
		ellipsis := " " + h.Styles.Ellipsis.Render("…")
		n := 0
		for n < len(rest) && lipgloss.Width(h.ShortHelpView(rest[:n+1])+ellipsis) <= avail {
			n++
		}
		line = h.ShortHelpView(rest[:n]) + ellipsis
	}
	if line != "" && tail != "" {
		line += sep
	}
	line += tail
	return fit(" "+line, m.width, 1)
}

func (m *Model) shortHelp() []key.Binding {
	if m.form != nil {
		return m.form.ShortHelp()
	}
	g := m.ctx.Keys.Global
	if m.nav.focused {
		// The navigator has the keys: its own, not the view's (which it does not pass on).
		k := m.ctx.Keys.Shell
		back := key.NewBinding(key.WithKeys(g.NextFocus.Keys()...), key.WithHelp(g.NextFocus.Help().Key, "back to the view"))
		digits := key.NewBinding(key.WithKeys(g.Views.Keys()...), key.WithHelp(g.Views.Help().Key, "switch"))
		return []key.Binding{k.NavUp, k.NavDown, k.NavLeave, back, digits, g.Help, g.Quit}
	}
	return append(m.views[m.active].ShortHelp(), g.Filter, g.Jump, g.NextFocus, g.Help, g.Quit)
}
