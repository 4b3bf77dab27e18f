package views

import (
	gocontext "context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/progress"
	tea "github.com/charmbracelet/bubbletea"

	"idemwork/storm"
	tctx "idemwork/tui/context"
)

// Storm fires N concurrent requests of one operation on one key and shows, live, how each
// resolved (EXECUTED, JOINED, REPLAYED, waited on the unique index, or an error code), latency
// percentiles and a sparkline, how many Postgres sessions wait on a lock right now, and at the
// end what the database holds for the key — verified by a query, not assumed.
type Storm struct {
	ctx     *tctx.ProgramContext
	w, h    int
	fields  []*formField
	focus   int
	editing bool

	module, record string
	revision       int

	running   bool
	run       int // storm id: events of an older storm are dropped
	spec      tctx.StormSpec
	started   time.Time
	elapsed   time.Duration
	outcomes  map[string]int
	waited    int
	latencies []float64
	sorted    []float64 // latencies sorted, rebuilt when events arrive (not on every redraw)
	summary   *tctx.StormSummary
	err       string
	lockNow   int
	lockPeak  int
	cancel    gocontext.CancelFunc
	events    chan tctx.StormEvent
	done      chan stormDone
	bar       progress.Model
}

type stormDone struct {
	summary tctx.StormSummary
	err     error
}

type stormEventsMsg struct {
	run    int
	events []tctx.StormEvent
}

type stormDoneMsg struct {
	run     int
	events  []tctx.StormEvent
	summary tctx.StormSummary
	err     error
}

type stormLockTickMsg struct{ run int }

type stormLocksMsg struct {
	run     int
	waiting int
}

var (
	keyFire     = key.NewBinding(key.WithKeys("f", "ctrl+s"), key.WithHelp("f", "fire"))
	keyEdit     = key.NewBinding(key.WithKeys("e"), key.WithHelp("e", "edit settings"))
	keyStop     = key.NewBinding(key.WithKeys("ctrl+x"), key.WithHelp("ctrl+x", "stop"))
	keyStormKey = key.NewBinding(key.WithKeys("ctrl+n"), key.WithHelp("ctrl+n", "fresh key"))
)

// NewStorm returns the Storm view.
func NewStorm(ctx *tctx.ProgramContext) *Storm {
	v := &Storm{ctx: ctx, outcomes: map[string]int{}, bar: progress.New(progress.WithDefaultGradient(), progress.WithoutPercentage())}
	v.setTarget("NOTE", "", 0)
	return v
}

func numberCheck(min, max int) func(string) string {
	return func(s string) string {
		n, err := strconv.Atoi(s)
		if err != nil || n < min || n > max {
			return fmt.Sprintf("a number from %d to %d", min, max)
		}
		return ""
	}
}

// setTarget prepares the settings for a module (create) or a record (patch, action).
func (v *Storm) setTarget(module, record string, revision int) {
	v.module, v.record, v.revision = module, record, revision
	ops := []string{"create"}
	if record != "" {
		ops = []string{"patch", "action", "create"}
	}
	var feats []string
	if v.ctx.Kernel != nil {
		if m, err := v.ctx.Kernel.Registry.Module(module); err == nil {
			for _, f := range m.Features {
				feats = append(feats, f.ID)
			}
		}
	}
	if len(feats) == 0 {
		feats = []string{"-"}
	}
	v.fields = []*formField{
		{label: "Operation", choices: ops},
		{label: "Feature", choices: feats, hint: "for action"},
		{label: "Idempotency-Key", input: newInput(FreshKey(), 255), validate: func(s string) string {
			if s == "" {
				return "a storm needs a key"
			}
			return keyCheck(s)
		}},
		{label: "Requests (N)", input: newInput("50", 6), validate: numberCheck(1, 100000)},
		{label: "Concurrency", input: newInput("16", 4), validate: numberCheck(1, 1000)},
		{label: "Processes", input: newInput("1", 2), validate: numberCheck(1, 16), hint: "child processes colliding on the unique index"},
		{label: "In-process sharing", choices: []string{"on", "off"}, hint: "off: every request goes to the database"},
		{label: "Fail the first attempt", choices: []string{"no", "yes"}, hint: "the leader's work fails once; a follower retries"},
	}
	v.focus = 0
}

