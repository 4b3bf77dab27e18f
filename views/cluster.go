package views

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// clusterRefresh is how often the Cluster view reads the cluster, on screen or not: a failover
// must be seen when it happens, whichever view is shown.
const clusterRefresh = time.Second

// clusterRetryFor bounds the retries of a storm's failed requests after a failover.
const clusterRetryFor = 90 * time.Second

// ClusterReader reads the servers behind the session's database: the connected node's
// replication and, for a pg_auto_failover formation, the monitor's view of its nodes.
type ClusterReader interface {
	Cluster(ctx context.Context) (model.Cluster, error)
}

// Cluster shows the nodes behind the database live — which is primary, each standby's sync
// state and lag, the monitor's states and health checks for a pg_auto_failover formation —
// and what moved: the moment the primary changed, the session's reconnection, and every storm
// fired across it: its requests that got DATABASE_UNAVAILABLE or COMMIT_UNKNOWN, their retries
// once the new primary answers, and what the database holds of the key after them.
type Cluster struct {
	ctx   *uictx.ProgramContext
	src   ClusterReader
	run   StormRunner
	w, h  int
	table Table

	state   model.Cluster
	have    bool
	err     string
	down    bool
	req     int
	updated time.Time

	primary   string // "name addr" of the last primary seen
	connected string
	sync      bool
	moves     []primaryMove
	events    []clusterEvent
	storms    []*stormAcross
}

type primaryMove struct {
	at       time.Time
	from, to string
}

type clusterEvent struct {
	at   time.Time
	text string
	warn bool
}

// stormAcross is a storm that ran into a failover (or failed while the database moved).
type stormAcross struct {
	id, key                   string
	started, ended            time.Time
	requests                  int
	unavailable, unknown, bad int // DATABASE_UNAVAILABLE, COMMIT_UNKNOWN, any other failure
	move                      *primaryMove
	verdict                   string
	spec                      stormtypes.Spec
	// The retries of the failed requests, once the new primary answers.
	retrying bool
	retried  map[string]int
	after    string
	afterOK  bool
}

func (s *stormAcross) failed() int { return s.unavailable + s.unknown + s.bad }

type clusterTickMsg struct{}

type clusterMsg struct {
	req   int
	state model.Cluster
	err   error
}

type clusterRetryMsg struct {
	id       string
	outcomes map[string]int
	summary  stormtypes.Summary
	err      error
}

// NewCluster returns the Cluster view; run (nil: none) retries the failed requests of a storm
// that ran into a failover.
func NewCluster(ctx *uictx.ProgramContext, src ClusterReader, run StormRunner) *Cluster {
	v := &Cluster{ctx: ctx, src: src, run: run}
	v.setColumns(120)
	return v
}

// clusterColumns are the node table's columns by pane width: every one when it is wide; else
// the address goes (the name says which node) and the state narrows.
var clusterColumns = []struct {
	minWidth int
	cols     []Column
}{
	{100, []Column{{Title: "NODE", Width: 12}, {Title: "ADDRESS", Width: 21}, {Title: "ROLE", Width: 9},
		{Title: "STATE", Width: 24}, {Title: "SYNC", Width: 7}, {Title: "LAG", Width: 13}, {Title: "HEALTH", Min: 7}}},
	{0, []Column{{Title: "NODE", Width: 9}, {Title: "ROLE", Width: 9}, {Title: "STATE", Width: 18},
		{Title: "SYNC", Width: 7}, {Title: "LAG", Width: 9}, {Title: "HEALTH", Min: 7}}},
}

func (v *Cluster) setColumns(w int) {
	for _, c := range clusterColumns {
		if w >= c.minWidth {
			if len(v.table.Columns) != len(c.cols) {
				v.table.Columns = c.cols
				v.fill()
			}
			return
		}
	}
}

// Title names the view.
func (v *Cluster) Title() string { return "Cluster" }

// Init starts reading the cluster.
func (v *Cluster) Init() tea.Cmd { return tea.Batch(v.poll(), v.tick()) }

func (v *Cluster) tick() tea.Cmd {
	return tea.Tick(clusterRefresh, func(time.Time) tea.Msg { return clusterTickMsg{} })
}

func (v *Cluster) poll() tea.Cmd {
	v.req++
	req, src := v.req, v.src
	return query(func(ctx context.Context) tea.Msg {
		st, err := src.Cluster(ctx)
		return clusterMsg{req: req, state: st, err: err}
	})
}

