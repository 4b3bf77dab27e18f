package views

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// lockRefresh is how often the Locks view polls while it is on screen.
const lockRefresh = 400 * time.Millisecond

// Locks shows the database's client sessions live: who waits on a lock, on whom
// (pg_blocking_pids), for which lock, their application name, and how long their transaction
// has been open. During a same-key storm without sharing, the losers show up here waiting on
// the winner's transaction — that is the unique index at work; a storm's own sessions are
// named "idemwork storm <id> …" and shown with the storm's key. Storms end faster than this
// view polls, so it also keeps the peak the storm's own sampler saw. Idle sessions are hidden
// unless asked for.
type Locks struct {
	ctx      *uictx.ProgramContext
	src      SessionReader
	w, h     int
	table    Table
	all      []model.Session
	sessions []model.Session // those shown
	err      string
	active   bool
	paused   bool
	showIdle bool
	req      int
	ticking  bool
	updated  time.Time
	peakWait int
	// The storms this view heard of (id → key), and the last one's sampler figures.
	storms    map[string]string
	storm     stormPeak
	stormLive bool
}

// stormPeak is a storm's own count of its sessions waiting on a lock.
type stormPeak struct {
	id, key string
	now     int
	peak    int
	at      time.Time
	samples int
}

type locksTickMsg struct{}

type locksMsg struct {
	req      int
	sessions []model.Session
	err      error
}

// SessionReader lists the database's other client sessions, with what they wait on, for the
// Locks view.
type SessionReader interface {
	Sessions(ctx context.Context) ([]model.Session, error)
}

// NewLocks returns the Locks view.
func NewLocks(ctx *uictx.ProgramContext, src SessionReader) *Locks {
	v := &Locks{ctx: ctx, src: src, storms: map[string]string{}}
	v.setColumns(120)
	return v
}

// lockColumns are the Locks table's columns by pane width: all of them when it is wide, else
// those that tell a storm's queue: who, in which state, waiting on what, since when, for which
// key.
var lockColumns = []struct {
	minWidth int
	cols     []Column
}{
	{150, []Column{{Title: "PID", Width: 7}, {Title: "APPLICATION", Width: 24}, {Title: "STATE", Width: 10},
		{Title: "WAITS ON", Width: 14}, {Title: "BLOCKED BY", Width: 10}, {Title: "XACT", Width: 7}, {Title: "LOCK", Width: 16},
		{Title: "KEY", Width: 16}, {Title: "QUERY", Min: 10}}},
	{96, []Column{{Title: "PID", Width: 7}, {Title: "APPLICATION", Width: 24}, {Title: "STATE", Width: 10},
		{Title: "WAITS ON", Width: 14}, {Title: "BLOCKED BY", Width: 10}, {Title: "XACT", Width: 7}, {Title: "KEY", Min: 8}}},
	{0, []Column{{Title: "PID", Width: 6}, {Title: "APPLICATION", Width: 24}, {Title: "STATE", Width: 10},
		{Title: "WAITS ON", Width: 13}, {Title: "XACT", Width: 6}, {Title: "KEY", Min: 1}}},
}

func (v *Locks) setColumns(w int) {
	for _, c := range lockColumns {
		if w >= c.minWidth {
			if len(v.table.Columns) != len(c.cols) {
				v.table.Columns = c.cols
				v.fill()
			}
			return
		}
	}
}

// shortState fits pg_stat_activity's states into the STATE column.
func shortState(s string) string {
	return strings.NewReplacer("idle in transaction", "idle in tx", "fastpath function call", "fastpath").Replace(s)
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
	req, db := v.req, v.src
	return query(func(ctx context.Context) tea.Msg {
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
		v.err, v.all, v.updated = "", msg.sessions, time.Now()
		v.fill()
	case stormLocksMsg:
		v.remember(msg.id, msg.key)
		if v.storm.id != msg.id {
			v.storm = stormPeak{id: msg.id, key: msg.key}
		}
		v.storm.now, v.storm.peak, v.storm.at, v.stormLive = msg.locks.Waiting, msg.locks.PeakWaiting, msg.locks.PeakAt, true
	case stormDoneMsg:
		if sm := msg.summary; sm.Storm.ID != "" {
			var at time.Time
			if sm.Locks.PeakAt != nil {
				at = *sm.Locks.PeakAt
			}
			v.remember(sm.Storm.ID, sm.Storm.Key)
			v.storm = stormPeak{id: sm.Storm.ID, key: sm.Storm.Key, peak: sm.Locks.PeakWaiting, at: at, samples: sm.Locks.Samples}
			v.stormLive = false
		}
	case tea.MouseMsg:
		wheelTable(&v.table, msg, msg.Y-3)
	case tea.KeyMsg:
		if moveTable(v.ctx.Keys.List, &v.table, msg, v.h-4) {
			return nil
		}
		switch {
		case key.Matches(msg, v.ctx.Keys.Locks.Pause):
			v.paused = !v.paused
		case key.Matches(msg, v.ctx.Keys.Locks.Idle):
			v.showIdle = !v.showIdle
			v.fill()
		case key.Matches(msg, v.ctx.Keys.List.Refresh):
			return v.poll()
		}
	}
	return nil
}

// remember keeps the key of a storm by its id (the last few storms).
func (v *Locks) remember(id, key string) {
	if id == "" {
		return
	}
	if _, ok := v.storms[id]; !ok && len(v.storms) >= 16 {
		clear(v.storms)
	}
	v.storms[id] = key
}

// stormKey is the key of the storm a session belongs to ("" when it is no known storm's).
func (v *Locks) stormKey(application string) string {
	rest, ok := strings.CutPrefix(application, "idemwork storm ")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, " ")
	return v.storms[id]
}

