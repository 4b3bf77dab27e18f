package views

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/oklog/ulid/v2"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
)

// Form is the modal for a write: create, patch or run a feature, each with a chosen (or
// generated) Idempotency-Key and JSON validated as you type; and the module rules editor. After
// a submit the form stays open with the outcome, so the same request can be sent again to watch
// it replay.
type Form struct {
	ctx    *uictx.ProgramContext
	deps   FormDeps
	w, h   int
	kind   string // create | patch | action | rules
	module string
	record string
	rev    int

	fields  []*formField
	focus   int
	busy    bool
	req     int
	result  *model.WriteResult
	errText string
	// errField is the field errText is about ("" for the write's own error): fixing the field
	// clears it.
	errField string
	loadErr  string
	// notes are what the form says about its prefill and its inputs (kept payloads, dropped
	// control characters).
	notes []string
	// base is the record a patch's fields were prefilled from (nil until read): a field left
	// at its value is not sent, as a CLI flag left out is not.
	base *model.Record
	// sent is the last request sent (nil none): what ctrl+r sends again, byte for byte, whatever
	// the fields say since.
	sent *model.WriteRequest
}

// FormDeps is what a form writes and reads through.
type FormDeps struct {
	Writer  Writer
	Records LatestReader
	Catalog Catalog
}

// Writer runs the kernel's writes: the same code, with the same idempotency, as the HTTP API
// and the CLI.
type Writer interface {
	Create(ctx context.Context, in model.CreateInput) (model.WriteResult, error)
	Patch(ctx context.Context, in model.PatchInput) (model.WriteResult, error)
	RunFeature(ctx context.Context, in model.FeatureInput) (model.WriteResult, error)
}

// LatestReader reads a record as it is now (a patch's prefill, a storm's target).
type LatestReader interface {
	LatestRecord(ctx context.Context, owner, module, id string) (model.Record, error)
}

// Feature is one feature of a module, as a picker shows it.
type Feature struct {
	ID string
	// Label names it with its mode and what a run commits ("F02 publish · direct_external →
	// blocked").
	Label string
}

// Catalog is what the modules offer and the live module rules (the rules editor and the
// header show MEM-001's max_content_length; replays never read it).
type Catalog interface {
	// Features lists the features of module (none for an unknown one).
	Features(module string) []Feature
	MemMaxContentLength() int
	SetMemMaxContentLength(n int)
}

type formField struct {
	label   string
	input   textinput.Model
	choices []string // a choice field cycles with ←/→
	// labels, when set, are what the choices show (a feature's name and mode beside its id).
	labels   []string
	choice   int
	validate func(string) string // "" when valid
	hint     string
	// edited is true once the user typed into the field: a late prefill or a module switch
	// never overwrites what they wrote.
	edited bool
	// unchanged marks a field left empty because the record's value cannot be typed into one
	// line (control characters, line breaks): until typed into, it sends nothing (the record
	// keeps its value).
	unchanged bool
}

func (f *formField) value() string {
	if f.choices != nil {
		return f.choices[f.choice]
	}
	return f.input.Value()
}

// TextFocused reports whether a text field has the keys: a digit is typed there, while on a
// choice (the module) it switches views like anywhere else.
func (f *Form) TextFocused() bool { return f.focus < len(f.fields) && f.fields[f.focus].choices == nil }

// FormClosedMsg tells the shell the form is done.
type FormClosedMsg struct{}

type formResultMsg struct {
	req int
	res model.WriteResult
	err error
}

// formPrefillMsg is the record a patch form is filled from; after says why it was read again
// ("" the first read).
type formPrefillMsg struct {
	record model.Record
	after  string
	err    error
}

// FreshKey returns a new, readable Idempotency-Key.
func FreshKey() string { return "tui-" + strings.ToLower(ulid.Make().String()) }

func newInput(value string, limit int) textinput.Model {
	in := textinput.New()
	in.Prompt = ""
	in.CharLimit = limit
	in.SetValue(value)
	return in
}

