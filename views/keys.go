package views

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/internal/ticket"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
)

// Keys lists the owner's idempotency keys in every state; a selected key opens side by side:
// the stored envelope, what a replay restores (or why it fails closed), the latest record and
// the drift, what the next request with the key meets, and the key's rows life by life. Each
// pane scrolls; ←/→ move between them and y copies the focused one.
type Keys struct {
	ctx  *uictx.ProgramContext
	src  KeySource
	w, h int
	list paged[model.KeyRow]
	req  int // detail requests

	detail *keyDetail
}

// KeySource is what the Keys view reads: pages of the owner's idempotency rows, and one key as
// the next request with it would meet it (InspectKey for a key typed by a user, which checks it
// first; InspectStoredKey for a row of the list, looked up as stored).
type KeySource interface {
	Keys(ctx context.Context, q model.KeyQuery) ([]model.KeyRow, string, error)
	InspectKey(ctx context.Context, owner, key string) (model.KeyView, error)
	InspectStoredKey(ctx context.Context, owner, key string) (model.KeyView, error)
}

// Panes of a key's detail, in focus order.
const (
	paneEnvelope = iota
	paneReplay
	paneLatest
	paneHistory
	keyPanes
)

type keyDetail struct {
	req   int
	key   string
	view  *model.KeyView
	at    time.Time // when view was read (the workbench clock)
	err   string
	panes [keyPanes]scrollPane
	focus int
	head  []string // the lines above the panes, laid out for the width
	// stored is true for a key opened from the list (looked up as stored, see InspectStoredKey).
	stored bool
	// The envelope pane's content, indented for a wide screen and on one line (wrapped) for a
	// narrow one, where the pane has a few lines only.
	envTitle, envRaw   string
	envWide, envNarrow []string
	envNarrowShown     bool
}

// NewKeys returns the Keys view, reading through src.
func NewKeys(ctx *uictx.ProgramContext, src KeySource) *Keys {
	v := &Keys{ctx: ctx, src: src}
	// The key is what a row is read by: it takes the width its longest key needs, and the
	// operation (cut from the left, keeping ":patch") and the policy yield first.
	v.list.table.Columns = []Column{{Title: "KEY", Fit: true, Min: 16}, {Title: "STATUS", Width: 10, Min: 10}, {Title: "POLICY", Width: 20, Optional: true},
		{Title: "OPERATION", Min: 8, Tail: true}, {Title: "EXPIRES", Width: 9, Min: 9}}
	v.list.fetch = func(ctx context.Context, owner, query, cursor string, reverse bool) ([]model.KeyRow, string, error) {
		_, prefix := searchField(query, "key", "key")
		return src.Keys(ctx, model.KeyQuery{Owner: owner, Prefix: prefix, Limit: pageSize, Cursor: cursor, Reverse: reverse})
	}
	v.list.reversible = true
	v.list.id = func(r model.KeyRow) string { return r.Key }
	v.list.describe = func(q string) string {
		_, p := searchField(q, "key", "key")
		return "keys starting with " + termsafe.Quote(p) + " (A→Z)"
	}
	v.list.toRow = v.keyRow
	return v
}

// Title names the view.
func (v *Keys) Title() string { return "Keys" }

// Init loads the first page.
func (v *Keys) Init() tea.Cmd { return v.reload() }

type keyDetailMsg struct {
	req  int
	view model.KeyView
	at   time.Time
	err  error
}

func (v *Keys) reload() tea.Cmd { return v.list.reload(v.ctx) }

// OpenKey shows one key side by side (used by jumps: k was typed, and must be a valid key).
func (v *Keys) OpenKey(k string) tea.Cmd { return v.open(k, false) }

func (v *Keys) open(k string, stored bool) tea.Cmd {
	v.detail = &keyDetail{key: k, focus: paneReplay, stored: stored}
	v.SetSize(v.w, v.h)
	return v.loadDetail()
}

func (v *Keys) loadDetail() tea.Cmd {
	v.req++
	v.detail.req = v.req
	req, k, owner, name, stored, at := v.req, v.src, v.ctx.Owner, v.detail.key, v.detail.stored, v.ctx.Now()
	return query(func(ctx context.Context) tea.Msg {
		inspect := k.InspectKey
		if stored {
			inspect = k.InspectStoredKey
		}
		view, err := inspect(ctx, owner, name)
		return keyDetailMsg{req: req, view: view, at: at, err: err}
	})
}

