package views

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
)

// Records lists the owner's records (keyset pages, module filter, / searching titles and ids in
// the database) and opens one record: its revisions, the snapshot of any revision, a JSON diff
// between any two (the base marked), and its executions and audit events. A record's snapshots
// are read when shown, not with the list: a record of 200 revisions of 60 KB opens at once.
type Records struct {
	ctx    *uictx.ProgramContext
	src    RecordReader
	w, h   int
	list   paged[model.Record]
	module string // "" = all
	req    int    // detail and snapshot requests

	detail *recordDetail
}

// RecordReader is what the Records view reads: pages of records, a record's outline (the heads
// of its revisions, its executions and audit events) and one revision's snapshot.
type RecordReader interface {
	Records(ctx context.Context, q model.RecordQuery) ([]model.Record, string, error)
	// RecordModule finds the module of a record known by id alone (a jump).
	RecordModule(ctx context.Context, owner, id string) (string, error)
	RecordOutline(ctx context.Context, owner, module, id string) (model.RecordOutline, error)
	GetRevision(ctx context.Context, owner, recordID string, revision int) (model.Revision, error)
}

// Record detail modes.
const (
	modeSnapshot = iota
	modeDiff
	modeHistory
)

// snapCache is how many snapshots an open record keeps.
const snapCache = 16

type recordDetail struct {
	req    int
	module string
	id     string
	data   *model.RecordOutline
	at     time.Time // when data was read (the workbench clock)
	err    string
	revs   Table
	mode   int
	// base is the revision marked as the diff's base (0: the one before the selected).
	base int
	// focus is 0 for the revision list, 1 for the content pane (modes snapshot and diff).
	focus   int
	content scrollPane
	history Table
	// histKeys holds each history row's key and execution id, for enter and K.
	histKeys []*string

	snaps   map[int]json.RawMessage
	docs    map[int]*jsonDoc
	order   []int  // snapshot cache order, oldest first
	pending string // what the content pane waits for ("" none)
	shown   string // what the content pane shows, so an unchanged selection recomputes nothing
	snapReq int
	diff    []Change // the diff shown (for tests)
}

var modulesCycle = []string{"", "NOTE", "MEM-001", "COMMITMENT"}

// recordQuery reads a Records search: a title substring, or "id:" and a record id prefix.
func recordQuery(module, q string) model.RecordQuery {
	field, v := searchField(q, "title", "title", "id")
	if field == "id" {
		return model.RecordQuery{Module: module, IDPrefix: v}
	}
	return model.RecordQuery{Module: module, TitleContains: v}
}

// NewRecords returns the Records view, reading through src.
func NewRecords(ctx *uictx.ProgramContext, src RecordReader) *Records {
	v := &Records{ctx: ctx, src: src}
	v.list.table.Columns = []Column{{Title: "MODULE", Width: 10}, {Title: "ID", Width: 12}, {Title: "REV", Width: 4}, {Title: "TITLE", Min: 10}, {Title: "UPDATED", Width: 14}}
	v.list.toRow = func(r model.Record) Row {
		return Row{Cells: []string{r.ModuleCode, shortID(r.ID, 12), strconv.Itoa(r.Revision), r.Title, ago(ctx.Now(), r.UpdatedAt)}}
	}
	v.list.describe = func(q string) string {
		r := recordQuery("", q)
		if r.IDPrefix != "" {
			return "id starts with " + termsafe.Quote(strings.ToUpper(r.IDPrefix)) + " (newest first)"
		}
		return "title contains " + termsafe.Quote(r.TitleContains)
	}
	v.list.id = func(r model.Record) string { return r.ID }
	v.setModule("")
	return v
}

// Title names the view in the navigator.
func (v *Records) Title() string { return "Records" }

// Init loads the first page.
func (v *Records) Init() tea.Cmd { return v.reload() }

type recordDetailMsg struct {
	req  int
	data model.RecordOutline
	at   time.Time
	err  error
}

