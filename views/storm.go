package views

import (
	"context"
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
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// Storm fires N concurrent requests of one operation on one key and shows, live, how each
// resolved (EXECUTED, JOINED, REPLAYED, waited on the unique index, or an error code), latency
// percentiles and a sparkline, how many of the storm's own sessions wait on a lock (sampled by
// the engine every few milliseconds) and, when it stalls, on what; at the end the verdict in
// three parts: the answers, what the database holds for the key (read once every transaction
// of the storm ended), and the verdict itself — the same words as `idemwork storm`.
//
// The settings are the next storm's; each storm fired keeps its own label (its key, operation
// and body) with its results, apart from the settings, and the last few stay listed. The body
// is built as the write form builds it (model.Fields), so a storm of the key a form wrote sends
// that same body. The target — the owner's record a patch or a feature run fires at — is read
// again when the owner or the record changes; a target the owner does not have fires nothing.
type Storm struct {
	ctx     *uictx.ProgramContext
	deps    StormDeps
	w, h    int
	fields  []*formField
	focus   int
	editing bool

	target stormTarget
	// execStatus is the status of the last execution a storm of this target returned.
	execStatus string
	needLoad   bool
	loadReq    int

	running  bool
	stopping bool
	run      int // storm id: events of an older storm are dropped
	// runs are the storms fired from this view, the last maxRuns, the newest last; the running
	// or last one is runs[len(runs)-1].
	runs []*stormRun
	// err is what is wrong with the settings or the target ("" none); a storm's own error is
	// its run's.
	err    string
	cancel context.CancelFunc
	events chan stormtypes.Event
	lockCh chan stormtypes.LockSample
	done   chan stormDone
	bar    progress.Model
}

// stormTarget is what a storm fires at: a module (a create, for the owner of the moment) or one
// owner's record (a patch, a feature run), with the record as last read.
type stormTarget struct {
	module, record string
	// owner is whose record it is; resolved says the record was read for that owner (a patch or
	// a feature run fires only then), and refusal says why it cannot be fired at (coded).
	owner    string
	resolved bool
	refusal  string
	revision int
	title    string
	// base is the record the fields were prefilled from: a field left at its value is not sent.
	base *model.Record
}

// stormRun is one storm fired: what it was fired with (its label) and what came back.
type stormRun struct {
	n         int
	spec      stormtypes.Spec
	req       model.WriteRequest
	owner     string
	at        time.Time // when it was fired, by the workbench clock
	started   time.Time
	elapsed   time.Duration
	lastEvent time.Time
	outcomes  map[string]int
	waited    int
	latencies []float64
	sorted    []float64 // latencies sorted, rebuilt when events arrive (not on every redraw)
	locks     stormtypes.LockSample
	// lockTypes are the kinds of lock its sessions were seen waiting for.
	lockTypes  []string
	execStatus string
	summary    *stormtypes.Summary
	// notRun is why the storm sent no request (its summary is empty).
	notRun string
	err    string
	// reuse says how the body differs from the key's first request, after a storm answered
	// IDEMPOTENCY_KEY_REUSED ("" none).
	reuse string
}

// maxRuns is how many storms the view keeps listed.
const maxRuns = 5

// StormDeps is what the Storm view fires storms with and reads its target through.
type StormDeps struct {
	// Run fires storms (nil: the view says storms are not available in this session).
	Run     StormRunner
	Records LatestReader
	Catalog Catalog
	// Reuse explains a storm answered IDEMPOTENCY_KEY_REUSED (nil: not explained).
	Reuse ReuseExplainer
}

// ReuseExplainer says which fields of a request differ from its key's first request.
type ReuseExplainer interface {
	ExplainKeyReuse(ctx context.Context, r model.WriteRequest) (model.ReuseReport, error)
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

// stormDoneMsg ends a storm. The shell hands it to every view: the Locks view keeps the
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

// stormTargetMsg is the target record as it is now, read for owner.
type stormTargetMsg struct {
	req     int
	owner   string
	record  model.Record
	prefill bool
	err     error
}

// stormReuseMsg explains storm n's IDEMPOTENCY_KEY_REUSED.
type stormReuseMsg struct {
	n    int
	text string
}

// stallAfter is how long a running storm may go without an answer before the view says what
// it waits on.
const stallAfter = time.Second

// Field labels.
const (
	fOperation   = "Operation"
	fModule      = "Module"
	fFeature     = "Feature"
	fKey         = "Idempotency-Key"
	fTitle       = "Title"
	fSummary     = "Summary"
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
func NewStorm(ctx *uictx.ProgramContext, deps StormDeps) *Storm {
	bar := progress.New(progress.WithDefaultGradient(), progress.WithoutPercentage())
	if ctx.Styles.Mono {
		// The bar paints its gradient itself, past lipgloss's profile: under NO_COLOR it draws
		// with no colour (filled █, empty ░ still tell them apart).
		bar = progress.New(progress.WithColorProfile(termenv.Ascii), progress.WithoutPercentage())
	}
	v := &Storm{ctx: ctx, deps: deps, bar: bar}
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
	v.target = stormTarget{module: module, record: record, revision: revision, owner: v.ctx.Owner}
	v.execStatus = ""
	ops := []string{model.KindCreate}
	if record != "" {
		ops = []string{model.KindPatch, model.KindAction, model.KindCreate}
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
	// A create's module, as the create form offers it (a patch or a feature run is the record's).
	mods := []string{"NOTE", "MEM-001", "COMMITMENT", "IDENTITY"}
	modField := &formField{label: fModule, choices: mods}
	modField.choice = max(0, slices.Index(mods, module))
	v.fields = []*formField{
		{label: fOperation, choices: ops},
		modField,
		{label: fFeature, choices: feats},
		{label: fKey, input: newInput(FreshKey(), 255), validate: func(s string) string {
			if s == "" {
				return "a storm needs a key"
			}
			return keyCheck(s)
		}, hint: "ctrl+n: a fresh key · the key of a form's write replays it"},
		{label: fTitle, input: newInput(title, 400), validate: v.titleCheck},
		{label: fSummary, input: newInput("", 4000), validate: textCheck("summary", 0, model.MaxSummaryChar), hint: "empty: none"},
		{label: fPayload, input: newInput(defaultPayload(module), 64<<10), validate: jsonCheck("payload"), hint: "the module's template; empty or {}: none"},
		{label: fInput, input: newInput("{}", 64<<10), validate: jsonCheck("input"), hint: "empty or {}: none"},
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
		for _, l := range []string{fTitle, fSummary, fPayload} {
			v.field(l).hint = "empty or the record's value: unchanged"
		}
	}
	for _, f := range v.fields {
		f.input.Cursor.Style = v.ctx.Styles.Cursor
	}
	v.focus = 0
}

func (v *Storm) titleCheck(s string) string {
	if s == "" && v.value(fOperation) == model.KindPatch {
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
	case fModule:
		return op == model.KindCreate
	case fFeature, fInput:
		return op == model.KindAction
	case fTitle, fSummary, fPayload:
		return op != model.KindAction
	case fExpect:
		return op == model.KindPatch
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

// request is the write the settings say, built as the write form builds it.
func (v *Storm) request() model.WriteRequest {
	text := func(label string) *string { s := v.value(label); return &s }
	exp, _ := strconv.Atoi(v.value(fExpect))
	f := model.Fields{Kind: v.value(fOperation), Owner: v.ctx.Owner, Module: v.target.module, RecordID: v.target.record,
		FeatureID: v.value(fFeature), Key: v.value(fKey), ExpectRevision: exp,
		Title: text(fTitle), Summary: text(fSummary), Payload: text(fPayload), Input: text(fInput)}
	switch f.Kind {
	case model.KindPatch:
		f.Base = v.target.base
	case model.KindCreate:
		f.Module = v.value(fModule)
	}
	return f.Request()
}

// Prepare sets the storm up for a record (from the Records view); the record is read when the
// view comes on screen, and its title, summary and payload fill the body as the patch form's do.
func (v *Storm) Prepare(m uictx.OpenStormMsg) {
	if v.running {
		return
	}
	v.setTarget(m.Module, m.RecordID, m.Revision)
	v.needLoad = m.RecordID != ""
	v.editing = true
	v.err = ""
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

// loadTarget reads the target record as it is now, for the owner of the moment; prefill also
// puts its fields into the body (those not typed into).
func (v *Storm) loadTarget(prefill bool) tea.Cmd {
	if v.target.record == "" || v.deps.Records == nil {
		return nil
	}
	v.loadReq++
	req, db, owner, module, id := v.loadReq, v.deps.Records, v.ctx.Owner, v.target.module, v.target.record
	return query(func(ctx context.Context) tea.Msg {
		r, err := db.LatestRecord(ctx, owner, module, id)
		return stormTargetMsg{req: req, owner: owner, record: r, prefill: prefill, err: err}
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

// invalidField is the first shown field whose value is wrong, or nil.
func (v *Storm) invalidField() *formField {
	for _, f := range v.fields {
		if f.validate != nil && v.shown(f) && f.validate(f.value()) != "" {
			return f
		}
	}
	return nil
}

// save leaves the settings when they are valid; else the focus goes to the first wrong field,
// whose error is under it.
func (v *Storm) save() tea.Cmd {
	if f := v.invalidField(); f != nil {
		v.editing = true
		v.focusField(slices.Index(v.fields, f))
		return status(f.label+": "+f.validate(f.value())+" (under the field)", true)
	}
	v.editing = false
	v.focusField(v.focus)
	if why := v.refusal(); why != "" {
		return status("settings saved; the storm cannot fire: "+why, true)
	}
	return status(fmt.Sprintf("settings saved · f fires %s requests: %s", v.value(fN), v.firesAt()), false)
}

// refusal is why the settings cannot be fired now ("" when they can): a patch or a feature run
// needs its record read for the owner of the moment.
func (v *Storm) refusal() string {
	t := v.target
	if v.value(fOperation) == model.KindCreate {
		return ""
	}
	switch {
	case t.record == "":
		return "patch and action storms need a record: select one in Records and press s"
	case t.owner != v.ctx.Owner || !t.resolved && t.refusal == "":
		return "the target is being read for owner " + safe(v.ctx.Owner) + " (a moment)"
	case t.refusal != "":
		return t.refusal
	}
	return ""
}

// firesAt says what the settings fire at, for the view's first line and the status.
func (v *Storm) firesAt() string {
	t := v.target
	owner := safe(v.ctx.Owner)
	switch op := v.value(fOperation); {
	case op == model.KindCreate:
		return "create a " + safe(v.value(fModule)) + " record for " + owner
	case t.record == "":
		return "nothing: no record selected"
	case t.refusal != "" && t.owner == v.ctx.Owner:
		return "nothing (why is below)"
	case !t.resolved || t.owner != v.ctx.Owner:
		return fmt.Sprintf("%s's %s %s (reading it…)", owner, safe(t.module), safe(t.record))
	case op == model.KindAction:
		return fmt.Sprintf("%s's %s %s (revision %d), feature %s", owner, safe(t.module), safe(t.record), t.revision, v.value(fFeature))
	}
	return fmt.Sprintf("%s's %s %s (revision %d)", owner, safe(t.module), safe(t.record), t.revision)
}

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
	if f := v.invalidField(); f != nil {
		// The error is under the field: the settings open on it.
		v.editing = true
		v.focusField(slices.Index(v.fields, f))
		return status("not fired: "+f.label+": "+f.validate(f.value())+" (under the field)", true)
	}
	if why := v.refusal(); why != "" {
		// The refusal is on screen under the first line; the status says nothing was sent.
		var load tea.Cmd
		if t := v.target; t.record != "" && !t.resolved && t.refusal == "" {
			v.needLoad = false
			load = v.loadTarget(t.base == nil) // nothing was reading it
		}
		return tea.Batch(status("not fired, 0 requests sent: "+why, true), load)
	}
	num := func(label string) int { n, _ := strconv.Atoi(v.value(label)); return n }
	hold, _ := parseHold(v.value(fHold))
	req := v.request()
	spec := stormtypes.Spec{ID: stormtypes.RandomHex(3), Op: stormtypes.Op(req.Kind), N: num(fN), Concurrency: num(fConcurrency),
		Processes: num(fProcesses), Via: v.value(fVia), Share: v.value(fShare) == "on", FailFirst: v.value(fFailFirst) == "yes", Hold: hold,
		Create: req.Create, Patch: req.Patch, Action: req.Feature}
	if spec.Via == stormtypes.ViaHTTP {
		spec.Servers = num(fServers)
	}
	v.editing = false
	v.focusField(v.focus)
	v.run++
	n := 1
	if len(v.runs) > 0 {
		n = v.runs[len(v.runs)-1].n + 1
	}
	r := &stormRun{n: n, spec: spec, req: req, owner: v.ctx.Owner, at: v.ctx.Now(), started: time.Now(), lastEvent: time.Now(), outcomes: map[string]int{}}
	v.runs = append(v.runs, r)
	if len(v.runs) > maxRuns {
		v.runs = v.runs[len(v.runs)-maxRuns:]
	}
	v.running, v.stopping, v.err = true, false, ""
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

// last is the running or last storm (nil before the first).
func (v *Storm) last() *stormRun {
	if len(v.runs) == 0 {
		return nil
	}
	return v.runs[len(v.runs)-1]
}

// listen waits for the next events (draining what is buffered), a lock sample or the end; it
// is re-armed after every message so the UI never blocks on the storm.
func (v *Storm) listen() tea.Cmd {
	r := v.last()
	run, id, key, events, locks, done, spec := v.run, r.spec.ID, r.spec.Key(), v.events, v.lockCh, v.done, r.spec
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

func (r *stormRun) add(events []stormtypes.Event) {
	if len(events) == 0 {
		return
	}
	for _, e := range events {
		r.outcomes[e.Outcome]++
		if e.Waited {
			r.waited++
		}
		r.latencies = append(r.latencies, e.LatencyMs)
		if e.ExecutionStatus != "" {
			r.execStatus = e.ExecutionStatus
		}
	}
	r.lastEvent = time.Now()
	r.sorted = append(r.sorted[:0], r.latencies...)
	slices.Sort(r.sorted)
}

// Update handles messages.
func (v *Storm) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case stormEventsMsg:
		if msg.run != v.run {
			return nil
		}
		r := v.last()
		r.add(msg.events)
		r.elapsed = time.Since(r.started)
		if r.execStatus != "" {
			v.execStatus = r.execStatus
		}
		return v.listen()
	case stormLocksMsg:
		if msg.run != v.run || !v.running {
			return nil
		}
		r := v.last()
		r.locks = msg.locks
		for _, b := range msg.locks.Blockers {
			if b.LockType != "" && !slices.Contains(r.lockTypes, b.LockType) {
				r.lockTypes = append(r.lockTypes, b.LockType)
			}
		}
		return v.listen()
	case stormTickMsg:
		if msg.run != v.run || !v.running {
			return nil
		}
		v.last().elapsed = time.Since(v.last().started)
		return v.tick()
	case stormDoneMsg:
		if msg.run != v.run {
			return nil
		}
		return v.finish(msg)
	case stormReuseMsg:
		for _, r := range v.runs {
			if r.n == msg.n {
				r.reuse = msg.text
			}
		}
		return nil
	case stormTargetMsg:
		return v.targetRead(msg)
	case uictx.OwnerChangedMsg:
		// The record was the last owner's: read it again for this one (a record id is one
		// owner's), and until it is read, nothing fires at it.
		if v.target.record != "" && !v.running {
			v.target.resolved, v.target.refusal, v.target.base = false, "", nil
			return v.loadTarget(true)
		}
	case uictx.DataChangedMsg:
		// Something wrote: the record may have moved on (a form's patch).
		if v.target.record != "" && !v.running && !v.editing {
			return v.loadTarget(false)
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
		case key.Matches(msg, v.ctx.Keys.Storm.Save):
			return status("the settings are saved; f fires them", false)
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

// finish ends the running storm with what the engine returned.
func (v *Storm) finish(msg stormDoneMsg) tea.Cmd {
	r := v.last()
	r.add(msg.events)
	v.running, v.stopping, r.elapsed = false, false, time.Since(r.started)
	if v.cancel != nil {
		v.cancel()
	}
	if msg.summary.Requests > 0 {
		s := msg.summary
		r.summary = &s
		if s.Verified.ExecutionStatus != "" {
			r.execStatus = s.Verified.ExecutionStatus
		}
		// The engine's counts are the whole truth: events of a stopped storm can be dropped
		// on the way, and requests never sent have none.
		r.outcomes, r.waited = maps.Clone(s.Outcomes), s.Waited
	}
	if r.execStatus != "" {
		v.execStatus = r.execStatus
	}
	var txt string
	switch {
	case r.summary != nil:
		txt = fmt.Sprintf("storm #%d: %s", r.n, r.summary.Verdict.Text)
		if msg.err != nil && !errors.Is(msg.err, context.Canceled) { // a stop is reported by the verdict
			r.err = errText(msg.err)
		}
	case msg.err == nil || errors.Is(msg.err, context.Canceled):
		r.notRun = "stopped before any request was sent"
	case IsUnreachable(msg.err):
		r.notRun = v.ctx.UnreachableText() + " · f fires the storm again"
	default:
		r.notRun = errText(msg.err)
	}
	if r.notRun != "" {
		txt = fmt.Sprintf("storm #%d did not run: %s", r.n, r.notRun)
	}
	isErr := r.summary == nil || r.summary.Verdict.Verdict != stormtypes.VerdictAgrees
	cmds := []tea.Cmd{status(txt, isErr), v.loadTarget(false), func() tea.Msg { return uictx.DataChangedMsg{} }}
	if r.outcomes[string(apperr.KeyReused)] > 0 && v.deps.Reuse != nil {
		ex, req, n := v.deps.Reuse, r.req, r.n
		cmds = append(cmds, query(func(ctx context.Context) tea.Msg {
			rep, err := ex.ExplainKeyReuse(ctx, req)
			if err != nil {
				return stormReuseMsg{n: n, text: "its first request could not be read: " + errText(err)}
			}
			return stormReuseMsg{n: n, text: rep.Text()}
		}))
	}
	return tea.Batch(cmds...)
}

// targetRead takes the target record as it is now.
func (v *Storm) targetRead(msg stormTargetMsg) tea.Cmd {
	if msg.req != v.loadReq || msg.owner != v.ctx.Owner {
		return nil // a later read was asked for, or the owner changed since
	}
	t := &v.target
	t.owner = msg.owner
	if msg.err != nil {
		t.resolved, t.base = false, nil
		switch {
		case apperr.CodeOf(msg.err) == apperr.RecordNotFound:
			t.refusal = errText(msg.err) + ": a storm fires at nothing of another owner; in Records, s on one of " + safe(msg.owner) + "'s records"
		case IsUnreachable(msg.err):
			t.refusal = v.ctx.UnreachableText()
		default:
			t.refusal = "the target record could not be read: " + errText(msg.err)
		}
		return nil
	}
	r := msg.record
	moved := t.resolved && r.Revision != t.revision
	t.resolved, t.refusal, t.revision, t.title = true, "", r.Revision, r.Title
	next := strconv.Itoa(r.Revision)
	if !msg.prefill && v.value(fOperation) == model.KindPatch && v.value(fExpect) != next {
		// The record moved on (this storm, or a write elsewhere): the next patch expects the new
		// revision, which is another body, so it needs another key (under the same key it would
		// only be IDEMPOTENCY_KEY_REUSED). Typing the old key back replays the last storm.
		v.field(fKey).input.SetValue(FreshKey())
		v.field(fKey).hint = "a new key: the record moved to revision " + next + " since the last storm"
	}
	if msg.prefill || moved || t.base == nil {
		v.prefill(r)
	}
	v.field(fExpect).input.SetValue(next)
	return nil
}

// prefill puts the record's fields into the body, as the patch form does: the fields nobody
// typed into take the record's values, which a patch then leaves unchanged.
func (v *Storm) prefill(r model.Record) {
	rec := r
	v.target.base = &rec
	for label, value := range map[string]string{fTitle: r.Title, fSummary: r.Summary, fPayload: string(r.Payload)} {
		f := v.field(label)
		if f.edited {
			continue
		}
		if !representable(value) {
			// A one-line field cannot hold it as it is: left empty, the patch keeps it.
			f.input.SetValue("")
			f.hint = "empty: unchanged (the record's " + lower(label) + " holds control characters or line breaks)"
			continue
		}
		f.input.SetValue(value)
	}
}

func (v *Storm) updateEditing(msg tea.KeyMsg) tea.Cmd {
	vis := v.visible()
	last := vis[len(vis)-1]
	switch {
	case key.Matches(msg, v.ctx.Keys.Form.Cancel):
		v.editing = false
		v.focusField(v.focus)
		return nil
	case key.Matches(msg, v.ctx.Keys.Storm.Save), key.Matches(msg, v.ctx.Keys.Form.Enter) && v.focus == last:
		return v.save()
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
		if f.label == fOperation && f.value() == model.KindCreate {
			// A create needs a body of its own: the module's template where none is typed.
			if t := v.field(fTitle); t.value() == "" {
				t.input.SetValue("storm")
			}
			if pl := v.field(fPayload); pl.value() == "" {
				pl.input.SetValue(defaultPayload(v.value(fModule)))
			}
		}
		if f.label == fModule {
			// As the create form does: the module's template, unless a payload was typed.
			if pl := v.field(fPayload); !pl.edited {
				pl.input.SetValue(defaultPayload(f.value()))
			}
		}
		return nil
	}
	old := f.input.Value()
	var cmd tea.Cmd
	f.input, cmd = f.input.Update(msg)
	if f.input.Value() != old {
		f.edited = true
	}
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

// ShortHelp is the footer help: the keys that act now (a read-only session has no f).
func (v *Storm) ShortHelp() []key.Binding {
	k := v.ctx.Keys
	if v.editing {
		return []key.Binding{k.Storm.Save, k.Form.Next, k.Form.ChoicePrev, k.Form.ChoiceNext, k.Form.NewKey, k.Form.Cancel}
	}
	if v.running {
		return []key.Binding{k.Storm.Stop}
	}
	if v.ctx.ReadOnly() {
		return []key.Binding{k.Storm.Edit}
	}
	return []key.Binding{k.Storm.Fire, k.Storm.Edit, k.Form.NewKey}
}

// FullHelp is the ? help: every key that acts in what the view shows now.
func (v *Storm) FullHelp() [][]key.Binding {
	k := v.ctx.Keys
	if v.editing {
		return [][]key.Binding{{k.Storm.Save, k.Form.Enter, k.Form.Next, k.Form.Prev, k.Form.ChoicePrev, k.Form.ChoiceNext, k.Form.NewKey, k.Form.Cancel}}
	}
	if v.running {
		return [][]key.Binding{{k.Storm.Stop}}
	}
	// ctrl+x acts while a storm runs (the footer shows it then).
	return [][]key.Binding{v.ShortHelp(), {k.Storm.Stop}}
}

// Selection is the storm's key.
func (v *Storm) Selection() string { return v.value(fKey) }

// Running reports whether a storm is in flight.
func (v *Storm) Running() bool { return v.running }