// Update handles messages.
func (v *Keys) Update(msg tea.Msg) tea.Cmd {
	if v.list.handle(msg) {
		return nil
	}
	switch msg := msg.(type) {
	case keyExportMsg:
		if msg.err != nil {
			return status("export failed: "+errText(msg.err), true)
		}
		return status("exported key "+safe(msg.key)+" (verdict, envelope, what a retry gets, its rows; Markdown) to "+safe(msg.path), false)
	case keyDetailMsg:
		if v.detail == nil || msg.req != v.detail.req {
			return nil
		}
		if msg.err != nil {
			v.detail.err = errText(msg.err)
			return nil
		}
		v.detail.err = ""
		v.detail.view, v.detail.at = &msg.view, msg.at
		v.fillDetail()
	case TickMsg:
		v.list.refill()
		if v.detail != nil && v.detail.view != nil {
			v.layoutHead() // the expiry countdown
		}
	case uictx.OwnerChangedMsg:
		v.detail = nil
		v.list.query = ""
		return v.list.restart(v.ctx)
	case uictx.DataChangedMsg:
		cmds := []tea.Cmd{v.reload()}
		if v.detail != nil {
			cmds = append(cmds, v.loadDetail())
		}
		return tea.Batch(cmds...)
	case tea.MouseMsg:
		if v.detail == nil {
			return v.list.mouse(v.ctx, msg, msg.Y-1)
		}
		v.detail.panes[v.detail.focus].Wheel(msg)
	case tea.KeyMsg:
		if v.detail != nil {
			return v.updateDetail(msg)
		}
		if ok, cmd := v.list.keyNav(v.ctx, msg, v.list.table.BodyHeight()); ok {
			return cmd
		}
		switch {
		case key.Matches(msg, v.ctx.Keys.List.Open):
			if r := v.list.selected(); r != nil {
				return v.open(r.Key, true)
			}
		case key.Matches(msg, v.ctx.Keys.List.Refresh):
			return v.reload()
		case key.Matches(msg, v.ctx.Keys.List.ClearSearch) && v.list.query != "":
			return v.list.search(v.ctx, "")
		}
	}
	return nil
}

func (v *Keys) updateDetail(msg tea.KeyMsg) tea.Cmd {
	d := v.detail
	switch {
	case key.Matches(msg, v.ctx.Keys.List.Back):
		v.detail = nil
	case key.Matches(msg, v.ctx.Keys.List.Refresh):
		return v.loadDetail()
	case key.Matches(msg, v.ctx.Keys.Pane.Left):
		d.focus = (d.focus + keyPanes - 1) % keyPanes
	case key.Matches(msg, v.ctx.Keys.Pane.Right):
		d.focus = (d.focus + 1) % keyPanes
	case key.Matches(msg, v.ctx.Keys.List.Open):
		if kv := d.view; kv != nil {
			if r := kv.Latest.Record; r != nil {
				return jump(uictx.JumpRecord, r.ModuleCode, r.ID)
			}
			return status("this key names no record that exists", true)
		}
	case key.Matches(msg, v.ctx.Keys.Keys.Export):
		if kv := d.view; kv != nil {
			return exportKey(*kv, ticket.Meta{Owner: v.ctx.Owner, Database: v.ctx.Conn.Display + "/" + v.ctx.Conn.Database, At: d.at},
				v.ctx.ExportDir, v.ctx.Now())
		}
	default:
		d.panes[d.focus].Scroll(&v.ctx.Keys, msg)
	}
	return nil
}

func jump(kind uictx.JumpKind, module, id string) tea.Cmd {
	return func() tea.Msg { return uictx.JumpMsg{Kind: kind, Module: module, ID: id} }
}

// shortPolicy drops the words every policy name shares, for the list's narrow column.
func shortPolicy(p string) string { return strings.Replace(p, "-reference", "", 1) }

// shortOperation keeps an operation's module and action and shortens the record id between
// them to its tail: "MEM-001:…00001:feature:F02" (the table cuts what is left from the left).
func shortOperation(op string) string {
	parts := strings.Split(op, ":")
	if len(parts) >= 4 && parts[1] == "record" && len(parts[2]) > 6 {
		return parts[0] + ":…" + parts[2][len(parts[2])-5:] + ":" + strings.Join(parts[3:], ":")
	}
	return op
}