func jsonCheck(field string) func(string) string {
	return func(s string) string {
		if strings.TrimSpace(s) == "" {
			return ""
		}
		if err := model.CheckJSONObject(field, []byte(s)); err != nil {
			return apperr.As(err).Message
		}
		return ""
	}
}

// keyCheck is the runner's own key rule (an empty field means "no idempotency").
func keyCheck(s string) string {
	if s == "" {
		return ""
	}
	return validationMessage(idemtype.ValidateKey(s))
}

// textCheck is the kernel's own rule for a text field, as the server will apply it.
func textCheck(field string, min, max int) func(string) string {
	return func(s string) string { return validationMessage(model.CheckText(field, s, min, max)) }
}

// validationMessage is a coded error's message without its field prefix ("" for nil): the
// form already shows the field's label.
func validationMessage(err error) string {
	if err == nil {
		return ""
	}
	msg := apperr.As(err).Message
	if _, rest, ok := strings.Cut(msg, ": "); ok {
		return rest
	}
	return msg
}

// NewForm builds the form for an OpenFormMsg.
func NewForm(ctx *uictx.ProgramContext, deps FormDeps, m uictx.OpenFormMsg) *Form {
	f := &Form{ctx: ctx, deps: deps, kind: m.Kind, module: m.Module, record: m.RecordID, rev: m.Revision}
	keyField := &formField{label: "Idempotency-Key", input: newInput(FreshKey(), 255), validate: keyCheck, hint: "ctrl+n: fresh key · empty: no idempotency"}
	switch m.Kind {
	case "create":
		mods := []string{"NOTE", "MEM-001", "COMMITMENT", "IDENTITY"}
		mod := &formField{label: "Module", choices: mods}
		for i, c := range mods {
			if c == m.Module {
				mod.choice = i
			}
		}
		f.fields = []*formField{mod, keyField,
			{label: "Title", input: newInput("", 400), validate: textCheck("title", 1, model.MaxTitleChars)},
			{label: "Summary", input: newInput("", 4000), validate: textCheck("summary", 0, model.MaxSummaryChar)},
			{label: "Payload", input: newInput(defaultPayload(m.Module), model.MaxJSONBytes+1), validate: jsonCheck("payload")}}
	case "patch":
		f.fields = []*formField{keyField,
			{label: "Expect revision", input: newInput(strconv.Itoa(m.Revision), 10), validate: func(s string) string {
				if n, err := strconv.Atoi(s); err != nil || n < 1 {
					return "a revision number (>= 1)"
				}
				return ""
			}, hint: "the write is refused with REVISION_CONFLICT unless the record is still at this revision"},
			// Empty, a patch's title is not sent: the record keeps its own.
			{label: "Title", input: newInput("", 400), validate: func(s string) string {
				if s == "" {
					return ""
				}
				return textCheck("title", 1, model.MaxTitleChars)(s)
			}},
			{label: "Summary", input: newInput("", 4000), validate: textCheck("summary", 0, model.MaxSummaryChar)},
			{label: "Payload", input: newInput("", model.MaxJSONBytes+1), validate: jsonCheck("payload")}}
	case "action":
		var feats, labels []string
		for _, ft := range deps.Catalog.Features(m.Module) {
			feats, labels = append(feats, ft.ID), append(labels, ft.Label)
		}
		if len(feats) == 0 {
			feats, labels = []string{"(none)"}, nil
		}
		feature := &formField{label: "Feature", choices: feats, labels: labels}
		for i, id := range feats {
			if id == m.FeatureID {
				feature.choice = i
			}
		}
		f.fields = []*formField{feature, keyField,
			{label: "Input", input: newInput("{}", model.MaxJSONBytes+1), validate: jsonCheck("input")}}
	case "rules":
		cur := deps.Catalog.MemMaxContentLength()
		f.fields = []*formField{{label: "MEM-001 max_content_length", input: newInput(strconv.Itoa(cur), 9), validate: func(s string) string {
			if n, err := strconv.Atoi(s); err != nil || n < 1 {
				return "a positive number of characters"
			}
			return ""
		}, hint: "replays never read rules: lower it below a stored record and replay its key"}}
	}
	for _, fl := range f.fields {
		// The cursor in reverse video: visible without colour (NO_COLOR) too.
		fl.input.Cursor.Style = ctx.Styles.Cursor
	}
	f.focusField(0)
	return f
}

