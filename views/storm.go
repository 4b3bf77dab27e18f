package views

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/progress"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/muesli/termenv"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/storm/stormtypes"
	"github.com/idemwork/idemwork/tui/shared"
)

// Storm fires N concurrent requests of one operation on one key and shows, live, how each
// resolved (EXECUTED, JOINED, REPLAYED, waited on the unique index, or an error code), latency
// percentiles and a sparkline, how many of the storm's own sessions wait on a lock (sampled by
// the engine every few milliseconds) and, when it stalls, on what; at the end the verdict in
// three parts: the answers, what the database holds for the key (read once every transaction
// of the storm ended), and the verdict itself — the same words as `idemwork storm`.
type Storm struct {
	ctx     *shared.ProgramContext
	deps    StormDeps
	w, h    int
	fields  []*formField
	focus   int
	editing bool

	// The target: a module (create) or a record (patch, action) and what it holds now.
	module, record string
	revision       int
	recordTitle    string
	execStatus     string // of the last storm's result, for an action
	needLoad       bool
	loadReq        int

	running   bool
	stopping  bool
	run       int // storm id: events of an older storm are dropped
	spec      stormtypes.Spec
	started   time.Time
	elapsed   time.Duration
	lastEvent time.Time
	outcomes  map[string]int
	waited    int
	latencies []float64
	sorted    []float64 // latencies sorted, rebuilt when events arrive (not on every redraw)
	locks     stormtypes.LockSample
	summary   *stormtypes.Summary
	// notRun is why the last storm sent no request (its summary is empty): the verdict's place
	// says so, with the code, instead of staying blank.
	notRun string
	err    string
	cancel context.CancelFunc
	events chan stormtypes.Event
	lockCh chan stormtypes.LockSample
	done   chan stormDone
	bar    progress.Model
}

// StormDeps is what the Storm view fires storms with and reads its target through.
type StormDeps struct {
	// Run fires storms (nil: the view says storms are not available in this session).
	Run     StormRunner
	Records LatestReader
	Catalog Catalog
}

// StormRunner fires a storm — the engine of `idemwork storm`, with the same verdict — sending
// request events and lock samples while it runs (lock samples may be dropped when the view
// lags: each carries the peak so far); it returns when every event was sent.
type StormRunner func(ctx context.Context, spec stormtypes.Spec, events chan<- stormtypes.Event, locks chan<- stormtypes.LockSample) (stormtypes.Summary, error)

type stormDone struct {
	summary stormtypes.Summary
	err     error
}

type stormEventsMsg struct {
	run    int
	events []stormtypes.Event
}

type stormLocksMsg struct {
	run   int
	id    string
	key   string
	locks stormtypes.LockSample
}

// stormDoneMsg ends a stormtypes. The shell hands it to every view: the Locks view keeps the
// storm's peak.
type stormDoneMsg struct {
	run     int
	events  []stormtypes.Event
	summary stormtypes.Summary
	err     error
	// spec is the storm that ran: the Cluster view retries the failed requests of one that ran
	// into a failover with it.
	spec stormtypes.Spec
}

type stormTickMsg struct{ run int }

// stormTargetMsg is the target record as it is now (after a storm, or when prepared).
type stormTargetMsg struct {
	req      int
	revision int
	title    string
	payload  string
	prefill  bool
	err      error
}

// stallAfter is how long a running storm may go without an answer before the view says what
// it waits on.
const stallAfter = time.Second

// Field labels.
const (
	fOperation   = "Operation"
	fFeature     = "Feature"
	fKey         = "Idempotency-Key"
	fTitle       = "Title"
	fPayload     = "Payload"
	fInput       = "Input"
	fExpect      = "Expect revision"
	fN           = "Requests (N)"
	fConcurrency = "Concurrency"
	fProcesses   = "Processes"
	fVia         = "Via"
	fServers     = "Servers"
	fShare       = "In-process sharing"
	fFailFirst   = "Fail the first attempt"
	fHold        = "Hold the winner"
)