type snapshotsMsg struct {
	req   int
	snaps map[int]json.RawMessage
	// docs are the snapshots painted for the content pane's width, off the Update goroutine.
	docs map[int]*jsonDoc
	err  error
}

// setModule changes the module filter; the fetch captures it so a running query never reads
// the view's fields from another goroutine.
func (v *Records) setModule(module string) {
	v.module = module
	src := v.src
	v.list.fetch = func(ctx context.Context, owner, query, cursor string, _ bool) ([]model.Record, string, error) {
		q := recordQuery(module, query)
		q.Owner, q.Limit, q.Cursor = owner, pageSize, cursor
		return src.Records(ctx, q)
	}
}

func (v *Records) reload() tea.Cmd { return v.list.reload(v.ctx) }

func (v *Records) openDetail(module, id string) tea.Cmd {
	d := &recordDetail{module: module, id: id, snaps: map[int]json.RawMessage{}, docs: map[int]*jsonDoc{}}
	d.revs.Columns = []Column{{Title: "REV", Width: 4}, {Title: "WHEN", Min: 11}, {Title: "DISK", Width: 5}, {Title: "B", Width: 1}}
	d.history.Columns = []Column{{Title: "WHEN", Width: 14}, {Title: "WHAT", Min: 16}, {Title: "KEY", Width: 12}}
	v.detail = d
	v.SetSize(v.w, v.h)
	return v.loadDetail()
}

func (v *Records) loadDetail() tea.Cmd {
	d := v.detail
	v.req++
	d.req = v.req
	req, db, owner, at := d.req, v.src, v.ctx.Owner, v.ctx.Now()
	module, id := d.module, d.id
	return query(func(ctx context.Context) tea.Msg {
		if module == "" {
			// A jump by id alone: find the record's module first.
			m, err := db.RecordModule(ctx, owner, id)
			if err != nil {
				return recordDetailMsg{req: req, err: err}
			}
			module = m
		}
		data, err := db.RecordOutline(ctx, owner, module, id)
		return recordDetailMsg{req: req, data: data, at: at, err: err}
	})
}

// InDetail reports whether a record is open (its digits choose panes, not views).
func (v *Records) InDetail() bool { return v.detail != nil }

// OpenRecord shows a record's detail (used by jumps).
func (v *Records) OpenRecord(module, id string) tea.Cmd { return v.openDetail(module, id) }

// Update handles messages.
func (v *Records) Update(msg tea.Msg) tea.Cmd {
	if v.list.handle(msg) {
		return nil
	}
	switch msg := msg.(type) {
	case recordDetailMsg:
		if v.detail == nil || msg.req != v.detail.req {
			return nil
		}
		if msg.err != nil {
			v.detail.err = errText(msg.err)
			return nil
		}
		v.detail.err = ""
		v.detail.data, v.detail.at = &msg.data, msg.at
		v.detail.module = msg.data.Record.ModuleCode
		v.fillDetail()
		return v.showSelection()
	case snapshotsMsg:
		d := v.detail
		if d == nil || msg.req != d.snapReq {
			return nil
		}
		if msg.err != nil {
			d.content.SetContent("Revision", []string{v.ctx.Styles.Danger.Render(errText(msg.err))}, "")
			d.pending = ""
			return nil
		}
		for rev, s := range msg.snaps {
			d.keep(rev, s)
			d.docs[rev] = msg.docs[rev]
		}
		d.pending = ""
		return v.showSelection()
	case TickMsg:
		v.list.refill()
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
		if d := v.detail; d != nil {
			switch {
			case d.mode == modeHistory:
				wheelTable(&d.history, msg, msg.Y-4)
			case msg.X < v.revsWidth():
				wheelTable(&d.revs, msg, msg.Y-4)
				return v.showSelection()
			default:
				d.content.Wheel(msg)
			}
			return nil
		}
		return v.list.mouse(v.ctx, msg, msg.Y-1)
	case tea.KeyMsg:
		if v.detail != nil {
			return v.updateDetail(msg)
		}
		return v.updateList(msg)
	}
	return nil
}