func defaultPayload(module string) string {
	switch module {
	case "MEM-001":
		return `{"originalContent":"draft  text","currentContent":"draft  text"}`
	case "COMMITMENT":
		return `{"status":"OPEN","due":"2026-12-31"}`
	}
	return `{}`
}

// Init loads the current record to prefill a patch.
func (f *Form) Init() tea.Cmd {
	if f.kind != "patch" {
		return textinput.Blink
	}
	return tea.Batch(textinput.Blink, f.loadLatest(""))
}

// loadLatest reads the record as it is now, to fill the patch form from it.
func (f *Form) loadLatest(after string) tea.Cmd {
	db, owner, module, id := f.deps.Records, f.ctx.Owner, f.module, f.record
	return query(func(ctx context.Context) tea.Msg {
		r, err := db.LatestRecord(ctx, owner, module, id)
		return formPrefillMsg{record: r, after: after, err: err}
	})
}

func (f *Form) focusField(i int) {
	if len(f.fields) == 0 {
		return
	}
	i = (i + len(f.fields)) % len(f.fields)
	for j, fl := range f.fields {
		if fl.choices == nil {
			if j == i {
				fl.input.Focus()
			} else {
				fl.input.Blur()
			}
		}
	}
	f.focus = i
}

func (f *Form) field(label string) *formField {
	for _, fl := range f.fields {
		if fl.label == label {
			return fl
		}
	}
	return nil
}