// NewStorm returns the Storm view.
func NewStorm(ctx *shared.ProgramContext, deps StormDeps) *Storm {
	bar := progress.New(progress.WithDefaultGradient(), progress.WithoutPercentage())
	if ctx.Styles.Mono {
		// The bar paints its gradient itself, past lipgloss's profile: under NO_COLOR it draws
		// with no colour (filled █, empty ░ still tell them apart).
		bar = progress.New(progress.WithColorProfile(termenv.Ascii), progress.WithoutPercentage())
	}
	v := &Storm{ctx: ctx, deps: deps, outcomes: map[string]int{}, bar: bar}
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

func holdCheck(s string) string {
	d, err := parseHold(s)
	if err != nil || d < 0 || d > stormtypes.MaxHold {
		return fmt.Sprintf("a duration from 0 to %s, e.g. 500ms or 2s", stormtypes.MaxHold)
	}
	return ""
}

func parseHold(s string) (time.Duration, error) {
	if s == "" || s == "0" {
		return 0, nil
	}
	return time.ParseDuration(s)
}

// setTarget prepares the settings for a module (create) or a record (patch, action).
func (v *Storm) setTarget(module, record string, revision int) {
	v.module, v.record, v.revision, v.recordTitle, v.execStatus = module, record, revision, "", ""
	ops := []string{"create"}
	if record != "" {
		ops = []string{"patch", "action", "create"}
	}
	var feats []string
	if v.deps.Catalog != nil {
		for _, f := range v.deps.Catalog.Features(module) {
			feats = append(feats, f.ID)
		}
	}
	if len(feats) == 0 {
		feats = []string{"-"}
	}
	title := "storm"
	if record != "" {
		title = "" // a patch leaves the title alone unless one is typed
	}
	v.fields = []*formField{
		{label: fOperation, choices: ops},
		{label: fFeature, choices: feats},
		{label: fKey, input: newInput(FreshKey(), 255), validate: func(s string) string {
			if s == "" {
				return "a storm needs a key"
			}
			return keyCheck(s)
		}},
		{label: fTitle, input: newInput(title, 400), validate: v.titleCheck},
		{label: fPayload, input: newInput(defaultPayload(module), 64<<10), validate: jsonCheck("payload"), hint: "the module's template; empty: none"},
		{label: fInput, input: newInput("{}", 64<<10), validate: jsonCheck("input")},
		{label: fExpect, input: newInput(strconv.Itoa(max(revision, 1)), 10), validate: numberCheck(1, 1<<30),
			hint: "REVISION_CONFLICT unless the record is at this revision (refreshed after each storm)"},
		{label: fN, input: newInput("50", 6), validate: numberCheck(1, stormtypes.MaxRequests)},
		{label: fConcurrency, input: newInput("16", 4), validate: numberCheck(1, stormtypes.MaxConcurrency)},
		{label: fProcesses, input: newInput("1", 2), validate: numberCheck(1, 16), hint: "child processes colliding on the unique index"},
		{label: fVia, choices: []string{stormtypes.ViaInproc, stormtypes.ViaHTTP}, hint: "inproc: the kernel directly; http: the API"},
		{label: fServers, input: newInput("1", 2), validate: numberCheck(1, stormtypes.MaxServers), hint: "server processes on one database, round-robin"},
		{label: fShare, choices: []string{"on", "off"}, hint: "off: every request goes to the database"},
		{label: fFailFirst, choices: []string{"no", "yes"}, hint: "the leader's work fails once; a follower retries"},
		{label: fHold, input: newInput("0", 8), validate: holdCheck, hint: "keep the executing transaction open (e.g. 2s): watch the queue in Locks"},
	}
	if record != "" {
		v.field(fPayload).input.SetValue("")
		v.field(fPayload).hint = "empty: unchanged"
		v.field(fTitle).hint = "empty: unchanged"
	}
	v.focus = 0
}

func (v *Storm) titleCheck(s string) string {
	if s == "" && v.value(fOperation) == "patch" {
		return ""
	}
	return textCheck("title", 1, 200)(s)
}

func (v *Storm) field(label string) *formField {
	for _, f := range v.fields {
		if f.label == label {
			return f
		}
	}
	return nil
}

func (v *Storm) value(label string) string {
	if f := v.field(label); f != nil {
		return f.value()
	}
	return ""
}

// shown reports whether a field applies to the settings as they are.
func (v *Storm) shown(f *formField) bool {
	op := v.value(fOperation)
	switch f.label {
	case fFeature, fInput:
		return op == "action"
	case fTitle, fPayload:
		return op != "action"
	case fExpect:
		return op == "patch"
	case fServers:
		return v.value(fVia) == stormtypes.ViaHTTP
	}
	return true
}

func (v *Storm) visible() []int {
	var out []int
	for i, f := range v.fields {
		if v.shown(f) {
			out = append(out, i)
		}
	}
	return out
}

// Prepare sets the storm up for a record (from the Records view); the record's title and
// revision are read when the view comes on screen.
func (v *Storm) Prepare(m shared.OpenStormMsg) {
	if v.running {
		return
	}
	v.setTarget(m.Module, m.RecordID, m.Revision)
	v.needLoad = m.RecordID != ""
	v.editing = true
	v.focusField(0)
}

// SetActive loads a prepared target when the view comes on screen.
func (v *Storm) SetActive(active bool) tea.Cmd {
	if active && v.needLoad {
		v.needLoad = false
		return v.loadTarget(true)
	}
	return nil
}

// loadTarget reads the target record as it is now; prefill also puts its title into the form.
func (v *Storm) loadTarget(prefill bool) tea.Cmd {
	if v.record == "" || v.deps.Records == nil {
		return nil
	}
	v.loadReq++
	req, db, owner, module, id := v.loadReq, v.deps.Records, v.ctx.Owner, v.module, v.record
	return query(func(ctx context.Context) tea.Msg {
		r, err := db.LatestRecord(ctx, owner, module, id)
		if err != nil {
			return stormTargetMsg{req: req, err: err}
		}
		return stormTargetMsg{req: req, revision: r.Revision, title: r.Title, payload: string(r.Payload), prefill: prefill}
	})
}

// Title names the view.
func (v *Storm) Title() string { return "Storm" }

// Init does nothing until fired.
func (v *Storm) Init() tea.Cmd { return nil }

func (v *Storm) focusField(i int) {
	vis := v.visible()
	pos := slices.Index(vis, i)
	if pos < 0 {
		pos = 0
		for j, idx := range vis { // the nearest shown field before i
			if idx <= i {
				pos = j
			}
		}
	}
	v.focusAt(vis, pos)
}

func (v *Storm) focusAt(vis []int, pos int) {
	pos = (pos + len(vis)) % len(vis)
	v.focus = vis[pos]
	for j, f := range v.fields {
		if f.choices == nil {
			if j == v.focus && v.editing {
				f.input.Focus()
			} else {
				f.input.Blur()
			}
		}
	}
}

func (v *Storm) moveFocus(d int) {
	vis := v.visible()
	v.focusAt(vis, slices.Index(vis, v.focus)+d)
}

// Capturing is true while settings are being edited.
func (v *Storm) Capturing() bool { return v.editing }

// TextFocused reports whether a text field of the settings has the keys: on a choice (the
// operation, via) a digit switches views.
func (v *Storm) TextFocused() bool { return v.editing && v.fields[v.focus].choices == nil }

func (v *Storm) fire() tea.Cmd {
	if v.running {
		return nil
	}
	if v.deps.Run == nil {
		v.err = "storms are not available in this session"
		return nil
	}
	if v.ctx.ReadOnly() {
		v.err = "a storm writes: " + v.ctx.ReadOnlyMessage()
		return nil
	}
	for _, f := range v.fields {
		if f.validate != nil && v.shown(f) {
			if e := f.validate(f.value()); e != "" {
				v.err = f.label + ": " + e
				return nil
			}
		}
	}
	num := func(label string) int { n, _ := strconv.Atoi(v.value(label)); return n }
	hold, _ := parseHold(v.value(fHold))
	spec := stormtypes.Spec{ID: stormtypes.RandomHex(3), Op: stormtypes.Op(v.value(fOperation)), N: num(fN), Concurrency: num(fConcurrency),
		Processes: num(fProcesses), Via: v.value(fVia), Share: v.value(fShare) == "on", FailFirst: v.value(fFailFirst) == "yes", Hold: hold}
	if spec.Via == stormtypes.ViaHTTP {
		spec.Servers = num(fServers)
	}
	// The body as the kernel reads it: an empty patch title or payload leaves it unchanged; an
	// empty payload or input sends none.
	raw := func(label string) json.RawMessage {
		if s := v.value(label); s != "" {
			return json.RawMessage(s)
		}
		return nil
	}
	owner, key := v.ctx.Owner, v.value(fKey)
	switch spec.Op {
	case stormtypes.OpCreate:
		spec.Create = model.CreateInput{Owner: owner, Module: v.module, Key: key, Title: v.value(fTitle), Payload: raw(fPayload)}
	case stormtypes.OpPatch:
		spec.Patch = model.PatchInput{Owner: owner, Module: v.module, RecordID: v.record, Key: key, ExpectRevision: num(fExpect), Payload: raw(fPayload)}
		if title := v.value(fTitle); title != "" {
			spec.Patch.Title = &title
		}
	case stormtypes.OpAction:
		spec.Action = model.FeatureInput{Owner: owner, Module: v.module, RecordID: v.record, FeatureID: v.value(fFeature), Key: key, Input: raw(fInput)}
	}
	if spec.Op != stormtypes.OpCreate && v.record == "" {
		v.err = "patch and action storms need a record: select one in Records and press s"
		return nil
	}
	v.editing = false
	v.focusField(v.focus)
	v.run++
	v.running, v.stopping, v.spec, v.started, v.lastEvent, v.err, v.summary, v.notRun = true, false, spec, time.Now(), time.Now(), "", nil, ""
	v.outcomes, v.waited, v.latencies, v.sorted, v.locks, v.elapsed = map[string]int{}, 0, nil, nil, stormtypes.LockSample{}, 0
	ctx, cancel := context.WithCancel(context.Background())
	v.cancel = cancel
	v.events = make(chan stormtypes.Event, 256)
	v.lockCh = make(chan stormtypes.LockSample, 1)
	v.done = make(chan stormDone, 1)
	runner, events, locks, done := v.deps.Run, v.events, v.lockCh, v.done
	go func() {
		sum, err := runner(ctx, spec, events, locks)
		done <- stormDone{summary: sum, err: err}
	}()
	return tea.Batch(v.listen(), v.tick())
}

// listen waits for the next events (draining what is buffered), a lock sample or the end; it
// is re-armed after every message so the UI never blocks on the stormtypes.
func (v *Storm) listen() tea.Cmd {
	run, id, key, events, locks, done, spec := v.run, v.spec.ID, v.spec.Key(), v.events, v.lockCh, v.done, v.spec
	return func() tea.Msg {
		select {
		case e := <-events:
			batch := []stormtypes.Event{e}
			for len(batch) < 512 {
				select {
				case e := <-events:
					batch = append(batch, e)
				default:
					return stormEventsMsg{run: run, events: batch}
				}
			}
			return stormEventsMsg{run: run, events: batch}
		case l := <-locks:
			return stormLocksMsg{run: run, id: id, key: key, locks: l}
		case d := <-done:
			var rest []stormtypes.Event
			for {
				select {
				case e := <-events:
					rest = append(rest, e)
				default:
					return stormDoneMsg{run: run, events: rest, summary: d.summary, err: d.err, spec: spec}
				}
			}
		}
	}
}

// tick keeps the elapsed time moving while requests are outstanding.
func (v *Storm) tick() tea.Cmd {
	run := v.run
	return tea.Tick(100*time.Millisecond, func(time.Time) tea.Msg { return stormTickMsg{run: run} })
}

func (v *Storm) add(events []stormtypes.Event) {
	if len(events) == 0 {
		return
	}
	for _, e := range events {
		v.outcomes[e.Outcome]++
		if e.Waited {
			v.waited++
		}
		v.latencies = append(v.latencies, e.LatencyMs)
		if e.ExecutionStatus != "" {
			v.execStatus = e.ExecutionStatus
		}
	}
	v.lastEvent = time.Now()
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
	case stormLocksMsg:
		if msg.run != v.run || !v.running {
			return nil
		}
		v.locks = msg.locks
		return v.listen()
	case stormTickMsg:
		if msg.run != v.run || !v.running {
			return nil
		}
		v.elapsed = time.Since(v.started)
		return v.tick()
	case stormDoneMsg:
		if msg.run != v.run {
			return nil
		}
		v.add(msg.events)
		v.running, v.stopping, v.elapsed = false, false, time.Since(v.started)
		if v.cancel != nil {
			v.cancel()
		}
		if msg.summary.Requests > 0 {
			s := msg.summary
			v.summary = &s
			if s.Verified.ExecutionStatus != "" {
				v.execStatus = s.Verified.ExecutionStatus
			}
			// The engine's counts are the whole truth: events of a stopped storm can be dropped
			// on the way, and requests never sent have none.
			v.outcomes, v.waited = maps.Clone(s.Outcomes), s.Waited
		}
		var txt string
		switch {
		case v.summary != nil:
			txt = "storm: " + v.summary.Verdict.Text
			if msg.err != nil && !errors.Is(msg.err, context.Canceled) { // a stop is reported by the verdict
				v.err = errText(msg.err)
			}
		case msg.err == nil || errors.Is(msg.err, context.Canceled):
			v.notRun = "stopped before any request was sent"
		case IsUnreachable(msg.err):
			v.notRun = string(apperr.DatabaseUnavailable) + ": the database is not reachable (stopped, or the connection dropped): " +
				"start it (idemwork db start) or restart the workbench, then f fires the storm again"
		default:
			v.notRun = errText(msg.err)
		}
		if v.notRun != "" {
			txt = "storm did not run: " + v.notRun
		}
		isErr := v.summary == nil || v.summary.Verdict.Verdict != stormtypes.VerdictAgrees
		return tea.Batch(status(txt, isErr), v.loadTarget(false), func() tea.Msg { return shared.DataChangedMsg{} })
	case stormTargetMsg:
		if msg.req != v.loadReq {
			return nil
		}
		if msg.err != nil {
			v.err = "the target record: " + errText(msg.err)
			return nil
		}
		v.revision, v.recordTitle = msg.revision, msg.title
		next := strconv.Itoa(msg.revision)
		if !msg.prefill && v.value(fOperation) == string(stormtypes.OpPatch) && v.value(fExpect) != next {
			// A patch storm moved the record on: the next patch expects the new revision, which
			// is another body, so it needs another key (under the same key it would only be
			// IDEMPOTENCY_KEY_REUSED). Typing the old key back replays the storm.
			v.field(fKey).input.SetValue(FreshKey())
			v.field(fKey).hint = "a new key: the last storm moved the record to revision " + next
		}
		v.field(fExpect).input.SetValue(next)
		if msg.prefill {
			if printable(msg.title) == msg.title {
				v.field(fTitle).input.SetValue(msg.title)
			} else {
				// A one-line field cannot hold it as it is: typing nothing keeps it unchanged.
				v.field(fTitle).hint = "empty: unchanged (the record's title holds control characters)"
			}
			v.field(fPayload).input.SetValue(msg.payload)
		}
	case tea.KeyMsg:
		if v.editing {
			return v.updateEditing(msg)
		}
		switch {
		case key.Matches(msg, v.ctx.Keys.Storm.Fire):
			return v.fire()
		case key.Matches(msg, v.ctx.Keys.Storm.Edit), key.Matches(msg, v.ctx.Keys.List.Open):
			if !v.running {
				v.editing = true
				v.focusField(v.focus)
			}
		case key.Matches(msg, v.ctx.Keys.Storm.Stop):
			if v.running && v.cancel != nil {
				v.stopping = true
				v.cancel()
			}
		case key.Matches(msg, v.ctx.Keys.Form.NewKey):
			v.field(fKey).input.SetValue(FreshKey())
		}
	}
	return nil
}