func (v *Records) updateList(msg tea.KeyMsg) tea.Cmd {
	if ok, cmd := v.list.keyNav(v.ctx, msg, v.list.table.BodyHeight()); ok {
		return cmd
	}
	sel := v.list.selected()
	switch {
	case key.Matches(msg, v.ctx.Keys.List.Open):
		if sel != nil {
			return v.openDetail(sel.ModuleCode, sel.ID)
		}
	case key.Matches(msg, v.ctx.Keys.Records.Module):
		for i, m := range modulesCycle {
			if m == v.module {
				v.setModule(modulesCycle[(i+1)%len(modulesCycle)])
				break
			}
		}
		return v.reload()
	case key.Matches(msg, v.ctx.Keys.List.Refresh):
		return v.reload()
	case key.Matches(msg, v.ctx.Keys.List.ClearSearch) && v.list.query != "":
		return v.list.search(v.ctx, "")
	case key.Matches(msg, v.ctx.Keys.Records.Create):
		module := v.module
		if module == "" {
			module = "NOTE"
		}
		return func() tea.Msg { return uictx.OpenFormMsg{Kind: "create", Module: module} }
	case key.Matches(msg, v.ctx.Keys.Records.Patch), key.Matches(msg, v.ctx.Keys.Records.Action), key.Matches(msg, v.ctx.Keys.Records.Storm):
		if sel == nil {
			return status("select a record first", true)
		}
		return recordAction(v.ctx.Keys.Records, msg, sel.ModuleCode, sel.ID, sel.Revision)
	}
	return nil
}

func recordAction(k uictx.RecordsKeys, msg tea.KeyMsg, module, id string, revision int) tea.Cmd {
	switch {
	case key.Matches(msg, k.Patch):
		return func() tea.Msg {
			return uictx.OpenFormMsg{Kind: "patch", Module: module, RecordID: id, Revision: revision}
		}
	case key.Matches(msg, k.Action):
		return func() tea.Msg {
			return uictx.OpenFormMsg{Kind: "action", Module: module, RecordID: id, Revision: revision}
		}
	case key.Matches(msg, k.Storm):
		return func() tea.Msg { return uictx.OpenStormMsg{Module: module, RecordID: id, Revision: revision} }
	}
	return nil
}

func (v *Records) updateDetail(msg tea.KeyMsg) tea.Cmd {
	d := v.detail
	switch {
	case key.Matches(msg, v.ctx.Keys.List.Back):
		v.detail = nil
		return nil
	case key.Matches(msg, v.ctx.Keys.Records.Snapshot):
		d.mode = modeSnapshot
		return v.showSelection()
	case key.Matches(msg, v.ctx.Keys.Records.Diff):
		d.mode = modeDiff
		return v.showSelection()
	case key.Matches(msg, v.ctx.Keys.Records.History):
		d.mode = modeHistory
		return nil
	case key.Matches(msg, v.ctx.Keys.List.Refresh):
		return v.loadDetail()
	case key.Matches(msg, v.ctx.Keys.Records.Patch), key.Matches(msg, v.ctx.Keys.Records.Action), key.Matches(msg, v.ctx.Keys.Records.Storm):
		if d.data != nil {
			r := d.data.Record
			return recordAction(v.ctx.Keys.Records, msg, r.ModuleCode, r.ID, r.Revision)
		}
		return nil
	}
	if d.mode == modeHistory {
		if moveTable(v.ctx.Keys.List, &d.history, msg, d.history.BodyHeight()) {
			return nil
		}
		if key.Matches(msg, v.ctx.Keys.List.Open) || key.Matches(msg, v.ctx.Keys.List.ToKey) {
			i := d.history.Selected()
			if i >= 0 && i < len(d.histKeys) && d.histKeys[i] != nil {
				return jump(uictx.JumpKey, "", *d.histKeys[i])
			}
			return status("this row carries no idempotency key", true)
		}
		return nil
	}
	switch {
	case key.Matches(msg, v.ctx.Keys.Pane.Left):
		d.focus = 0
		return nil
	case key.Matches(msg, v.ctx.Keys.Pane.Right):
		d.focus = 1
		return nil
	}
	if d.focus == 1 {
		d.content.Scroll(&v.ctx.Keys, msg)
		return nil
	}
	if key.Matches(msg, v.ctx.Keys.Records.Mark) {
		if r := d.selectedRev(); r > 0 {
			if d.base == r {
				d.base = 0
			} else {
				d.base = r
			}
			d.mode = modeDiff
			v.fillRevs()
			return v.showSelection()
		}
		return nil
	}
	if moveTable(v.ctx.Keys.List, &d.revs, msg, d.revs.BodyHeight()) {
		return v.showSelection()
	}
	return nil
}

