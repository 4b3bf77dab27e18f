package views

import (
	gocontext "context"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"idemwork/store"
	tctx "idemwork/tui/context"
)

// lockRefresh is how often the Locks view polls while it is on screen.
const lockRefresh = 400 * time.Millisecond

// Locks shows the database's client sessions live: who waits on a lock, on whom
// (pg_blocking_pids), for which lock, and how long their transaction has been open. During a
// same-key storm without sharing, the losers show up here waiting on the winner's transaction —
// that is the unique index at work.
type Locks struct {
	ctx      *tctx.ProgramContext
	w, h     int
	table    Table
	sessions []store.Session
	err      string
	active   bool
	paused   bool
	req      int
	ticking  bool
	updated  time.Time
	peakWait int
}

type locksTickMsg struct{}

type locksMsg struct {
	req      int
	sessions []store.Session
	err      error
}

var keyPause = key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "pause/resume"))

// NewLocks returns the Locks view.
func NewLocks(ctx *tctx.ProgramContext) *Locks {
	v := &Locks{ctx: ctx}
	v.table.Columns = []Column{{Title: "PID", Width: 7}, {Title: "STATE", Width: 8}, {Title: "WAITS ON", Width: 12}, {Title: "BLOCKED BY", Width: 10},
		{Title: "XACT", Width: 8}, {Title: "LOCK", Width: 18}, {Title: "QUERY", Min: 10}}
	return v
}

// Title names the view.
func (v *Locks) Title() string { return "Locks" }

// Init does nothing until the view is shown.
func (v *Locks) Init() tea.Cmd { return nil }

// SetActive starts or stops polling as the view comes on or off screen.
func (v *Locks) SetActive(active bool) tea.Cmd {
	v.active = active
	if active && !v.ticking {
		v.ticking = true
		return tea.Batch(v.poll(), v.tick())
	}
	return nil
}

func (v *Locks) tick() tea.Cmd {
	return tea.Tick(lockRefresh, func(time.Time) tea.Msg { return locksTickMsg{} })
}

func (v *Locks) poll() tea.Cmd {
	v.req++
	req, db := v.req, v.ctx.DB
	return query(func(ctx gocontext.Context) tea.Msg {
		s, err := db.Sessions(ctx)
		return locksMsg{req: req, sessions: s, err: err}
	})
}

// Update handles messages.
func (v *Locks) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case locksTickMsg:
		if !v.active {
			v.ticking = false
			return nil
		}
		if v.paused {
			return v.tick()
		}
		return tea.Batch(v.poll(), v.tick())
	case locksMsg:
		if msg.req != v.req {
			return nil
		}
		if msg.err != nil {
			v.err = errText(msg.err)
			return nil
		}
		v.err, v.sessions, v.updated = "", msg.sessions, time.Now()
		v.fill()
	case tea.MouseMsg:
		wheelTable(&v.table, msg, msg.Y-2)
	case tea.KeyMsg:
		if moveTable(&v.table, msg, v.h-3) {
			return nil
		}
		switch {
		case key.Matches(msg, keyPause):
			v.paused = !v.paused
		case key.Matches(msg, keyRefresh):
			return v.poll()
		}
	}
	return nil
}

// Waiting counts sessions waiting on a lock.
func (v *Locks) Waiting() int {
	n := 0
	for _, s := range v.sessions {
		if len(s.BlockedBy) > 0 {
			n++
		}
	}
	return n
}

func (v *Locks) fill() {
	rows := make([]Row, len(v.sessions))
	for i, s := range v.sessions {
		var by []string
		for _, p := range s.BlockedBy {
			by = append(by, fmt.Sprint(p))
		}
		wait := s.WaitEvent
		if s.WaitType != "" && s.WaitType != s.WaitEvent {
			wait = s.WaitType + ":" + s.WaitEvent
		}
		r := Row{Cells: []string{fmt.Sprint(s.PID), s.State, wait, strings.Join(by, ","), fmt.Sprintf("%.0fms", s.XactMs),
			strings.TrimSpace(s.LockType + " " + s.LockTarget), s.Query}}
		if len(s.BlockedBy) > 0 {
			r.Style = &v.ctx.Styles.Warning
		}
		rows[i] = r
	}
	v.table.SetRows(rows)
	if w := v.Waiting(); w > v.peakWait {
		v.peakWait = w
	}
}

// SetSize sets the drawing area.
func (v *Locks) SetSize(w, h int) { v.w, v.h = w, h; v.table.SetSize(w, h-2) }

// View renders the view.
func (v *Locks) View() string {
	s := v.ctx.Styles
	state := "live"
	if v.paused {
		state = "paused"
	}
	head := s.Title.Render("Locks") + s.Subtle.Render(fmt.Sprintf(" · %s, every %s · %d session(s) · ", state, lockRefresh, len(v.sessions))) +
		s.Warning.Render(fmt.Sprintf("%d waiting on a lock", v.Waiting())) + s.Subtle.Render(fmt.Sprintf(" (peak %d)", v.peakWait))
	sub := s.Subtle.Render("A storm with sharing off queues its losers here: INSERT … ON CONFLICT waits on the winner's transaction (lock: transactionid).")
	if v.err != "" {
		sub = s.Danger.Render(v.err)
	}
	return cut(head, v.w) + "\n" + cut(sub, v.w) + "\n" + v.table.View(s, true)
}

// ShortHelp is the footer help.
func (v *Locks) ShortHelp() []key.Binding { return []key.Binding{keyPause, keyRefresh} }

// FullHelp is the ? help.
func (v *Locks) FullHelp() [][]key.Binding {
	return [][]key.Binding{{keyUp, keyDown, keyPgUp, keyPgDown}, {keyPause, keyRefresh, keyCopy}}
}

// Capturing is false.
func (v *Locks) Capturing() bool { return false }

// SetFilter filters rows.
func (v *Locks) SetFilter(f string) { v.table.SetFilter(f) }

// Selection is the selected session's query.
func (v *Locks) Selection() string {
	if i := v.table.Selected(); i >= 0 && i < len(v.sessions) {
		return v.sessions[i].Query
	}
	return ""
}
