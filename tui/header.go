package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"idemwork/internal/termsafe"
	"idemwork/tui/shared"
	"idemwork/views"
)

// header is the frame's top line: where the workbench is connected, the owner, the mode
// (read-write, or READ-ONLY with the session's reason), a moved clock, the MEM-001 limit and
// the time. The connection gives way first on a narrow terminal: owner, mode and clock matter
// more. cat says the live MEM-001 limit (nil: not shown).
func header(ctx *shared.ProgramContext, cat views.Catalog, width int) string {
	s := ctx.Styles
	c := ctx.Conn
	conn := c.Display
	if c.Database != "" {
		conn += " · db " + c.Database
	}
	parts := []string{s.HeaderTitle.Render("idemwork"), s.Subtle.Render(termsafe.Line(conn)), "owner " + s.Bold.Render(termsafe.Line(ctx.Owner))}
	if ctx.ReadOnly() {
		badge := "READ-ONLY"
		if r := c.ReadOnlyReason; r != "" && r != "read-only session" {
			badge += " · " + r
		}
		parts = append(parts, s.BadgeDanger.Render(badge))
	} else {
		parts = append(parts, s.Badge.Render("read-write"))
	}
	if ctx.Clock != nil && ctx.Clock.Offset() != 0 {
		parts = append(parts, s.BadgeWarn.Render("clock "+fmtOffset(ctx.Clock.Offset())))
	}
	if cat != nil {
		parts = append(parts, s.Subtle.Render(fmt.Sprintf("MEM-001 max %d", cat.MemMaxContentLength())))
	}
	parts = append(parts, s.Subtle.Render(ctx.Now().Local().Format("15:04:05")))
	sep := s.Subtle.Render(" │ ")
	if over := ansi.StringWidth(" "+strings.Join(parts, sep)) - width; over > 0 {
		keep := ansi.StringWidth(conn) - over
		if keep < 8 {
			parts = append(parts[:1], parts[2:]...)
		} else {
			parts[1] = s.Subtle.Render(ansi.Truncate(conn, keep, "…"))
		}
	}
	return fit(" "+strings.Join(parts, sep), width, 1)
}

func fmtOffset(d time.Duration) string {
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return sign + d.Round(time.Second).String()
}

// maxStatusLines bounds how far a long status message wraps up the frame.
const maxStatusLines = 4

// statusLine is the frame's last lines: the latest status message (an error in its style), or
// "ready". A message longer than the line wraps onto more lines (up to maxStatusLines, the
// body giving them up while it is shown) rather than being cut: an error's reason and what to
// do are usually at its end. Only a message longer than that is cut, with "…".
func (m *Model) statusLine() string {
	s := m.ctx.Styles
	lines := m.statusLines()
	if m.statusText == "" {
		return fit(s.Subtle.Render(lines[0]), m.width, 1)
	}
	st := s.Status
	if m.statusErr {
		st = s.StatusError
	}
	for i, l := range lines {
		lines[i] = st.Render(l)
	}
	return fit(strings.Join(lines, "\n"), m.width, len(lines))
}

// statusLines is the status message wrapped to the terminal's width, unstyled, one space in.
func (m *Model) statusLines() []string {
	if m.statusText == "" || m.width <= 2 {
		return []string{" ready"}
	}
	lines := strings.Split(ansi.Wrap(termsafe.Line(m.statusText), m.width-2, ""), "\n")
	if len(lines) > maxStatusLines {
		lines = lines[:maxStatusLines]
		lines[maxStatusLines-1] = ansi.Truncate(lines[maxStatusLines-1]+" …", m.width-2, "…")
	}
	for i, l := range lines {
		lines[i] = " " + l
	}
	return lines
}

// setStatus shows text in the status line ("" clears it); the body gives up or takes back the
// lines a long message wraps over.
func (m *Model) setStatus(text string, isErr bool) {
	before := len(m.statusLines())
	m.statusText, m.statusErr, m.statusAt = text, isErr, time.Now()
	if len(m.statusLines()) != before {
		m.resize()
	}
}

// statusShownFor is how long the status message stays: 8 s, and 4 s more for each line it
// wraps onto, so a long reason can be read to its end.
func (m *Model) statusShownFor() time.Duration {
	return 8*time.Second + time.Duration(len(m.statusLines())-1)*4*time.Second
}