// selectedRev is the selected revision number (0 none).
func (d *recordDetail) selectedRev() int {
	i := d.revs.Selected()
	if d.data == nil || i < 0 || i >= len(d.data.Revisions) {
		return 0
	}
	return d.data.Revisions[i].Revision
}

// baseRev is the revision the diff starts from: the marked base, else the one before the
// selected (0 when there is none).
func (d *recordDetail) baseRev() int {
	if d.base > 0 {
		return d.base
	}
	i := d.revs.Selected()
	if i <= 0 || d.data == nil {
		return 0
	}
	return d.data.Revisions[i-1].Revision
}

func (d *recordDetail) keep(rev int, s json.RawMessage) {
	if _, ok := d.snaps[rev]; !ok {
		d.order = append(d.order, rev)
	}
	d.snaps[rev] = s
	for len(d.order) > snapCache {
		old := d.order[0]
		d.order = d.order[1:]
		delete(d.snaps, old)
		delete(d.docs, old)
	}
}

// showSelection makes the content pane show the selected revision's snapshot or its diff from
// the base: from the cache when it holds the snapshots, else after reading them. The content
// is computed here, once per selection, never in View.
func (v *Records) showSelection() tea.Cmd {
	d := v.detail
	if d == nil || d.data == nil || d.mode == modeHistory {
		return nil
	}
	s := v.ctx.Styles
	sel, base := d.selectedRev(), d.baseRev()
	if sel == 0 {
		d.content.SetContent("Revisions", []string{s.Subtle.Render("no revisions")}, "")
		return nil
	}
	need := []int{sel}
	if d.mode == modeDiff && base > 0 && base != sel {
		need = append(need, base)
	}
	var missing []int
	for _, r := range need {
		if _, ok := d.snaps[r]; !ok {
			missing = append(missing, r)
		}
	}
	want := fmt.Sprintf("%d:%d:%d", d.mode, sel, base)
	if len(missing) > 0 {
		if d.pending == want {
			return nil
		}
		d.pending = want
		d.content.SetContent(fmt.Sprintf("Revision %d", sel), []string{s.Subtle.Render(fmt.Sprintf("reading revision %d…", sel))}, "")
		d.shown = ""
		v.req++
		d.snapReq = v.req
		req, db, owner, id := v.req, v.src, v.ctx.Owner, d.id
		painter, width := newJSONPainter(s), d.content.InnerWidth()
		return query(func(ctx context.Context) tea.Msg {
			out, docs := map[int]json.RawMessage{}, map[int]*jsonDoc{}
			for _, r := range missing {
				rev, err := db.GetRevision(ctx, owner, id, r)
				if err != nil {
					return snapshotsMsg{req: req, err: err}
				}
				out[r] = rev.Snapshot
				// Decoding and painting 60 KB is the slow part: done here, the pane only shows it.
				docs[r] = newJSONDoc(painter, rev.Snapshot, nil, nil)
				docs[r].render(width)
			}
			return snapshotsMsg{req: req, snaps: out, docs: docs}
		})
	}
	if d.shown == want {
		return nil
	}
	d.shown = want
	if d.mode == modeSnapshot {
		doc, ok := d.docs[sel]
		if !ok {
			doc = newJSONDoc(newJSONPainter(s), d.snaps[sel], nil, nil)
			d.docs[sel] = doc
		}
		head := d.data.Revisions[d.revs.Selected()]
		d.content.SetJSON(fmt.Sprintf("Snapshot rev %d · %s (%s on disk)", sel, size(len(d.snaps[sel])), size(head.Bytes)), doc, indentJSON(d.snaps[sel]))
		return nil
	}
	if base == 0 || base == sel {
		d.diff = nil
		d.content.SetContent("Diff", []string{s.Subtle.Render(fmt.Sprintf("revision %d has nothing to compare with: select a later revision, or mark a base with space", sel))}, "")
		return nil
	}
	d.diff = JSONDiff(d.snaps[base], d.snaps[sel])
	lines, text := v.diffLines(d.diff)
	marked := "the marked base"
	if d.base == 0 {
		marked = "base: the revision before"
	}
	d.content.SetContent(fmt.Sprintf("Diff rev %d (%s) → rev %d", base, marked, sel), lines, text)
	return nil
}