func (v *Keys) keyRow(r model.KeyRow) Row {
	now := v.ctx.Now()
	s := v.ctx.Styles
	policy := "-"
	var style *lipgloss.Style
	if r.Response != nil {
		if env, err := idemtype.ParseEnvelope(r.Response); err == nil {
			policy = shortPolicy(env.Policy)
			if env.Legacy {
				policy = "LEGACY"
				style = &s.Warning
			}
		} else {
			policy = "UNREADABLE"
			style = &s.Danger
		}
	}
	expires := ago(now, r.ExpiresAt)
	if !r.ExpiresAt.After(now) {
		expires = "expired"
		style = &s.Subtle
	}
	if r.Status == "PROCESSING" {
		style = &s.Danger
	}
	return Row{Cells: []string{r.Key, r.Status, policy, shortOperation(r.Operation), expires}, Style: style}
}

// SetSize sets the drawing area.
func (v *Keys) SetSize(w, h int) {
	v.w, v.h = w, h
	v.list.table.SetSize(w, h-1)
	if v.detail != nil && v.detail.view != nil {
		v.layoutHead()
		v.sizePanes()
	}
}

// Drift describes how the replayed result relates to the latest record.
func Drift(kv *model.KeyView) string {
	r, l := kv.Restored.Record, kv.Latest.Record
	switch {
	case kv.Expired && r != nil:
		return fmt.Sprintf("EXPIRED: nothing is replayed (its result was rev %d); a retry executes anew", r.Revision)
	case kv.Expired:
		return "EXPIRED: nothing is replayed; a retry executes anew"
	case kv.Legacy:
		return "legacy raw-json-v1 receipt: readable only, never replayed"
	case kv.RestoreError != nil:
		return fmt.Sprintf("a replay FAILS CLOSED: %s", kv.RestoreError.Code)
	case kv.Status == "PROCESSING":
		return "PROCESSING: nothing to replay"
	case r == nil && kv.Restored.Review != nil:
		return fmt.Sprintf("replay returns review %s (verdict %s)", kv.Restored.Review.ID, kv.Restored.Review.Verdict)
	case r == nil:
		return "nothing to restore"
	case l == nil:
		return fmt.Sprintf("replay returns rev %d; the record no longer exists", r.Revision)
	case l.Revision == r.Revision:
		return fmt.Sprintf("replay returns rev %d, latest is rev %d: no drift", r.Revision, l.Revision)
	default:
		return fmt.Sprintf("replay returns rev %d, latest is rev %d: drift of %d revision(s)", r.Revision, l.Revision, l.Revision-r.Revision)
	}
}

// stateStyle colours a key state.
func (v *Keys) stateStyle(kv *model.KeyView) lipgloss.Style {
	s := v.ctx.Styles
	switch kv.State {
	case model.KeyProcessing, model.KeyFailsClosed:
		return s.Danger
	case model.KeyExpired, model.KeyLegacy:
		return s.Warning
	}
	if kv.Latest.Record != nil && kv.Restored.Record != nil && kv.Latest.Record.Revision != kv.Restored.Record.Revision {
		return s.Warning
	}
	return s.Success
}

// verdictStyle colours a key's verdict by what its rows say happened.
func (v *Keys) verdictStyle(kv *model.KeyView) lipgloss.Style {
	s := v.ctx.Styles
	switch kv.VerdictKind {
	case model.VerdictExecutedOnce:
		return s.Success
	case model.VerdictExpired, model.VerdictRanAgainAfterExpiry, model.VerdictLegacy:
		return s.Warning
	}
	return s.Danger
}