// Update handles messages.
func (v *Cluster) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case clusterTickMsg:
		return tea.Batch(v.poll(), v.tick())
	case clusterMsg:
		if msg.req != v.req {
			return nil
		}
		v.observe(msg.state, msg.err)
	case stormDoneMsg:
		return v.stormDone(msg)
	case clusterRetryMsg:
		v.retried(msg)
	case tea.MouseMsg:
		wheelTable(&v.table, msg, msg.Y-3)
	case tea.KeyMsg:
		if moveTable(v.ctx.Keys.List, &v.table, msg, v.h-4) {
			return nil
		}
		if key.Matches(msg, v.ctx.Keys.List.Refresh) {
			return v.poll()
		}
	}
	return nil
}

// observe takes a reading (or its failure) and notes what changed since the last one.
func (v *Cluster) observe(st model.Cluster, err error) {
	now := time.Now()
	if err != nil {
		v.err = errText(err)
		if !v.down {
			v.down = true
			v.event(now, true, "the database does not answer: "+firstLineOf(v.err))
		}
		return
	}
	if v.down {
		v.down = false
		v.event(now, false, "the database answers again")
	}
	first := !v.have
	v.err, v.state, v.have, v.updated = "", st, true, now
	if p, ok := st.Primary(); ok {
		id := p.Name + " " + p.Addr
		if v.primary != "" && id != v.primary {
			mv := primaryMove{at: now, from: v.primary, to: id}
			v.moves = append(v.moves, mv)
			v.event(now, true, fmt.Sprintf("the primary moved: %s → %s", v.primary, id))
			v.attachMove(mv)
		}
		v.primary = id
	}
	if st.Connected != "" && st.Connected != v.connected {
		if v.connected != "" {
			v.event(now, false, fmt.Sprintf("this session reconnected: %s → %s", v.connected, st.Connected))
		}
		v.connected = st.Connected
	}
	if !first && st.Synchronous != v.sync {
		if st.Synchronous {
			v.event(now, false, "replication is synchronous again: an acknowledged commit is on a standby too")
		} else {
			v.event(now, true, "replication is not synchronous: a commit acknowledged now can be lost on failover")
		}
	}
	v.sync = st.Synchronous
	v.fill()
}

func (v *Cluster) event(at time.Time, warn bool, text string) {
	v.events = append(v.events, clusterEvent{at: at, text: text, warn: warn})
	if len(v.events) > 100 {
		v.events = v.events[len(v.events)-100:]
	}
}

// moveWindow is how long after a storm ended a primary move is still its failover: the monitor
// settles the new primary (and this view sees it) seconds after the old one stopped answering.
const moveWindow = time.Minute

// attachMove gives a primary move to the storms without one that ended at most moveWindow
// before it was seen.
func (v *Cluster) attachMove(mv primaryMove) {
	for _, s := range v.storms {
		if s.move == nil && mv.at.After(s.started.Add(-2*clusterRefresh)) && mv.at.Before(s.ended.Add(moveWindow)) {
			m := mv
			s.move = &m
		}
	}
}

// stormDone notes a storm that ran into a failover: some requests failed, or the primary moved
// while it ran. Its failed requests are retried with the same key once the new primary answers.
func (v *Cluster) stormDone(msg stormDoneMsg) tea.Cmd {
	sum := msg.summary
	if sum.Requests == 0 {
		return nil
	}
	s := &stormAcross{id: sum.Storm.ID, key: sum.Storm.Key, ended: time.Now(), requests: sum.Requests, verdict: sum.Verdict.Text, spec: msg.spec}
	s.started = s.ended.Add(-time.Duration(sum.WallMs * float64(time.Millisecond)))
	for code, n := range sum.Outcomes {
		switch code {
		case string(idemtype.Executed), string(idemtype.Replayed), string(idemtype.Joined):
		case "DATABASE_UNAVAILABLE":
			s.unavailable += n
		case "COMMIT_UNKNOWN":
			s.unknown += n
		default:
			if st, ok := sum.Errors[code]; !ok || st.Status == 0 || st.Status >= 500 {
				s.bad += n // a failure; a refusal (4xx) is an answer
			}
		}
	}
	for i := len(v.moves) - 1; i >= 0; i-- {
		if mv := v.moves[i]; !mv.at.Before(s.started.Add(-2 * clusterRefresh)) {
			m := mv
			s.move = &m
			break
		}
	}
	if s.failed() == 0 && s.move == nil {
		return nil
	}
	v.storms = append(v.storms, s)
	if len(v.storms) > 20 {
		v.storms = v.storms[len(v.storms)-20:]
	}
	if s.failed() == 0 || v.run == nil || msg.spec.Op == "" {
		return nil
	}
	if v.ctx.ReadOnly() {
		s.after = "not retried: this session is read-only (retry the key yourself: a replay tells what happened)"
		return nil
	}
	s.retrying = true
	return v.retry(s)
}