// diffLines renders a JSON diff: a count, then one line per changed path (long strings with
// their edit below).
func (v *Records) diffLines(changes []Change) ([]string, string) {
	s := v.ctx.Styles
	if len(changes) == 0 {
		return []string{s.Subtle.Render("(identical)")}, "(identical)"
	}
	counts := map[byte]int{}
	for _, c := range changes {
		counts[c.Kind]++
	}
	summary := fmt.Sprintf("%d changed path(s): %d added, %d removed, %d changed", len(changes), counts[Added], counts[Removed], counts[Changed])
	lines := []string{s.Subtle.Render(summary)}
	var text strings.Builder
	text.WriteString(summary + "\n")
	for _, c := range changes {
		var line string
		st := s.Warning
		switch c.Kind {
		case Added:
			line, st = fmt.Sprintf("+ %s: %s", c.Path, c.New), s.Success
		case Removed:
			line, st = fmt.Sprintf("- %s: %s", c.Path, c.Old), s.Danger
		default:
			line = fmt.Sprintf("~ %s: %s → %s", c.Path, c.Old, c.New)
			if c.Text != nil {
				line = fmt.Sprintf("~ %s: the text changed:", c.Path)
			}
		}
		lines = append(lines, st.Render(line))
		text.WriteString(line + "\n")
		for _, t := range c.Text {
			lines = append(lines, s.Subtle.Render("    "+t))
			text.WriteString("    " + t + "\n")
		}
	}
	return lines, text.String()
}

func size(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func shortSize(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dK", n>>10)
	}
	return strconv.Itoa(n)
}

// fillRevs rebuilds the revision rows (the base mark moves).
func (v *Records) fillRevs() {
	d := v.detail
	cur := d.revs.Cursor
	rows := make([]Row, len(d.data.Revisions))
	for i, r := range d.data.Revisions {
		mark := ""
		if r.Revision == d.base {
			mark = "◆"
		}
		rows[i] = Row{Cells: []string{strconv.Itoa(r.Revision), r.CreatedAt.Local().Format("01-02 15:04"), shortSize(r.Bytes), mark}}
	}
	d.revs.SetRows(rows)
	d.revs.Cursor = cur
	d.revs.Move(0)
}