func (v *Storm) value(label string) string {
	for _, f := range v.fields {
		if f.label == label {
			return f.value()
		}
	}
	return ""
}

// Prepare sets the storm up for a record (from the Records view).
func (v *Storm) Prepare(m tctx.OpenStormMsg) {
	if v.running {
		return
	}
	v.setTarget(m.Module, m.RecordID, m.Revision)
	v.editing = true
	v.focusField(0)
}

// Title names the view.
func (v *Storm) Title() string { return "Storm" }

// Init does nothing until fired.
func (v *Storm) Init() tea.Cmd { return nil }

func (v *Storm) focusField(i int) {
	i = (i + len(v.fields)) % len(v.fields)
	for j, f := range v.fields {
		if f.choices == nil {
			if j == i && v.editing {
				f.input.Focus()
			} else {
				f.input.Blur()
			}
		}
	}
	v.focus = i
}

// Capturing is true while settings are being edited.
func (v *Storm) Capturing() bool { return v.editing }

func (v *Storm) fire() tea.Cmd {
	if v.running {
		return nil
	}
	if v.ctx.Storm == nil {
		v.err = "storms are not available in this session"
		return nil
	}
	if v.ctx.ReadOnly() {
		v.err = "READ_ONLY: a storm writes; reconnect with --allow-writes"
		return nil
	}
	for _, f := range v.fields {
		if f.validate != nil {
			if e := f.validate(f.value()); e != "" {
				v.err = f.label + ": " + e
				return nil
			}
		}
	}
	n, _ := strconv.Atoi(v.value("Requests (N)"))
	c, _ := strconv.Atoi(v.value("Concurrency"))
	p, _ := strconv.Atoi(v.value("Processes"))
	spec := tctx.StormSpec{Owner: v.ctx.Owner, Op: v.value("Operation"), Module: v.module, RecordID: v.record, Revision: v.revision, FeatureID: v.value("Feature"),
		Key: v.value("Idempotency-Key"), N: n, Concurrency: c, Processes: p, Share: v.value("In-process sharing") == "on",
		FailFirst: v.value("Fail the first attempt") == "yes", Title: "storm " + v.value("Idempotency-Key")}
	if spec.Op != "create" && spec.RecordID == "" {
		v.err = "patch and action storms need a record: select one in Records and press s"
		return nil
	}
	v.editing = false
	v.focusField(v.focus)
	v.run++
	v.running, v.spec, v.started, v.err, v.summary = true, spec, time.Now(), "", nil
	v.outcomes, v.waited, v.latencies, v.sorted, v.lockNow, v.lockPeak = map[string]int{}, 0, nil, nil, 0, 0
	ctx, cancel := gocontext.WithCancel(gocontext.Background())
	v.cancel = cancel
	v.events = make(chan tctx.StormEvent, 256)
	v.done = make(chan stormDone, 1)
	runner, events, done := v.ctx.Storm, v.events, v.done
	go func() {
		sum, err := runner(ctx, spec, events)
		done <- stormDone{summary: sum, err: err}
	}()
	return tea.Batch(v.listen(), v.lockTick())
}

// listen waits for the next events (draining what is buffered) or the end; it is re-armed after
// every message so the UI never blocks on the storm.
func (v *Storm) listen() tea.Cmd {
	run, events, done := v.run, v.events, v.done
	return func() tea.Msg {
		select {
		case e := <-events:
			batch := []tctx.StormEvent{e}
			for len(batch) < 512 {
				select {
				case e := <-events:
					batch = append(batch, e)
				default:
					return stormEventsMsg{run: run, events: batch}
				}
			}
			return stormEventsMsg{run: run, events: batch}
		case d := <-done:
			var rest []tctx.StormEvent
			for {
				select {
				case e := <-events:
					rest = append(rest, e)
				default:
					return stormDoneMsg{run: run, events: rest, summary: d.summary, err: d.err}
				}
			}
		}
	}
}

func (v *Storm) lockTick() tea.Cmd {
	run := v.run
	return tea.Tick(150*time.Millisecond, func(time.Time) tea.Msg { return stormLockTickMsg{run: run} })
}

