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

// statusLine is the frame's last line: the latest status message (an error in its style), or
// "ready".
func (m *Model) statusLine() string {
	s := m.ctx.Styles
	if m.statusText == "" {
		return fit(s.Subtle.Render(" ready"), m.width, 1)
	}
	st := s.Status
	if m.statusErr {
		st = s.StatusError
	}
	return fit(" "+st.Render(termsafe.Line(m.statusText)), m.width, 1)
}