// Update handles messages.
func (f *Form) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case formPrefillMsg:
		return f.prefill(msg)
	case formResultMsg:
		if msg.req != f.req {
			return nil
		}
		f.busy = false
		if msg.err != nil {
			e := apperr.As(msg.err)
			f.errText, f.errField = termsafe.Line(fmt.Sprintf("%s (HTTP %d): %s", e.Code, e.Status(), e.Message)), ""
			if IsUnreachable(msg.err) {
				f.errText = f.ctx.UnreachableText()
			}
			f.result = nil
			st := status(termsafe.Line(string(e.Code)+": "+e.Message), true)
			if e.Code == apperr.RevisionConflict && f.kind == "patch" {
				// Read the record again: the expected revision follows it, the edits stay.
				return tea.Batch(st, f.loadLatest(string(e.Code)))
			}
			return st
		}
		f.result, f.errText, f.errField = &msg.res, "", ""
		text := fmt.Sprintf("%s %s", model.OutcomeText(msg.res.Outcome, msg.res.Execution), msg.res.Operation)
		if off := f.clockOffset(); off != "" {
			text += " — written under the moved clock (" + off + ")"
		}
		cmds := []tea.Cmd{status(text, false), func() tea.Msg { return uictx.DataChangedMsg{} }}
		if f.kind == "patch" {
			// The record moved on (or a replay says where it was): the form shows it as it is now.
			cmds = append(cmds, f.loadLatest(string(msg.res.Outcome)))
		}
		if r := msg.res.Record; r != nil {
			// Behind the form, the workbench opens the rows just written (or replayed); the form
			// stays on top so the same request can be sent again.
			cmds = append(cmds, jump(uictx.JumpRecord, r.ModuleCode, r.ID))
		}
		return tea.Batch(cmds...)
	case tea.KeyMsg:
		switch {
		case key.Matches(msg, f.ctx.Keys.Form.Cancel):
			return func() tea.Msg { return FormClosedMsg{} }
		case key.Matches(msg, f.ctx.Keys.Form.Resend) && f.sent != nil && f.kind != "rules":
			return f.send(*f.sent)
		case key.Matches(msg, f.ctx.Keys.Form.Submit), key.Matches(msg, f.ctx.Keys.Form.Resend) && f.kind != "rules":
			return f.submit()
		case key.Matches(msg, f.ctx.Keys.Form.Enter):
			if f.focus == len(f.fields)-1 {
				return f.submit()
			}
			f.focusField(f.focus + 1)
			return nil
		case key.Matches(msg, f.ctx.Keys.Form.NewKey) && f.kind != "rules":
			if k := f.field("Idempotency-Key"); k != nil {
				k.input.SetValue(FreshKey())
			}
			return nil
		case key.Matches(msg, f.ctx.Keys.Form.ToRecord):
			if f.result != nil && f.result.Record != nil {
				r := f.result.Record
				return tea.Batch(func() tea.Msg { return FormClosedMsg{} }, jump(uictx.JumpRecord, r.ModuleCode, r.ID))
			}
			return nil
		case key.Matches(msg, f.ctx.Keys.Form.Next):
			f.focusField(f.focus + 1)
			return nil
		case key.Matches(msg, f.ctx.Keys.Form.Prev):
			f.focusField(f.focus - 1)
			return nil
		}
		fl := f.fields[f.focus]
		if fl.choices != nil {
			before := fl.value()
			switch {
			case key.Matches(msg, f.ctx.Keys.Form.ChoicePrev):
				fl.choice = (fl.choice + len(fl.choices) - 1) % len(fl.choices)
			case key.Matches(msg, f.ctx.Keys.Form.ChoiceNext):
				fl.choice = (fl.choice + 1) % len(fl.choices)
			}
			if fl.label == "Module" && fl.value() != before {
				if p := f.field("Payload"); p != nil {
					if p.edited && p.input.Value() != defaultPayload(before) {
						f.notes = []string{"the payload you edited is kept; its " + fl.value() + " example is " + defaultPayload(fl.value())}
					} else {
						p.input.SetValue(defaultPayload(fl.value()))
						p.edited = false
					}
				}
			}
			return nil
		}
		old := fl.input.Value()
		var cmd tea.Cmd
		fl.input, cmd = fl.input.Update(msg)
		if fl.input.Value() != old {
			fl.edited, fl.unchanged = true, false
			// A submit error about this field goes once the field is right.
			if f.errField == fl.label && fl.validate != nil && fl.validate(fl.value()) == "" {
				f.errText, f.errField = "", ""
			}
		}
		return cmd
	}
	if f.focus < len(f.fields) && f.fields[f.focus].choices == nil {
		var cmd tea.Cmd
		f.fields[f.focus].input, cmd = f.fields[f.focus].input.Update(msg)
		return cmd
	}
	return nil
}

// submit validates locally, then runs the write off the Update goroutine.
func (f *Form) submit() tea.Cmd {
	if f.busy {
		return nil
	}
	for _, fl := range f.fields {
		if fl.validate != nil {
			if e := fl.validate(fl.value()); e != "" {
				f.errText, f.errField = fl.label+": "+e, fl.label
				return nil
			}
		}
	}
	if f.kind == "rules" {
		n, _ := strconv.Atoi(f.fields[0].value())
		f.deps.Catalog.SetMemMaxContentLength(n)
		return tea.Batch(status(fmt.Sprintf("MEM-001 max_content_length is now %d (new writes only; replays ignore it)", n), false),
			func() tea.Msg { return FormClosedMsg{} })
	}
	return f.send(f.request())
}

// request is the write the fields say, built as the Storm and the CLI build theirs
// (model.Fields): the same fields through any door are one body and one fingerprint.
func (f *Form) request() model.WriteRequest {
	text := func(label string) *string {
		fl := f.field(label)
		if fl == nil || fl.unchanged {
			return nil
		}
		s := fl.value()
		return &s
	}
	val := func(label string) string { return deref(text(label)) }
	exp, _ := strconv.Atoi(val("Expect revision"))
	fields := model.Fields{Kind: f.kind, Owner: f.ctx.Owner, Module: f.module, RecordID: f.record, FeatureID: val("Feature"),
		Key: val("Idempotency-Key"), ExpectRevision: exp, Title: text("Title"), Summary: text("Summary"), Payload: text("Payload"),
		Input: text("Input"), Base: f.base}
	if f.kind == "create" {
		fields.Module = val("Module")
	}
	return fields.Request()
}