// layoutHead lays out the lines above the panes: first the verdict — what the key's rows say
// happened and what a retry gets (issue 22) — wrapped to at most three lines, then the key, its
// state and expiry, and the operation.
func (v *Keys) layoutHead() {
	s := v.ctx.Styles
	d := v.detail
	kv := d.view
	now := v.ctx.Now()
	expiry := "expires " + ago(now, kv.ExpiresAt) + " (" + kv.ExpiresAt.Local().Format("2006-01-02 15:04:05") + ")"
	if kv.Expired {
		// Expiry is the runner's verdict, by its clock: the same one a request meets.
		expiry = "EXPIRED at " + kv.ExpiresAt.Local().Format("2006-01-02 15:04:05") + ": a retry executes anew"
	}
	vs := v.verdictStyle(kv)
	var head []string
	// At most three lines (four on a narrow screen, where a sentence needs more of them).
	most := 3
	if v.w < 96 {
		most = 4
	}
	verdict := strings.Split(ansi.Wrap(safe(kv.Verdict), v.w, " "), "\n")
	if len(verdict) > most {
		verdict = append(verdict[:most-1], termsafe.Cut(strings.Join(verdict[most-1:], " "), v.w))
	}
	for _, l := range verdict {
		head = append(head, vs.Render(l))
	}
	head = append(head,
		termsafe.Cut(s.Title.Render("key "+safe(kv.Key))+s.Subtle.Render(" · ")+v.stateStyle(kv).Render(kv.State)+s.Subtle.Render(" · "+expiry), v.w),
		termsafe.Cut(s.Subtle.Render("operation ")+safe(kv.Operation)+s.Subtle.Render(" · "+asOf(d.at)+" (r reads again · x exports)"), v.w))
	// A replayable key says how the replay relates to the record now.
	if kv.State == model.KeySucceeded {
		head = append(head, v.stateStyle(kv).Render(termsafe.Cut(Drift(kv), v.w)))
	}
	d.head = head
}

func historyPaneHeight(h int) int {
	if h < 30 {
		return 5
	}
	return 9
}

// sizePanes gives each pane its size for the width: three panes side by side from 96 columns,
// else the envelope (on one wrapped line) above the other two.
func (v *Keys) sizePanes() {
	d := v.detail
	if narrow := v.w < 96; narrow != d.envNarrowShown || d.panes[paneEnvelope].title == "" {
		d.envNarrowShown = narrow
		lines := d.envWide
		if narrow {
			lines = d.envNarrow
		}
		d.panes[paneEnvelope].SetContent(d.envTitle, lines, d.envRaw)
	}
	histH := historyPaneHeight(v.h)
	bodyH := max(5, v.h-len(d.head)-histH)
	if v.w >= 96 {
		left := v.w
		for i := 0; i < 3; i++ {
			cw := left / (3 - i)
			left -= cw
			d.panes[i].SetSize(cw, bodyH)
		}
	} else {
		envH := 6
		d.panes[paneEnvelope].SetSize(v.w, envH)
		rest := max(4, bodyH-envH)
		d.panes[paneReplay].SetSize(v.w/2, rest)
		d.panes[paneLatest].SetSize(v.w-v.w/2, rest)
	}
	d.panes[paneHistory].SetSize(v.w, histH)
}

// fillDetail builds every pane's content once, when the key arrives.
func (v *Keys) fillDetail() {
	s := v.ctx.Styles
	d := v.detail
	kv := d.view
	paint := newJSONPainter(s)
	v.layoutHead()

	// Envelope: the stored bytes, whatever they are.
	envTitle, envLines, envRaw := "Envelope (stored)", paint.lines(kv.Envelope), indentJSON(kv.Envelope)
	switch {
	case kv.Envelope == nil:
		envTitle, envLines, envRaw = "Envelope: NULL", []string{s.Danger.Render("NULL — a PROCESSING row holds no result")}, "null"
	case kv.Legacy:
		envTitle = "Envelope (LEGACY raw-json-v1)"
	case kv.RestoreError != nil:
		envTitle = "Envelope (stored; fails closed)"
	}
	fp := s.Subtle.Render("fingerprint " + safe(kv.Fingerprint))
	d.envTitle, d.envRaw = envTitle, envRaw
	d.envWide = append(envLines, fp)
	d.envNarrow = []string{fp}
	if kv.Envelope != nil {
		d.envNarrow = []string{safe(compactJSON(kv.Envelope)), fp}
	} else {
		d.envNarrow = append(envLines, fp)
	}
	d.panes[paneEnvelope].title = ""

	// What a client gets back for a retry of the key: the response the server builds for it.
	title, lines, raw := v.replayPane(kv)
	d.panes[paneReplay].SetContent(title, lines, raw)

	// The latest record and the drift.
	none := "null: the record it names does not exist"
	if strings.HasSuffix(kv.Operation, ":record:create") && kv.Restored.Record == nil {
		none = "none: a create names its record only in its result, and there is none to read"
	}
	drift := v.stateStyle(kv).Render(Drift(kv))
	if l := kv.Latest.Record; l != nil {
		b, _ := json.Marshal(l)
		d.panes[paneLatest].SetJSON(fmt.Sprintf("Latest (rev %d)", l.Revision), newJSONDoc(paint, b, []string{drift}, nil), indentJSON(b))
	} else {
		d.panes[paneLatest].SetContent("Latest record", []string{drift, s.Subtle.Render(none)}, "null")
	}

	// The key's rows, life by life.
	var hist []string
	var copyText strings.Builder
	n := 0
	for _, life := range kv.Lives {
		label := s.Bold.Render(safe(life.Label))
		if !life.Current {
			label = s.Warning.Render(safe(life.Label))
		}
		hist = append(hist, label)
		copyText.WriteString(life.Label + "\n")
		for _, e := range life.Events {
			line := fmt.Sprintf("  %s  %-9s %s", stamp(e.At), e.Kind, e.Summary())
			hist = append(hist, safe(line))
			copyText.WriteString(line + "\n")
			n++
		}
	}
	title = fmt.Sprintf("Rows of this key by transaction: %d row(s), current life", n)
	if others := len(kv.Lives) - 1; others > 0 {
		title += fmt.Sprintf(" + %d other", others)
	}
	d.panes[paneHistory].SetContent(title, hist, copyText.String())
	v.sizePanes()
}