func (v *Records) fillDetail() {
	d := v.detail
	v.fillRevs()
	d.revs.Bottom()
	var hist []Row
	d.histKeys = nil
	keyW := 12
	for _, e := range d.data.Executions {
		row := Row{Cells: []string{stamp(e.CreatedAt), fmt.Sprintf("%s %s %s → rev %d", e.FeatureID, e.Mode, e.Status, e.RecordRevision), deref(e.IdempotencyKey)}}
		if e.Status == "BLOCKED" {
			st := v.ctx.Styles.Warning
			row.Style = &st
		}
		hist = append(hist, row)
		d.histKeys = append(d.histKeys, e.IdempotencyKey)
		keyW = max(keyW, len(deref(e.IdempotencyKey)))
	}
	for _, a := range d.data.Audit {
		hist = append(hist, Row{Cells: []string{stamp(a.At), fmt.Sprintf("%s rev %s", a.Action, derefInt(a.Revision)), deref(a.IdempotencyKey)}})
		d.histKeys = append(d.histKeys, a.IdempotencyKey)
		keyW = max(keyW, len(deref(a.IdempotencyKey)))
	}
	// Keys are shown whole when the width allows: they are what support staff look for.
	d.history.Columns[2].Width = min(keyW, 48)
	d.history.SetRows(hist)
	v.SetSize(v.w, v.h)
}

func (v *Records) revsWidth() int {
	if v.w >= 100 {
		return 32
	}
	return 30
}

// SetSize sets the drawing area.
func (v *Records) SetSize(w, h int) {
	v.w, v.h = w, h
	v.list.table.SetSize(w, h-1)
	if d := v.detail; d != nil {
		bodyH := h - 2
		rw := v.revsWidth()
		// Inside a pane: two border lines and the title line.
		d.revs.SetSize(rw-4, bodyH-3)
		d.history.SetSize(w-4, bodyH-3)
		d.content.SetSize(w-rw, bodyH)
	}
}

// View renders the view.
func (v *Records) View() string {
	s := v.ctx.Styles
	if v.detail != nil {
		return v.viewDetail()
	}
	mod := v.module
	if mod == "" {
		mod = "all modules"
	}
	head := v.list.heading(v.ctx, s.Title.Render("Records")+s.Subtle.Render(fmt.Sprintf(" of %s · %s · %s · m: module", safe(v.ctx.Owner), mod, v.list.summary())), v.w)
	return fitBlock(head+"\n"+v.list.table.View(s, true), v.w, v.h)
}

func (v *Records) viewDetail() string {
	s := v.ctx.Styles
	d := v.detail
	if d.err != "" {
		return s.Danger.Render(termsafe.Cut(d.err, v.w)) + "\n" + s.Subtle.Render("esc: back · r: retry")
	}
	if d.data == nil {
		return s.Subtle.Render(termsafe.Cut("loading record "+safe(d.id)+"…", v.w))
	}
	r := d.data.Record
	head := s.Title.Render(safe(r.ModuleCode)+" "+safe(r.ID)) + s.Subtle.Render(fmt.Sprintf(" · revision %d · ", r.Revision)) + termsafe.Quote(r.Title)
	// A list at the detail's cap holds the newest only, and says so.
	count := func(n int, one, many string) string {
		if n >= model.DetailCap {
			return plural(n, one, many) + " (the newest)"
		}
		return plural(n, one, many)
	}
	sub := s.Subtle.Render(fmt.Sprintf("%s · %s · %s %s · 1 snapshot 2 diff 3 history · ←/→ pane · space marks the diff base",
		count(len(d.data.Revisions), "revision", "revisions"), count(len(d.data.Executions), "execution", "executions"),
		count(len(d.data.Audit), "audit event", "audit events"), asOf(d.at)))
	bodyH := v.h - 2
	if d.mode == modeHistory {
		body := paneFrame(s, s.PaneTitle.Render("▸ Executions and audit events of this record (enter/K: open its key)")+"\n"+d.history.View(s, true), v.w, bodyH, true)
		return termsafe.Cut(head, v.w) + "\n" + termsafe.Cut(sub, v.w) + "\n" + body
	}
	rw := v.revsWidth()
	title := "Revisions"
	if d.base > 0 {
		title = fmt.Sprintf("Revisions · base ◆ %d", d.base)
	}
	if d.focus == 0 {
		title = "▸ " + title
	}
	left := paneFrame(s, s.PaneTitle.Render(termsafe.Cut(title, rw-4))+"\n"+d.revs.View(s, d.focus == 0), rw, bodyH, d.focus == 0)
	right := d.content.View(s, d.focus == 1)
	return termsafe.Cut(head, v.w) + "\n" + termsafe.Cut(sub, v.w) + "\n" + joinH(left, right)
}