// send runs the write r off the Update goroutine; ctrl+r sends it again as it was.
func (f *Form) send(r model.WriteRequest) tea.Cmd {
	if f.busy {
		return nil
	}
	if f.ctx.ReadOnly() {
		f.errText = f.ctx.ReadOnlyMessage()
		return nil
	}
	f.busy, f.errText, f.errField = true, "", ""
	f.req++
	f.sent = &r
	req, k := f.req, f.deps.Writer
	return query(func(ctx context.Context) tea.Msg {
		var res model.WriteResult
		var err error
		switch r.Kind {
		case model.KindPatch:
			res, err = k.Patch(ctx, r.Patch)
		case model.KindAction:
			res, err = k.RunFeature(ctx, r.Feature)
		default:
			res, err = k.Create(ctx, r.Create)
		}
		return formResultMsg{req: req, res: res, err: err}
	})
}

// prefill fills a patch form from the record as it is now. The fields and the expected revision
// come from the same read, so a fresh title is never sent with a stale revision. The first read
// keeps what the user already typed; the read after the form's own patch takes the record as
// the patch left it (the next patch starts there, under a fresh key: its body differs); after a
// REVISION_CONFLICT the expected revision follows the record and the edits stay.
func (f *Form) prefill(msg formPrefillMsg) tea.Cmd {
	if msg.err != nil {
		f.loadErr = errText(msg.err)
		if IsUnreachable(msg.err) {
			f.loadErr = f.ctx.UnreachableText()
		}
		return nil
	}
	r := msg.record
	f.loadErr = ""
	after := msg.after != "" && msg.after != string(apperr.RevisionConflict)
	moved := f.base != nil && r.Revision != f.base.Revision
	rec := r
	f.base, f.rev = &rec, r.Revision
	f.notes = nil
	for label, value := range map[string]string{"Title": r.Title, "Summary": r.Summary, "Payload": string(r.Payload),
		"Expect revision": strconv.Itoa(r.Revision)} {
		fl := f.field(label)
		if fl == nil {
			continue
		}
		if after {
			fl.edited = false // the patch wrote what was typed: the record holds it now
		}
		if fl.edited && label != "Expect revision" {
			continue
		}
		fl.unchanged = label != "Expect revision" && !representable(value)
		if fl.unchanged {
			// A one-line field cannot hold it as it is: left empty, the patch keeps it.
			fl.input.SetValue("")
			f.notes = append(f.notes, fmt.Sprintf("the stored %s holds control characters or line breaks (%s): left empty, a patch keeps it",
				strings.ToLower(label), termsafe.Cut(termsafe.Line(value), 24)))
			continue
		}
		fl.input.SetValue(value)
	}
	switch {
	case after && moved:
		if k := f.field("Idempotency-Key"); k != nil && f.sent != nil && k.value() == f.sent.Key() {
			k.input.SetValue(FreshKey())
			k.hint = "a fresh key: the next patch starts at revision " + strconv.Itoa(r.Revision) + " (another body); ctrl+r still replays the one sent"
		}
		f.notes = append(f.notes, fmt.Sprintf("prefilled from revision %d, the latest (your patch wrote it)", r.Revision))
	case msg.after == string(apperr.RevisionConflict):
		f.notes = append(f.notes, fmt.Sprintf("the record is at revision %d: Expect revision follows it, your edits stay; enter sends them", r.Revision))
	default:
		f.notes = append(f.notes, fmt.Sprintf("prefilled from revision %d, the latest", r.Revision))
	}
	return nil
}