func (v *Storm) add(events []tctx.StormEvent) {
	for _, e := range events {
		v.outcomes[e.Outcome]++
		if e.Waited {
			v.waited++
		}
		v.latencies = append(v.latencies, e.LatencyMs)
	}
	v.sorted = append(v.sorted[:0], v.latencies...)
	slices.Sort(v.sorted)
}

// Update handles messages.
func (v *Storm) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case stormEventsMsg:
		if msg.run != v.run {
			return nil
		}
		v.add(msg.events)
		v.elapsed = time.Since(v.started)
		return v.listen()
	case stormDoneMsg:
		if msg.run != v.run {
			return nil
		}
		v.add(msg.events)
		v.running, v.elapsed = false, time.Since(v.started)
		if v.cancel != nil {
			v.cancel()
		}
		if msg.err != nil {
			v.err = errText(msg.err)
		}
		if msg.summary.Requests > 0 || msg.summary.Verified != nil {
			s := msg.summary
			v.summary = &s
		}
		txt := fmt.Sprintf("storm done: %d requests, EXECUTED %d", len(v.latencies), v.outcomes["EXECUTED"])
		return tea.Batch(status(txt, msg.err != nil), func() tea.Msg { return tctx.DataChangedMsg{} })
	case stormLockTickMsg:
		if msg.run != v.run || !v.running {
			return nil
		}
		db, run := v.ctx.DB, v.run
		return tea.Batch(v.lockTick(), query(func(ctx gocontext.Context) tea.Msg {
			ss, err := db.Sessions(ctx)
			if err != nil {
				return nil
			}
			n := 0
			for _, s := range ss {
				if len(s.BlockedBy) > 0 {
					n++
				}
			}
			return stormLocksMsg{run: run, waiting: n}
		}))
	case stormLocksMsg:
		if msg.run == v.run {
			v.lockNow = msg.waiting
			if msg.waiting > v.lockPeak {
				v.lockPeak = msg.waiting
			}
		}
	case tea.KeyMsg:
		if v.editing {
			return v.updateEditing(msg)
		}
		switch {
		case key.Matches(msg, keyFire):
			return v.fire()
		case key.Matches(msg, keyEdit), key.Matches(msg, keyOpen):
			if !v.running {
				v.editing = true
				v.focusField(v.focus)
			}
		case key.Matches(msg, keyStop):
			if v.cancel != nil {
				v.cancel()
			}
		case key.Matches(msg, keyStormKey):
			v.fields[2].input.SetValue(FreshKey())
		}
	}
	return nil
}

func (v *Storm) updateEditing(msg tea.KeyMsg) tea.Cmd {
	switch {
	case msg.String() == "esc":
		v.editing = false
		v.focusField(v.focus)
		return nil
	case key.Matches(msg, keySubmit), msg.Type == tea.KeyEnter && v.focus == len(v.fields)-1:
		return v.fire()
	case msg.Type == tea.KeyEnter, key.Matches(msg, keyNext):
		v.focusField(v.focus + 1)
		return nil
	case key.Matches(msg, keyPrev):
		v.focusField(v.focus - 1)
		return nil
	case key.Matches(msg, keyStormKey):
		v.fields[2].input.SetValue(FreshKey())
		return nil
	}
	f := v.fields[v.focus]
	if f.choices != nil {
		switch msg.String() {
		case "left":
			f.choice = (f.choice + len(f.choices) - 1) % len(f.choices)
		case "right", " ":
			f.choice = (f.choice + 1) % len(f.choices)
		}
		return nil
	}
	var cmd tea.Cmd
	f.input, cmd = f.input.Update(msg)
	return cmd
}

// SetSize sets the drawing area.
func (v *Storm) SetSize(w, h int) {
	v.w, v.h = w, h
	v.bar.Width = w - 20
	if v.bar.Width < 10 {
		v.bar.Width = 10
	}
}