// writeKeys are the keys that write from Records: none on a read-only session, whose footer
// and help do not offer what it refuses.
func (v *Records) writeKeys(create bool) []key.Binding {
	if v.ctx.ReadOnly() {
		return nil
	}
	k := v.ctx.Keys.Records
	if create {
		return []key.Binding{k.Create, k.Patch, k.Action, k.Storm}
	}
	return []key.Binding{k.Patch, k.Action, k.Storm}
}

// ShortHelp is the footer help.
func (v *Records) ShortHelp() []key.Binding {
	k := v.ctx.Keys
	if v.detail != nil {
		return append([]key.Binding{k.List.Back, k.Records.Snapshot, k.Records.Diff, k.Records.History, k.Pane.Right, k.Records.Mark}, v.writeKeys(false)...)
	}
	out := []key.Binding{k.List.Open, k.Records.Module}
	if v.list.query != "" {
		out = append(out, k.List.ClearSearch)
	}
	out = append(out, v.writeKeys(true)...)
	return append(out, k.List.Refresh)
}

// FullHelp is the ? help: every key that acts in what the view shows now.
func (v *Records) FullHelp() [][]key.Binding {
	k := v.ctx.Keys
	nav := []key.Binding{k.List.Up, k.List.Down, k.List.PgUp, k.List.PgDown, k.List.Top, k.List.Bottom}
	d := v.detail
	if d == nil {
		out := [][]key.Binding{nav, {k.List.Open, k.Records.Module, k.List.Refresh, k.Global.Copy}}
		if v.list.query != "" {
			out[1] = append(out[1], k.List.ClearSearch)
		}
		if w := v.writeKeys(true); w != nil {
			out = append(out, w)
		}
		return out
	}
	// An open record: its panes, and the keys of the one that has the focus.
	switch {
	case d.mode == modeHistory:
		nav = append(nav, k.List.Open, k.List.ToKey)
	case d.focus == 1:
		nav = append(nav, k.Pane.Page)
	default:
		nav = append(nav, k.Records.Mark)
	}
	out := [][]key.Binding{{k.List.Back, k.List.Refresh, k.Global.Copy, k.Records.Snapshot, k.Records.Diff, k.Records.History, k.Pane.Left, k.Pane.Right}}
	if w := v.writeKeys(false); w != nil {
		out = append(out, w)
	}
	return append(out, nav)
}

// Capturing is false: this view has no text fields.
func (v *Records) Capturing() bool { return false }

// Search lists the owner's records whose title contains q (or, for "id:P", whose id starts
// with P).
func (v *Records) Search(q string) tea.Cmd { v.detail = nil; return v.list.search(v.ctx, q) }

// SearchHint says what a search matches.
func (v *Records) SearchHint() string { return "title contains, or id:ULID-PREFIX" }

// Query is the active search.
func (v *Records) Query() string { return v.list.query }

// Selection is the selected record id; in a record, the focused pane's content (the selected
// revision's snapshot, the diff) or the selected history row's key.
func (v *Records) Selection() string {
	d := v.detail
	if d != nil && d.data != nil {
		switch {
		case d.mode == modeHistory:
			if i := d.history.Selected(); i >= 0 && i < len(d.histKeys) && d.histKeys[i] != nil {
				return *d.histKeys[i]
			}
			return ""
		case d.focus == 1:
			return d.content.Copy()
		}
		if s, ok := d.snaps[d.selectedRev()]; ok {
			return indentJSON(s)
		}
		return d.id
	}
	if r := v.list.selected(); r != nil {
		return r.ID
	}
	return ""
}

// DiffShown is the diff on screen (nil when none), for tests.
func (v *Records) DiffShown() []Change {
	if v.detail == nil {
		return nil
	}
	return v.detail.diff
}