// retry sends the storm's failed requests again, one at a time with the same key and body, as
// a client would, until each gets an answer (bounded): a replay says what happened to the key.
func (v *Cluster) retry(s *stormAcross) tea.Cmd {
	run, id, spec, n := v.run, s.id, s.spec, s.failed()
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), clusterRetryFor)
		defer cancel()
		outcomes := map[string]int{}
		var last stormtypes.Summary
		var err error
		for wait := 200 * time.Millisecond; n > 0; wait = min(2*wait, 2*time.Second) {
			rs := spec
			rs.N, rs.Concurrency, rs.Processes, rs.Share, rs.FailFirst, rs.Hold = n, 1, 1, false, false, 0
			events := make(chan stormtypes.Event, n)
			locks := make(chan stormtypes.LockSample, 1)
			last, err = run(ctx, rs, events, locks)
			close(events)
			n = 0
			for e := range events {
				if e.Succeeded() || (e.Status >= 400 && e.Status < 500) {
					outcomes[e.Outcome]++
				} else {
					n++ // not answered yet: again, after a pause
				}
			}
			if n == 0 || ctx.Err() != nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		if n > 0 {
			outcomes["UNANSWERED"] += n
		}
		return clusterRetryMsg{id: id, outcomes: outcomes, summary: last, err: err}
	}
}

func (v *Cluster) retried(msg clusterRetryMsg) {
	for _, s := range v.storms {
		if s.id != msg.id || !s.retrying {
			continue
		}
		s.retrying, s.retried = false, msg.outcomes
		ver := msg.summary.Verified
		units, what := ver.Revisions, "revision"
		if s.spec.Op == stormtypes.OpAction {
			units, what = ver.Executions, "execution"
		}
		switch {
		case msg.outcomes["UNANSWERED"] > 0:
			s.after = fmt.Sprintf("%d request(s) still unanswered after %s", msg.outcomes["UNANSWERED"], clusterRetryFor)
		case units == 1 && ver.KeyStatus == "SUCCEEDED":
			s.after, s.afterOK = fmt.Sprintf("executed once: 1 %s in the database, the key SUCCEEDED", what), true
		default:
			s.after = fmt.Sprintf("%d %s(s) in the database, the key %s — %s", units, what, ver.KeyStatus, msg.summary.Verdict.Text)
		}
		if msg.err != nil {
			s.after += " (" + firstLineOf(errText(msg.err)) + ")"
		}
	}
}

func (v *Cluster) fill() {
	rows := make([]Row, len(v.state.Nodes))
	for i, n := range v.state.Nodes {
		lag := "—"
		switch {
		case n.LagBytes >= 0 && n.ReplayLagMs >= 0:
			lag = fmt.Sprintf("%s %s", bytesText(n.LagBytes), readableMs(n.ReplayLagMs))
		case n.LagBytes >= 0:
			lag = bytesText(n.LagBytes)
		}
		health := "—"
		if n.Healthy != nil {
			health = map[bool]string{true: "ok", false: "FAILING"}[*n.Healthy]
		}
		name := n.Name
		if n.Connected {
			name = "*" + name // the session's node, marked in the text (NO_COLOR)
		}
		sync := n.Sync
		if sync == "" {
			sync = "—"
		}
		cells := map[string]string{"NODE": printable(name), "ADDRESS": printable(n.Addr), "ROLE": n.Role, "STATE": printable(n.State),
			"SYNC": sync, "LAG": lag, "HEALTH": health}
		r := Row{Cells: make([]string, len(v.table.Columns))}
		for j, c := range v.table.Columns {
			r.Cells[j] = cells[c.Title]
		}
		if n.Healthy != nil && !*n.Healthy {
			r.Style = &v.ctx.Styles.Danger
		}
		rows[i] = r
	}
	v.table.SetRows(rows)
}