// Waiting counts sessions waiting on a lock.
func (v *Locks) Waiting() int {
	n := 0
	for _, s := range v.all {
		if len(s.BlockedBy) > 0 {
			n++
		}
	}
	return n
}

// idle counts the idle sessions (no transaction open), hidden unless showIdle.
func (v *Locks) idle() int {
	n := 0
	for _, s := range v.all {
		if s.State == "idle" && !s.InXact {
			n++
		}
	}
	return n
}

// readableMs is a duration for people: "0.4 s", "12 s", "3m05s", "2h10m".
func readableMs(ms float64) string {
	d := time.Duration(ms * float64(time.Millisecond))
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d < 100*time.Second:
		return fmt.Sprintf("%.0f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

func (v *Locks) fill() {
	v.sessions = v.sessions[:0]
	for _, s := range v.all {
		if v.showIdle || s.State != "idle" || s.InXact {
			v.sessions = append(v.sessions, s)
		}
	}
	rows := make([]Row, len(v.sessions))
	for i, s := range v.sessions {
		var by []string
		for _, p := range s.BlockedBy {
			by = append(by, fmt.Sprint(p))
		}
		wait := s.WaitEvent // the event names what it waits for: transactionid, tuple, ClientRead…
		xact := "-"
		if s.InXact {
			xact = readableMs(s.XactMs)
		}
		cells := map[string]string{"PID": fmt.Sprint(s.PID), "APPLICATION": printable(s.Application), "STATE": shortState(s.State), "WAITS ON": wait,
			"BLOCKED BY": strings.Join(by, ","), "XACT": xact, "LOCK": strings.TrimSpace(s.LockType + " " + s.LockTarget),
			"KEY": printable(v.stormKey(s.Application)), "QUERY": printable(s.Query)}
		r := Row{Cells: make([]string, len(v.table.Columns))}
		for j, c := range v.table.Columns {
			r.Cells[j] = cells[c.Title]
		}
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
func (v *Locks) SetSize(w, h int) {
	v.w, v.h = w, h
	v.setColumns(w)
	v.table.SetSize(w, h-3)
}

// View renders the view.
func (v *Locks) View() string {
	s := v.ctx.Styles
	state := "live"
	if v.paused {
		state = "paused"
	}
	idle := fmt.Sprintf("%d idle hidden (i)", v.idle())
	if v.showIdle {
		idle = "idle shown (i hides)"
	}
	head := s.Title.Render("Locks") + s.Subtle.Render(fmt.Sprintf(" · %s, every %s · %d session(s), %s · ", state, lockRefresh, len(v.all), idle)) +
		s.Warning.Render(fmt.Sprintf("%d waiting on a lock", v.Waiting())) + s.Subtle.Render(fmt.Sprintf(" (peak seen here %d)", v.peakWait))
	sub := s.Subtle.Render("A storm with sharing off queues its losers here: INSERT … ON CONFLICT waits on the winner's transaction (lock: transactionid); --hold keeps it open to watch.")
	if v.err != "" {
		sub = s.Danger.Render(v.err)
	}
	return termsafe.Cut(head, v.w) + "\n" + termsafe.Cut(v.stormLine(), v.w) + "\n" + termsafe.Cut(sub, v.w) + "\n" + v.table.View(s, true)
}

// stormLine is the last storm's own count of its sessions waiting on a lock.
func (v *Locks) stormLine() string {
	s := v.ctx.Styles
	st := v.storm
	if st.id == "" {
		return s.Subtle.Render("no storm yet: its own sessions (" + stormtypes.AppNamePrefix("<id>") + "…) are sampled every " + stormtypes.SampleEvery.String() + " and their peak shows here")
	}
	at := ""
	if !st.at.IsZero() && st.peak > 0 {
		at = " at " + st.at.Local().Format("15:04:05.000")
	}
	if v.stormLive {
		return s.Warning.Render(fmt.Sprintf("storm %s on key %s running: %d of its sessions wait now, peak %d%s", st.id, printable(st.key), st.now, st.peak, at))
	}
	return s.Subtle.Render(fmt.Sprintf("last storm %s on key %s: peak %d of its sessions waiting%s (%d samples every %s)", st.id, printable(st.key), st.peak, at, st.samples, stormtypes.SampleEvery))
}

// ShortHelp is the footer help.
func (v *Locks) ShortHelp() []key.Binding {
	return []key.Binding{v.ctx.Keys.Locks.Pause, v.ctx.Keys.Locks.Idle, v.ctx.Keys.List.Refresh}
}

// FullHelp is the ? help.
func (v *Locks) FullHelp() [][]key.Binding {
	return [][]key.Binding{{v.ctx.Keys.List.Up, v.ctx.Keys.List.Down, v.ctx.Keys.List.PgUp, v.ctx.Keys.List.PgDown}, {v.ctx.Keys.Locks.Pause, v.ctx.Keys.Locks.Idle, v.ctx.Keys.List.Refresh, v.ctx.Keys.Global.Copy}}
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