// SetSize sets the space the modal may use.
func (f *Form) SetSize(w, h int) {
	f.w, f.h = w, h
	for _, fl := range f.fields {
		fl.input.Width = f.innerWidth() - 4 // the indent and the cursor cell
	}
}

func (f *Form) innerWidth() int {
	w := f.w - 6
	if w > 100 {
		w = 100
	}
	if w < 20 {
		w = 20
	}
	return w
}

// View renders the modal.
func (f *Form) View() string {
	s := f.ctx.Styles
	iw := f.innerWidth()
	titles := map[string]string{"create": "Create a record", "patch": "Patch " + safe(f.module) + " " + safe(f.record),
		"action": "Run a feature of " + safe(f.module) + " " + safe(f.record), "rules": "Module rules (change at run time)"}
	var b []string
	b = append(b, s.Title.Render(termsafe.Cut(titles[f.kind], iw)))
	if f.loadErr != "" {
		b = append(b, s.Danger.Render(termsafe.Cut(f.loadErr, iw)))
	}
	if off := f.clockOffset(); off != "" && f.kind != "rules" {
		b = append(b, s.Warning.Render(termsafe.Cut("the workbench clock is moved "+off+": this write is stamped "+
			f.ctx.Now().Local().Format("Jan 2 15:04")+" and its key expires by that clock", iw)))
	}
	for _, n := range f.notes {
		b = append(b, wrapLines(s.Subtle, n, iw, 2)...)
	}
	for i, fl := range f.fields {
		label, mark := s.InputLabel, "  "
		if i == f.focus {
			label, mark = s.InputLabelFocused, "> "
		}
		b = append(b, label.Render(mark+fl.label))
		if fl.choices != nil {
			b = append(b, f.choiceLines(fl, iw)...)
			continue
		}
		b = append(b, "  "+fl.input.View())
		if fl.validate != nil {
			if e := fl.validate(fl.value()); e != "" {
				b = append(b, s.FieldError.Render(termsafe.Cut("  ✗ "+e, iw)))
				if fl.label == "Idempotency-Key" && shownKey(fl.value()) != fl.value() {
					b = append(b, s.FieldError.Render("    as typed: "+cutLeft(shownKey(fl.value()), iw-14)))
				}
			} else if fl.unchanged {
				b = append(b, s.Subtle.Render("  (empty: unchanged)"))
			} else if fl.label == "Payload" || fl.label == "Input" {
				b = append(b, s.Success.Render("  ✓ a valid JSON object"))
			}
		}
		if i == f.focus && fl.hint != "" {
			b = append(b, s.Subtle.Render(termsafe.Cut("  "+fl.hint, iw)))
		}
	}
	b = append(b, "")
	switch {
	case f.busy:
		b = append(b, s.Subtle.Render("running…"))
	case f.errText != "":
		// Wrapped, not cut: what differs, and what to do, come at the end.
		b = append(b, wrapLines(s.Danger, f.errText, iw, 5)...)
	case f.result != nil:
		r := f.result
		// A run whose execution is BLOCKED (or only queued) leads with that, never with a bare
		// EXECUTED that reads as the real action's success.
		outcome := model.OutcomeText(r.Outcome, r.Execution)
		line := s.Success.Render(outcome)
		if outcome != string(idemtype.Executed) {
			line = s.Warning.Render(outcome)
		}
		if r.Waited {
			line += s.Subtle.Render(" after waiting on the unique index")
		}
		b = append(b, wrap(line+s.Subtle.Render(" "+safe(r.Operation)), iw, 2)...)
		if r.Record != nil {
			b = append(b, termsafe.Cut(fmt.Sprintf("record %s revision %d", r.Record.ID, r.Record.Revision), iw))
		}
		if e := r.Execution; e != nil {
			b = append(b, wrap(fmt.Sprintf("execution %s %s %s", e.ID, e.Mode, e.Status), iw, 2)...)
			switch e.Status {
			case "BLOCKED":
				b = append(b, wrapLines(s.Warning, "BLOCKED: the feature would call a provider directly, so it failed closed; nothing was sent, and a replay returns this BLOCKED execution", iw, 3)...)
			case "PENDING":
				b = append(b, wrapLines(s.Subtle, "PENDING: an outbox message waits for the delivery worker (Outbox view, d)", iw, 2)...)
			}
		}
		if r.Envelope != nil {
			b = append(b, s.Subtle.Render(termsafe.Cut("envelope "+compactJSON(r.Envelope), iw)))
		}
	}
	if f.sent != nil && !f.busy {
		// The same request from a shell: the CLI builds the same body, so it replays this one.
		b = append(b, wrapCommand(s.Subtle, "the same request from a shell: "+termsafe.Line(f.sent.CommandLine()), iw, 3)...)
	}
	b = append(b, wrapLines(s.Subtle, f.helpLine(), iw, 2)...)
	body := strings.Join(b, "\n")
	if f.h > 2 {
		body = fitBlock(body, iw, min(strings.Count(body, "\n")+1, f.h-2))
	}
	return s.Modal.Width(iw + 2).Render(body)
}