func bytesText(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// SetSize sets the drawing area.
func (v *Cluster) SetSize(w, h int) {
	v.w, v.h = w, h
	v.setColumns(w)
	v.table.SetSize(w, min(len(v.state.Nodes)+2, max(3, h/3)))
}

// View renders the view: a head, the nodes, then what happened (newest first).
func (v *Cluster) View() string {
	s := v.ctx.Styles
	v.table.SetSize(v.w, min(len(v.state.Nodes)+2, max(3, v.h/3)))
	source := "the connected node's view (pg_stat_replication)"
	if v.state.Source == "monitor" {
		source = "pg_auto_failover monitor " + printable(v.state.Monitor)
	}
	head := s.Title.Render("Cluster") + s.Subtle.Render(fmt.Sprintf(" · live, every %s · %s · * this session's node", clusterRefresh, source))
	var repl string
	switch {
	case !v.have:
		repl = s.Subtle.Render("reading the cluster…")
	case v.state.Synchronous:
		repl = s.Success.Render("synchronous: a commit acknowledged here is on a standby too (synchronous_standby_names " + printable(v.state.SyncNames) + ")")
	default:
		repl = s.Warning.Render("not synchronous: a commit acknowledged here can be lost on failover (" + asyncWhy(v.state) + ")")
	}
	lines := []string{termsafe.Cut(head, v.w), termsafe.Cut(repl, v.w)}
	if v.err != "" {
		lines = append(lines, termsafe.Cut(s.Danger.Render(v.err), v.w))
	}
	for _, n := range v.state.Notes {
		lines = append(lines, termsafe.Cut(s.Subtle.Render(printable(n)), v.w))
	}
	lines = append(lines, v.table.View(s, true))
	lines = append(lines, v.history()...)
	if len(lines) > v.h {
		lines = lines[:v.h]
	}
	return strings.Join(lines, "\n")
}

// asyncWhy says why commits are not synchronous.
func asyncWhy(st model.Cluster) string {
	switch {
	case st.SyncNames == "":
		return "synchronous_standby_names is empty"
	case st.SyncCommit == "off" || st.SyncCommit == "local":
		return "synchronous_commit = " + st.SyncCommit
	}
	return "no synchronous standby attached"
}

// history is the storms across a failover and the events, newest first, as lines.
func (v *Cluster) history() []string {
	s := v.ctx.Styles
	type line struct {
		at   time.Time
		text string
	}
	var out []line
	for _, e := range v.events {
		st := s.Subtle
		if e.warn {
			st = s.Warning
		}
		out = append(out, line{e.at, termsafe.Cut(st.Render(e.at.Local().Format("15:04:05.000")+"  "+printable(e.text)), v.w)})
	}
	for _, x := range v.storms {
		moment := "  key " + printable(x.key) + " · no move of the primary seen (yet)"
		if x.move != nil {
			moment = fmt.Sprintf("  key %s · the primary moved at %s (%s → %s)", printable(x.key), x.move.at.Local().Format("15:04:05.000"), x.move.from, x.move.to)
		}
		head := fmt.Sprintf("%s  storm %s: %d requests, %d DATABASE_UNAVAILABLE, %d COMMIT_UNKNOWN, %d other failures",
			x.ended.Local().Format("15:04:05.000"), x.id, x.requests, x.unavailable, x.unknown, x.bad)
		after := "  after their retries: "
		switch {
		case x.retrying:
			after += "retrying…"
		case x.after != "":
			after += retriedText(x.retried) + x.after
		case x.failed() == 0:
			after += "nothing to retry (storm verdict: " + x.verdict + ")"
		default:
			after += "not retried"
		}
		st := s.Warning
		if x.afterOK {
			st = s.Success
		}
		out = append(out, line{x.ended, termsafe.Cut(s.Warning.Render(head), v.w) + "\n" + termsafe.Cut(s.Warning.Render(moment), v.w) + "\n" + termsafe.Cut(st.Render(after), v.w)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.After(out[j].at) })
	lines := []string{s.Bold.Render("What moved") + s.Subtle.Render(" (newest first)")}
	if len(out) == 0 {
		lines = append(lines, s.Subtle.Render("nothing yet: a failover (pg_autoctl perform failover) and the storms fired across it show here"))
	}
	for _, l := range out {
		lines = append(lines, strings.Split(l.text, "\n")...)
	}
	return lines
}

func retriedText(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	codes := make([]string, 0, len(m))
	for c := range m {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	parts := make([]string, 0, len(codes))
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%s %d", c, m[c]))
	}
	return strings.Join(parts, ", ") + " — "
}

func firstLineOf(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// ShortHelp is the footer help.
func (v *Cluster) ShortHelp() []key.Binding { return []key.Binding{v.ctx.Keys.List.Refresh} }

// FullHelp is the ? help.
func (v *Cluster) FullHelp() [][]key.Binding {
	return [][]key.Binding{{v.ctx.Keys.List.Up, v.ctx.Keys.List.Down}, {v.ctx.Keys.List.Refresh, v.ctx.Keys.Global.Copy}}
}

// Capturing is false.
func (v *Cluster) Capturing() bool { return false }

// SetFilter filters the nodes.
func (v *Cluster) SetFilter(f string) { v.table.SetFilter(f) }

// Selection is the selected node's address.
func (v *Cluster) Selection() string {
	if i := v.table.Selected(); i >= 0 && i < len(v.state.Nodes) {
		return v.state.Nodes[i].Addr
	}
	return ""
}
