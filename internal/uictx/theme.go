package uictx

import (
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Theme is the set of semantic colours; each adapts to a light or dark terminal.
type Theme struct {
	Primary, Muted, Border, Accent     lipgloss.TerminalColor
	Success, Warning, Danger, Selected lipgloss.TerminalColor
	SelectedText                       lipgloss.TerminalColor
	// Mono is the NO_COLOR theme: no colour at all, so selection, focus and cursors are drawn
	// with reverse video, bold and underline instead (https://no-color.org forbids colour, not
	// those).
	Mono bool
}

// DefaultTheme is the workbench's palette.
func DefaultTheme() Theme {
	return Theme{
		Primary:      lipgloss.AdaptiveColor{Light: "#1F2328", Dark: "#E6EDF3"},
		Muted:        lipgloss.AdaptiveColor{Light: "#6E7781", Dark: "#8B949E"},
		Border:       lipgloss.AdaptiveColor{Light: "#D0D7DE", Dark: "#30363D"},
		Accent:       lipgloss.AdaptiveColor{Light: "#0969DA", Dark: "#58A6FF"},
		Success:      lipgloss.AdaptiveColor{Light: "#1A7F37", Dark: "#3FB950"},
		Warning:      lipgloss.AdaptiveColor{Light: "#9A6700", Dark: "#D29922"},
		Danger:       lipgloss.AdaptiveColor{Light: "#CF222E", Dark: "#F85149"},
		Selected:     lipgloss.AdaptiveColor{Light: "#DDF4FF", Dark: "#1F3A5F"},
		SelectedText: lipgloss.AdaptiveColor{Light: "#0A3069", Dark: "#FFFFFF"},
	}
}

// MonoTheme is the theme under NO_COLOR: every colour is "none".
func MonoTheme() Theme {
	n := lipgloss.NoColor{}
	return Theme{Primary: n, Muted: n, Border: n, Accent: n, Success: n, Warning: n, Danger: n, Selected: n, SelectedText: n, Mono: true}
}

// StylesForTerminal returns the workbench's styles for the terminal it runs in. With noColor
// (NO_COLOR set) lipgloss's own detection would drop every attribute along with the colours,
// leaving no selected row, focused field or text cursor on screen; instead the profile keeps
// attributes (plain ANSI) and the mono theme supplies no colour, so reverse video, bold and
// underline mark them. It sets lipgloss's process-wide profile, as a program's main does.
func StylesForTerminal(noColor bool) Styles {
	if !noColor {
		return NewStyles(DefaultTheme())
	}
	lipgloss.SetColorProfile(termenv.ANSI)
	return NewStyles(MonoTheme())
}

// Styles are built once from the theme and shared.
type Styles struct {
	Theme Theme

	Header, HeaderTitle, Badge, BadgeDanger, BadgeWarn lipgloss.Style
	Nav, NavItem, NavActive, NavFocused                lipgloss.Style
	Footer, Status, StatusError, HelpKey, HelpDesc     lipgloss.Style
	Title, Subtle, Bold, Success, Warning, Danger      lipgloss.Style
	Highlight                                          lipgloss.Style
	TableHeader, Row, RowSelected, Cell                lipgloss.Style
	Pane, PaneFocused, PaneTitle                       lipgloss.Style
	JSONKey, JSONString, JSONNumber, JSONPunct         lipgloss.Style
	InputLabel, InputLabelFocused, FieldError          lipgloss.Style
	Modal                                              lipgloss.Style
	// Cursor draws a text field's cursor (reverse video, visible without colour).
	Cursor lipgloss.Style
	// Mono reports the NO_COLOR theme.
	Mono bool
}

// NewStyles builds styles from a theme.
func NewStyles(t Theme) Styles {
	s := Styles{Theme: t}
	s.Header = lipgloss.NewStyle().Foreground(t.Primary).Padding(0, 1)
	s.HeaderTitle = lipgloss.NewStyle().Bold(true).Foreground(t.Accent)
	s.Badge = lipgloss.NewStyle().Bold(true).Foreground(t.Success)
	s.BadgeDanger = lipgloss.NewStyle().Bold(true).Foreground(t.Danger).Reverse(true).Padding(0, 1)
	s.BadgeWarn = lipgloss.NewStyle().Bold(true).Foreground(t.Warning)
	s.Nav = lipgloss.NewStyle().BorderStyle(lipgloss.NormalBorder()).BorderRight(true).BorderForeground(t.Border)
	s.NavItem = lipgloss.NewStyle().Foreground(t.Muted).Padding(0, 1)
	s.NavActive = lipgloss.NewStyle().Foreground(t.Accent).Bold(true).Padding(0, 1)
	s.NavFocused = s.NavActive.Reverse(true)
	s.Footer = lipgloss.NewStyle().Foreground(t.Muted).Padding(0, 1)
	s.Status = lipgloss.NewStyle().Foreground(t.Success)
	s.StatusError = lipgloss.NewStyle().Foreground(t.Danger).Bold(true)
	s.HelpKey = lipgloss.NewStyle().Foreground(t.Accent)
	s.HelpDesc = lipgloss.NewStyle().Foreground(t.Muted)
	s.Title = lipgloss.NewStyle().Bold(true).Foreground(t.Primary)
	s.Subtle = lipgloss.NewStyle().Foreground(t.Muted)
	s.Bold = lipgloss.NewStyle().Bold(true)
	s.Highlight = lipgloss.NewStyle().Foreground(t.Accent).Bold(true)
	s.Success = lipgloss.NewStyle().Foreground(t.Success)
	s.Warning = lipgloss.NewStyle().Foreground(t.Warning).Bold(true)
	s.Danger = lipgloss.NewStyle().Foreground(t.Danger).Bold(true)
	s.TableHeader = lipgloss.NewStyle().Bold(true).Foreground(t.Muted)
	s.Row = lipgloss.NewStyle().Foreground(t.Primary)
	s.RowSelected = lipgloss.NewStyle().Background(t.Selected).Foreground(t.SelectedText).Bold(true)
	s.Cell = lipgloss.NewStyle()
	s.Pane = lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(t.Border).Padding(0, 1)
	s.PaneFocused = s.Pane.BorderForeground(t.Accent)
	s.PaneTitle = lipgloss.NewStyle().Bold(true).Foreground(t.Accent)
	s.JSONKey = lipgloss.NewStyle().Foreground(t.Accent)
	s.JSONString = lipgloss.NewStyle().Foreground(t.Success)
	s.JSONNumber = lipgloss.NewStyle().Foreground(t.Warning)
	s.JSONPunct = lipgloss.NewStyle().Foreground(t.Muted)
	s.InputLabel = lipgloss.NewStyle().Foreground(t.Muted)
	s.InputLabelFocused = lipgloss.NewStyle().Foreground(t.Accent).Bold(true)
	s.FieldError = lipgloss.NewStyle().Foreground(t.Danger)
	s.Modal = lipgloss.NewStyle().Border(lipgloss.RoundedBorder()).BorderForeground(t.Accent).Padding(0, 1)
	s.Cursor = lipgloss.NewStyle().Reverse(true)
	// The focused pane has a heavier border, which reads without colour too.
	s.PaneFocused = lipgloss.NewStyle().Border(lipgloss.ThickBorder()).BorderForeground(t.Accent).Padding(0, 1)
	if t.Mono {
		s.Mono = true
		s.RowSelected = lipgloss.NewStyle().Reverse(true).Bold(true)
		s.NavActive = lipgloss.NewStyle().Bold(true).Underline(true).Padding(0, 1)
		s.NavFocused = lipgloss.NewStyle().Bold(true).Reverse(true).Padding(0, 1)
		s.InputLabelFocused = lipgloss.NewStyle().Bold(true).Underline(true)
		s.PaneTitle = lipgloss.NewStyle().Bold(true)
		s.Subtle = lipgloss.NewStyle().Faint(true)
		s.HelpKey = lipgloss.NewStyle().Bold(true)
		s.BadgeDanger = lipgloss.NewStyle().Bold(true).Reverse(true).Padding(0, 1)
	}
	return s
}