// replayPane is the replay pane's title, lines and copy: the response a retry of the key gets
// (model.KeyView.Replay, built by the code that serves writes) — the status line, the headers
// and the body's exact bytes, wrapped but not re-rendered — or why there is none.
func (v *Keys) replayPane(kv *model.KeyView) (string, []string, string) {
	s := v.ctx.Styles
	r := kv.Replay
	if r == nil {
		title := "Replay: none"
		if kv.State == model.KeyExpired {
			title = "EXPIRED · no replay"
		}
		return title, []string{safe(kv.Next)}, kv.Next
	}
	title := fmt.Sprintf("Replay → %d", r.Status)
	st := s.Success
	switch {
	case r.Status >= 500:
		title, st = fmt.Sprintf("Replay → %d fails closed", r.Status), s.Danger
	case r.Status >= 400:
		st = s.Danger
	}
	lines := []string{st.Render(r.StatusLine())}
	for _, name := range r.HeaderNames() {
		lines = append(lines, s.Subtle.Render(name+":")+" "+safe(r.Headers[name]))
	}
	// The body as the CLI prints it: the bytes sent, indented (json.Indent moves no byte but
	// whitespace, so the keys keep their order and every value its spelling).
	var body bytes.Buffer
	if err := json.Indent(&body, []byte(r.Body), "", "  "); err != nil {
		body.Reset()
		body.WriteString(r.Body)
	}
	lines = append(lines, "")
	for _, l := range strings.Split(strings.TrimSuffix(body.String(), "\n"), "\n") {
		lines = append(lines, safe(l))
	}
	lines = append(lines, "", s.Subtle.Render(fmt.Sprintf("%d bytes on the wire (shown indented, as the CLI prints it; it exits %d)", len(r.Body), r.ExitCode)))
	if kv.State == model.KeyFailsClosed {
		lines = append(lines, s.Subtle.Render("the stored envelope is beside this pane; nothing is restored from it"))
	}
	return title, lines, r.Text()
}

// View renders the view.
func (v *Keys) View() string {
	s := v.ctx.Styles
	if v.detail != nil {
		return v.viewDetail()
	}
	head := v.list.heading(v.ctx, s.Title.Render("Idempotency keys")+s.Subtle.Render(fmt.Sprintf(" of %s · %s", safe(v.ctx.Owner), v.list.summary())), v.w)
	return fitBlock(head+"\n"+v.list.table.View(s, true), v.w, v.h)
}