// choiceLines draws a choice field: its choices on one line when they fit, else one per line
// (a feature's name and mode are never cut away); the chosen one marked, also without colour.
func (f *Form) choiceLines(fl *formField, iw int) []string {
	s := f.ctx.Styles
	parts := make([]string, len(fl.choices))
	width := 2
	for j, c := range fl.choices {
		if j < len(fl.labels) {
			c = fl.labels[j]
		}
		mark := " "
		st := s.Subtle
		if j == fl.choice {
			mark, st = "▸", s.RowSelected
		}
		parts[j] = st.Render(mark + c + " ")
		width += ansi.StringWidth(parts[j]) + 1
	}
	if width <= iw {
		return []string{"  " + strings.Join(parts, " ")}
	}
	var out []string
	for _, p := range parts {
		out = append(out, wrap("  "+p, iw, 2)...)
	}
	return out
}

// clockOffset is the moved clock's offset ("" when it is not moved).
func (f *Form) clockOffset() string {
	if f.ctx.Clock == nil || f.ctx.Clock.Offset() == 0 {
		return ""
	}
	d := f.ctx.Clock.Offset()
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return sign + d.Round(time.Second).String()
}

// helpLine is the modal's own line of keys: what each does now (ctrl+r only once something was
// sent, and then what it will do).
func (f *Form) helpLine() string {
	fk := f.ctx.Keys.Form
	if f.kind == "rules" {
		return "enter/" + fk.Submit.Help().Key + " set it · " + fk.Cancel.Help().Key + " close"
	}
	if f.sent == nil {
		return "enter/" + fk.Submit.Help().Key + " submit · " + fk.NewKey.Help().Key + " fresh key · tab/↓ next field · " + fk.Cancel.Help().Key + " close"
	}
	again := fk.Resend.Help().Key + " send the same request again (same key: replays)"
	if f.sent.Key() == "" {
		again = fk.Resend.Help().Key + " send it again (no key: executes again)"
	}
	help := again + " · " + fk.Submit.Help().Key + " send what the fields say"
	if f.result != nil && f.result.Record != nil {
		help += " · " + fk.ToRecord.Help().Key + " open the record"
	}
	return help + " · " + fk.NewKey.Help().Key + " fresh key · " + fk.Cancel.Help().Key + " close"
}

// ShortHelp is the footer help: the keys that act in the form as it is (the rules form has one
// field and no key; ctrl+r appears once something was sent).
func (f *Form) ShortHelp() []key.Binding {
	k := f.ctx.Keys.Form
	if f.kind == "rules" {
		return []key.Binding{k.Submit, k.Cancel}
	}
	out := []key.Binding{k.Submit}
	if f.sent != nil {
		out = append(out, k.Resend)
	}
	out = append(out, k.NewKey, k.Next)
	if f.kind != "patch" { // a patch form has no choice field
		out = append(out, k.ChoicePrev, k.ChoiceNext)
	}
	return append(out, k.Cancel)
}
