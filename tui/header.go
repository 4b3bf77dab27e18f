package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/views"
)

// header is the frame's top line: where the workbench is connected, the owner, the mode
// (read-write, or READ-ONLY with the session's reason), a warning while acknowledged keys can be
// lost on failover (the MEM-001 limit gives way to it, then it takes its short form "ASYNC REPL"),
// a moved clock, the MEM-001 limit and
// the time. The connection, the owner and the mode always stay: on a narrow terminal the
// moved clock's badge takes its short form first ("clock +1h"), the connection shortens down
// to its kind ("embedded /…", the host), then the MEM-001 limit and the time go, and only then
// a long owner is cut. A line still too long ends in "…". cat says the live MEM-001 limit
// (nil: not shown).
func header(ctx *uictx.ProgramContext, cat views.Catalog, width int) string {
	s := ctx.Styles
	c := ctx.Conn
	conn := termsafe.Line(c.Display)
	if c.Database != "" {
		conn += " · db " + termsafe.Line(c.Database)
	}
	owner := termsafe.Line(ctx.Owner)
	mode := s.Badge.Render("read-write")
	if ctx.ReadOnly() {
		badge := "READ-ONLY"
		if r := c.ReadOnlyReason; r != "" && r != "read-only session" {
			badge += " · " + termsafe.Line(r)
		}
		if !c.ReadOnly && ctx.Writes != nil && apperr.Is(ctx.Writes.WriteRefusal(), apperr.ReplicationUnsafe) {
			// require_synchronous_replication, unmet: writes come back once a synchronous standby does.
			badge = "WRITES REFUSED · no sync standby"
		}
		mode = s.BadgeDanger.Render(badge)
	}
	// Writes accepted with only asynchronous standbys (or synchronous_commit off or local): a key
	// acknowledged now can be lost on failover, and the header says so while it is true.
	var repl, replShort string
	if !ctx.ReadOnly() && ctx.Replication != nil && ctx.Replication.ReplicationRisk() != "" {
		repl, replShort = "async repl: failover can lose acked keys", "ASYNC REPL"
	}
	var clock, clockShort string
	if ctx.Clock != nil && ctx.Clock.Offset() != 0 {
		clock, clockShort = "clock "+fmtOffset(ctx.Clock.Offset()), "clock "+shortOffset(ctx.Clock.Offset())
	}
	mem := ""
	if cat != nil {
		mem = fmt.Sprintf("MEM-001 max %d", cat.MemMaxContentLength())
	}
	now := ctx.Now().Local().Format("15:04:05")
	sep := s.Subtle.Render(" │ ")

	connW, ownerW := ansi.StringWidth(conn), ansi.StringWidth(owner)
	render := func() string {
		parts := []string{s.HeaderTitle.Render("idemwork"), s.Subtle.Render(cutTo(conn, connW)), "owner " + s.Bold.Render(cutTo(owner, ownerW)), mode}
		if repl != "" {
			parts = append(parts, s.BadgeDanger.Render(repl))
		}
		if clock != "" {
			parts = append(parts, s.BadgeWarn.Render(clock))
		}
		if mem != "" {
			parts = append(parts, s.Subtle.Render(mem))
		}
		if now != "" {
			parts = append(parts, s.Subtle.Render(now))
		}
		return " " + strings.Join(parts, sep)
	}
	over := func() int { return ansi.StringWidth(render()) - width }
	shrink := func(w *int, floor int) {
		if o := over(); o > 0 && *w > floor {
			*w = max(floor, *w-o)
		}
	}
	for _, step := range []func(){
		func() { clock = clockShort },
		func() {
			if repl != "" {
				mem = "" // the warning goes before the MEM-001 limit
			}
		},
		func() { repl = replShort },
		func() { shrink(&connW, connFloor(conn)) },
		func() { mem = "" },
		func() { now = "" },
		func() { shrink(&ownerW, 8) },
	} {
		if over() <= 0 {
			break
		}
		step()
	}
	return fit(render(), width, 1)
}

// connFloor is how short the connection may get: its first word (embedded, or the host) and a
// little of what follows, marked cut — but never more than maxConnFloor cells, so a long host
// (a socket directory's path) cannot push the mode off the line.
func connFloor(conn string) int {
	first, _, more := strings.Cut(conn, " ")
	if !more {
		return min(ansi.StringWidth(first), maxConnFloor)
	}
	return min(ansi.StringWidth(first)+3, ansi.StringWidth(conn), maxConnFloor)
}

// maxConnFloor bounds connFloor: enough of a host to recognise it.
const maxConnFloor = 24

// cutTo cuts s to w cells, marking the cut with "…".
func cutTo(s string, w int) string {
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, "…")
}

// shortOffset is a moved clock's offset in the header's short form: "+1h", "-2h30m", "+1h0m5s".
func shortOffset(d time.Duration) string {
	o := fmtOffset(d)
	if strings.HasSuffix(o, "m0s") {
		o = strings.TrimSuffix(o, "0s")
	}
	if strings.HasSuffix(o, "h0m") {
		o = strings.TrimSuffix(o, "0m")
	}
	return o
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
	text, isErr := m.shownStatus()
	if text == "" {
		return fit(s.Subtle.Render(lines[0]), m.width, 1)
	}
	st := s.Status
	if isErr {
		st = s.StatusError
	}
	for i, l := range lines {
		lines[i] = st.Render(l)
	}
	return fit(strings.Join(lines, "\n"), m.width, len(lines))
}

// shownStatus is the status message on screen and whether it is an error: the latest message,
// else while the database is down what to do about it (it stays until it answers), else "".
func (m *Model) shownStatus() (string, bool) {
	switch {
	case m.statusText != "":
		return m.statusText, m.statusErr
	case m.dbDown:
		return m.ctx.UnreachableText(), true
	}
	return "", false
}

// statusLines is the status message wrapped to the terminal's width, unstyled, one space in.
func (m *Model) statusLines() []string {
	text, _ := m.shownStatus()
	if text == "" || m.width <= 2 {
		return []string{" ready"}
	}
	// At spaces only: a path or a flag (--data-dir) is never split at its hyphens (ansi.Wrap
	// breaks after each; a no-break hyphen stands in while it wraps).
	text = termsafe.Line(text)
	protect := !strings.Contains(text, "\u2011")
	if protect {
		text = strings.ReplaceAll(text, "-", "\u2011")
	}
	lines := strings.Split(ansi.Wrap(text, m.width-2, ""), "\n")
	for i := range lines {
		if protect {
			lines[i] = strings.ReplaceAll(lines[i], "\u2011", "-")
		}
	}
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