func (v *Keys) viewDetail() string {
	s := v.ctx.Styles
	d := v.detail
	if d.err != "" {
		return s.Danger.Render(termsafe.Cut(d.err, v.w)) + "\n" + s.Subtle.Render("esc: back · r: retry")
	}
	if d.view == nil {
		return s.Subtle.Render(termsafe.Cut("loading key "+safe(d.key)+"…", v.w))
	}
	p := &d.panes
	var body string
	if v.w >= 96 {
		body = joinH(p[paneEnvelope].View(s, d.focus == paneEnvelope), p[paneReplay].View(s, d.focus == paneReplay), p[paneLatest].View(s, d.focus == paneLatest))
	} else {
		body = p[paneEnvelope].View(s, d.focus == paneEnvelope) + "\n" + joinH(p[paneReplay].View(s, d.focus == paneReplay), p[paneLatest].View(s, d.focus == paneLatest))
	}
	return strings.Join(d.head, "\n") + "\n" + body + "\n" + p[paneHistory].View(s, d.focus == paneHistory)
}

// ShortHelp is the footer help.
func (v *Keys) ShortHelp() []key.Binding {
	if v.detail != nil {
		return []key.Binding{v.ctx.Keys.List.Back, v.ctx.Keys.Pane.Left, v.ctx.Keys.Pane.Right, v.ctx.Keys.List.Open, v.ctx.Keys.Keys.Export, v.ctx.Keys.Global.Copy}
	}
	if v.list.query != "" {
		return []key.Binding{v.ctx.Keys.List.Open, v.ctx.Keys.List.ClearSearch, v.ctx.Keys.List.Refresh, v.ctx.Keys.Global.Copy}
	}
	return []key.Binding{v.ctx.Keys.List.Open, v.ctx.Keys.List.Refresh, v.ctx.Keys.Global.Copy}
}

// FullHelp is the ? help: every key that acts in what the view shows now.
func (v *Keys) FullHelp() [][]key.Binding {
	k := v.ctx.Keys
	nav := []key.Binding{k.List.Up, k.List.Down, k.List.PgUp, k.List.PgDown, k.List.Top, k.List.Bottom}
	if v.detail != nil {
		return [][]key.Binding{{k.List.Back, k.List.Refresh, k.List.Open, k.Keys.Export, k.Global.Copy, k.Pane.Left, k.Pane.Right}, append(nav, k.Pane.Page)}
	}
	return [][]key.Binding{nav, {k.List.Open, k.List.Refresh, k.Global.Copy}}
}

// Capturing is false.
func (v *Keys) Capturing() bool { return false }

// Search lists the owner's keys starting with q.
func (v *Keys) Search(q string) tea.Cmd { v.detail = nil; return v.list.search(v.ctx, q) }

// SearchHint says what a search matches.
func (v *Keys) SearchHint() string { return "key prefix (listed A→Z)" }

// Query is the active search.
func (v *Keys) Query() string { return v.list.query }

// Selection is the selected key, or in a key's detail the focused pane's content.
func (v *Keys) Selection() string {
	if v.detail != nil {
		if v.detail.view != nil {
			return v.detail.panes[v.detail.focus].Copy()
		}
		return v.detail.key
	}
	if r := v.list.selected(); r != nil {
		return r.Key
	}
	return ""
}

// FocusedPane names the focused pane of an open key ("" in the list), for tests and the status.
func (v *Keys) FocusedPane() string {
	if v.detail == nil || v.detail.view == nil {
		return ""
	}
	return v.detail.panes[v.detail.focus].title
}

// keyExportMsg reports where a key's export went.
type keyExportMsg struct {
	key, path string
	err       error
}

// exportKey writes an open key's story (internal/ticket: the verdict, the envelope, what a retry
// gets, the key's rows) as Markdown to a new file in dir, off the Update goroutine.
func exportKey(kv model.KeyView, meta ticket.Meta, dir string, now time.Time) tea.Cmd {
	return func() tea.Msg {
		base := fmt.Sprintf("idemwork-key-%s-%s-%s", fileSafe(meta.Owner), fileSafe(kv.Key), now.Format("20060102-150405"))
		f, err := exportFile(dir, base, "md")
		if err != nil {
			return keyExportMsg{key: kv.Key, err: fmt.Errorf("create the export file: %w", err)}
		}
		path, _ := filepath.Abs(f.Name())
		err = ticket.Markdown(f, kv, meta)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return keyExportMsg{key: kv.Key, path: path, err: err}
	}
}

// fileSafe is s as part of a file name: letters, digits, '.', '_' and '-' kept, anything else
// '_', at most 48 bytes.
func fileSafe(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 48 {
		b = b[:48]
	}
	return strings.TrimLeft(string(b), ".")
}