// View renders the view.
func (v *Storm) View() string {
	s := v.ctx.Styles
	target := "create a " + v.module + " record"
	if v.record != "" {
		target = fmt.Sprintf("%s %s (revision %d)", v.module, v.record, v.revision)
	}
	out := []string{s.Title.Render("Replay storm") + s.Subtle.Render(" · "+target)}
	// Settings, compact: one line each.
	for i, f := range v.fields {
		label := s.InputLabel
		if v.editing && i == v.focus {
			label = s.InputLabelFocused
		}
		val := f.value()
		if f.choices == nil && v.editing {
			val = f.input.View()
		} else if f.choices != nil && v.editing && i == v.focus {
			val = s.RowSelected.Render(" ◂ " + val + " ▸ ")
		}
		line := label.Render(pad(f.label, 24)) + val
		if v.editing && i == v.focus && f.hint != "" {
			line += s.Subtle.Render("  " + f.hint)
		}
		out = append(out, cut(line, v.w))
	}
	out = append(out, "")
	if v.err != "" {
		out = append(out, s.Danger.Render(cut(v.err, v.w)))
	}
	n := v.spec.N
	done := len(v.latencies)
	if n > 0 && (v.running || done > 0) {
		pct := float64(done) / float64(n)
		out = append(out, v.bar.ViewAs(pct)+s.Subtle.Render(fmt.Sprintf(" %d/%d  %s elapsed", done, n, v.elapsed.Round(time.Millisecond))))
		var parts []string
		keys := make([]string, 0, len(v.outcomes))
		for k := range v.outcomes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			st := s.Warning
			switch k {
			case "EXECUTED":
				st = s.Success
			case "JOINED", "REPLAYED":
				st = s.Highlight
			}
			parts = append(parts, st.Render(fmt.Sprintf("%s %d", k, v.outcomes[k])))
		}
		out = append(out, cut(strings.Join(parts, "   ")+s.Subtle.Render(fmt.Sprintf("   waited on the unique index %d", v.waited)), v.w))
		out = append(out, cut(fmt.Sprintf("latency ms  p50 %.2f  p95 %.2f  p99 %.2f  max %.2f", storm.Percentile(v.sorted, 50), storm.Percentile(v.sorted, 95),
			storm.Percentile(v.sorted, 99), storm.Percentile(v.sorted, 100)), v.w))
		out = append(out, s.Highlight.Render(sparkline(v.latencies, v.w-2)))
		out = append(out, s.Subtle.Render(fmt.Sprintf("sessions waiting on a lock: now %d, peak %d", v.lockNow, v.lockPeak)))
	}
	if sm := v.summary; sm != nil {
		verdict := s.Success.Render("✓ the database agrees: ")
		if !sm.Agrees {
			verdict = s.Danger.Render("✗ the database DISAGREES: ")
		}
		var vs []string
		keys := make([]string, 0, len(sm.Verified))
		for k := range sm.Verified {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			vs = append(vs, fmt.Sprintf("%s %v", k, sm.Verified[k]))
		}
		out = append(out, cut(verdict+strings.Join(vs, " · "), v.w))
		var ds []string
		for _, k := range []string{"recordIds", "revisions", "executionIds"} {
			if d, ok := sm.Distinct[k]; ok {
				ds = append(ds, fmt.Sprintf("%s %d", k, d))
			}
		}
		out = append(out, s.Subtle.Render(cut(fmt.Sprintf("distinct in responses: %s · release → last response %.0f ms", strings.Join(ds, ", "), sm.WallMs), v.w)))
	}
	if !v.running && !v.editing && v.summary == nil && done == 0 {
		out = append(out, s.Subtle.Render("e: edit the settings · f: fire · in Records, s on a record prepares a patch/action storm"))
	}
	return fitBlock(strings.Join(out, "\n"), v.w, v.h)
}

// ShortHelp is the footer help.
func (v *Storm) ShortHelp() []key.Binding {
	if v.editing {
		return []key.Binding{keySubmit, keyNext, keyChoice, keyStormKey, keyCancel}
	}
	return []key.Binding{keyFire, keyEdit, keyStop, keyStormKey}
}

// FullHelp is the ? help.
func (v *Storm) FullHelp() [][]key.Binding {
	return [][]key.Binding{{keyFire, keyEdit, keyStop, keyStormKey}, {keySubmit, keyNext, keyPrev, keyChoice, keyCancel}}
}

// SetFilter does nothing here.
func (v *Storm) SetFilter(string) {}

// Selection is the storm's key.
func (v *Storm) Selection() string { return v.value("Idempotency-Key") }

// Running reports whether a storm is in flight.
func (v *Storm) Running() bool { return v.running }