func (v *Storm) updateEditing(msg tea.KeyMsg) tea.Cmd {
	vis := v.visible()
	last := vis[len(vis)-1]
	switch {
	case key.Matches(msg, v.ctx.Keys.Form.Cancel):
		v.editing = false
		v.focusField(v.focus)
		return nil
	case key.Matches(msg, v.ctx.Keys.Form.Submit), key.Matches(msg, v.ctx.Keys.Form.Enter) && v.focus == last:
		return v.fire()
	case key.Matches(msg, v.ctx.Keys.Form.Enter, v.ctx.Keys.Form.Next):
		v.moveFocus(1)
		return nil
	case key.Matches(msg, v.ctx.Keys.Form.Prev):
		v.moveFocus(-1)
		return nil
	case key.Matches(msg, v.ctx.Keys.Form.NewKey):
		v.field(fKey).input.SetValue(FreshKey())
		return nil
	}
	f := v.fields[v.focus]
	if f.choices != nil {
		switch {
		case key.Matches(msg, v.ctx.Keys.Form.ChoicePrev):
			f.choice = (f.choice + len(f.choices) - 1) % len(f.choices)
		case key.Matches(msg, v.ctx.Keys.Form.ChoiceNext):
			f.choice = (f.choice + 1) % len(f.choices)
		}
		if f.label == fOperation && f.value() == "create" {
			// A create needs a body of its own: the module's template where none is typed.
			if t := v.field(fTitle); t.value() == "" {
				t.input.SetValue("storm")
			}
			if pl := v.field(fPayload); pl.value() == "" {
				pl.input.SetValue(defaultPayload(v.module))
			}
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
	for _, f := range v.fields {
		if f.choices == nil {
			f.input.Width = max(10, w-28)
		}
	}
}

// ShortHelp is the footer help.
func (v *Storm) ShortHelp() []key.Binding {
	if v.editing {
		return []key.Binding{v.ctx.Keys.Form.Submit, v.ctx.Keys.Form.Next, v.ctx.Keys.Form.ChoicePrev, v.ctx.Keys.Form.ChoiceNext, v.ctx.Keys.Form.NewKey, v.ctx.Keys.Form.Cancel}
	}
	return []key.Binding{v.ctx.Keys.Storm.Fire, v.ctx.Keys.Storm.Edit, v.ctx.Keys.Storm.Stop, v.ctx.Keys.Form.NewKey}
}

// FullHelp is the ? help: every key that acts in what the view shows now.
func (v *Storm) FullHelp() [][]key.Binding {
	k := v.ctx.Keys
	if v.editing {
		return [][]key.Binding{{k.Form.Submit, k.Form.Enter, k.Form.Next, k.Form.Prev, k.Form.ChoicePrev, k.Form.ChoiceNext, k.Form.NewKey, k.Form.Cancel}}
	}
	return [][]key.Binding{{k.Storm.Fire, k.Storm.Edit, k.Storm.Stop, k.Form.NewKey}}
}

// SetFilter does nothing here.
func (v *Storm) SetFilter(string) {}

// Selection is the storm's key.
func (v *Storm) Selection() string { return v.value(fKey) }

// Running reports whether a storm is in flight.
func (v *Storm) Running() bool { return v.running }
