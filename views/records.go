package views

import (
	gocontext "context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"idemwork/store"
	tctx "idemwork/tui/context"
)

// Records lists the owner's records (keyset pages, module filter) and opens one record with
// its revisions, a snapshot of any revision, a diff between any two, and its executions and
// audit events.
type Records struct {
	ctx    *tctx.ProgramContext
	w, h   int
	list   paged[store.Record]
	module string // "" = all
	req    int    // detail requests

	detail *recordDetail
}

type recordDetail struct {
	req     int
	module  string
	id      string
	data    *store.RecordDetail
	err     string
	revs    Table
	mode    int // 0 snapshot, 1 diff, 2 history
	base    int // revision index marked as diff base (-1: previous revision)
	history Table
}

var modulesCycle = []string{"", "NOTE", "MEM-001", "COMMITMENT"}

var (
	keyModule  = key.NewBinding(key.WithKeys("m"), key.WithHelp("m", "module filter"))
	keyCreate  = key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "create"))
	keyPatch   = key.NewBinding(key.WithKeys("p"), key.WithHelp("p", "patch"))
	keyAction  = key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "run feature"))
	keyStorm   = key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "storm this record"))
	keySnap    = key.NewBinding(key.WithKeys("1"), key.WithHelp("1", "snapshot"))
	keyDiff    = key.NewBinding(key.WithKeys("2"), key.WithHelp("2", "diff"))
	keyHistory = key.NewBinding(key.WithKeys("3"), key.WithHelp("3", "executions+audit"))
	keyMark    = key.NewBinding(key.WithKeys(" "), key.WithHelp("space", "mark diff base"))
)

// NewRecords returns the Records view.
func NewRecords(ctx *tctx.ProgramContext) *Records {
	v := &Records{ctx: ctx}
	v.list.table.Columns = []Column{{Title: "MODULE", Width: 10}, {Title: "ID", Width: 12}, {Title: "REV", Width: 4}, {Title: "TITLE", Min: 10}, {Title: "UPDATED", Width: 14}}
	v.list.toRow = func(r store.Record) Row {
		return Row{Cells: []string{r.ModuleCode, shortID(r.ID, 12), strconv.Itoa(r.Revision), r.Title, ago(ctx.Now(), r.UpdatedAt)}}
	}
	v.setModule("")
	return v
}

// Title names the view in the navigator.
func (v *Records) Title() string { return "Records" }

// Init loads the first page.
func (v *Records) Init() tea.Cmd { return v.reload() }

type recordDetailMsg struct {
	req  int
	data store.RecordDetail
	err  error
}

// setModule changes the module filter; the fetch captures it so a running query never reads
// the view's fields from another goroutine.
func (v *Records) setModule(module string) {
	v.module = module
	v.list.fetch = func(ctx gocontext.Context, db *store.DB, owner, cursor string) ([]store.Record, string, error) {
		return db.RecordPage(ctx, owner, module, pageSize, cursor)
	}
}

func (v *Records) reload() tea.Cmd { return v.list.reload(v.ctx) }

func (v *Records) openDetail(module, id string) tea.Cmd {
	d := &recordDetail{module: module, id: id, base: -1}
	d.revs.Columns = []Column{{Title: "REV", Width: 4}, {Title: "WHEN", Min: 8}}
	d.history.Columns = []Column{{Title: "WHEN", Width: 14}, {Title: "WHAT", Min: 10}, {Title: "KEY", Width: 18}}
	v.detail = d
	v.SetSize(v.w, v.h)
	return v.loadDetail()
}

func (v *Records) loadDetail() tea.Cmd {
	d := v.detail
	v.req++
	d.req = v.req
	req, db, owner := d.req, v.ctx.DB, v.ctx.Owner
	module, id := d.module, d.id
	return query(func(ctx gocontext.Context) tea.Msg {
		if module == "" {
			// A jump by id alone: find the record's module first.
			var m string
			if err := db.Q(ctx).QueryRow(ctx, `SELECT module_code FROM record WHERE owner_id = $1 AND id = $2`, owner, id).Scan(&m); err != nil {
				return recordDetailMsg{req: req, err: fmt.Errorf("owner %s has no record %s", owner, id)}
			}
			module = m
		}
		data, err := db.GetRecordDetail(ctx, owner, module, id)
		return recordDetailMsg{req: req, data: data, err: err}
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
		v.detail.data = &msg.data
		v.detail.module = msg.data.Record.ModuleCode
		v.fillDetail()
	case TickMsg:
		v.list.refill()
	case tctx.OwnerChangedMsg:
		v.detail = nil
		return v.reload()
	case tctx.DataChangedMsg:
		cmds := []tea.Cmd{v.reload()}
		if v.detail != nil {
			cmds = append(cmds, v.loadDetail())
		}
		return tea.Batch(cmds...)
	case tea.MouseMsg:
		if v.detail != nil {
			if msg.X < 26 {
				wheelTable(&v.detail.revs, msg, msg.Y-3)
			} else {
				wheelTable(&v.detail.history, msg, msg.Y-3)
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
	if ok, cmd := v.list.keyNav(v.ctx, msg, v.h-2); ok {
		return cmd
	}
	sel := v.list.selected()
	switch {
	case key.Matches(msg, keyOpen):
		if sel != nil {
			return v.openDetail(sel.ModuleCode, sel.ID)
		}
	case key.Matches(msg, keyModule):
		for i, m := range modulesCycle {
			if m == v.module {
				v.setModule(modulesCycle[(i+1)%len(modulesCycle)])
				break
			}
		}
		return v.reload()
	case key.Matches(msg, keyRefresh):
		return v.reload()
	case key.Matches(msg, keyCreate):
		module := v.module
		if module == "" {
			module = "NOTE"
		}
		return func() tea.Msg { return tctx.OpenFormMsg{Kind: "create", Module: module} }
	case key.Matches(msg, keyPatch), key.Matches(msg, keyAction), key.Matches(msg, keyStorm):
		if sel == nil {
			return status("select a record first", true)
		}
		return recordAction(msg, sel.ModuleCode, sel.ID, sel.Revision)
	}
	return nil
}

func recordAction(msg tea.KeyMsg, module, id string, revision int) tea.Cmd {
	switch {
	case key.Matches(msg, keyPatch):
		return func() tea.Msg {
			return tctx.OpenFormMsg{Kind: "patch", Module: module, RecordID: id, Revision: revision}
		}
	case key.Matches(msg, keyAction):
		return func() tea.Msg {
			return tctx.OpenFormMsg{Kind: "action", Module: module, RecordID: id, Revision: revision}
		}
	case key.Matches(msg, keyStorm):
		return func() tea.Msg { return tctx.OpenStormMsg{Module: module, RecordID: id, Revision: revision} }
	}
	return nil
}

func (v *Records) updateDetail(msg tea.KeyMsg) tea.Cmd {
	d := v.detail
	if d.mode == 2 {
		if moveTable(&d.history, msg, v.h-4) {
			return nil
		}
	} else if moveTable(&d.revs, msg, v.h-4) {
		return nil
	}
	switch {
	case key.Matches(msg, keyBack):
		v.detail = nil
		return nil
	case key.Matches(msg, keySnap):
		d.mode = 0
	case key.Matches(msg, keyDiff):
		d.mode = 1
	case key.Matches(msg, keyHistory):
		d.mode = 2
	case key.Matches(msg, keyMark):
		d.base = d.revs.Selected()
		d.mode = 1
	case key.Matches(msg, keyRefresh):
		return v.loadDetail()
	case key.Matches(msg, keyPatch), key.Matches(msg, keyAction), key.Matches(msg, keyStorm):
		if d.data != nil {
			r := d.data.Record
			return recordAction(msg, r.ModuleCode, r.ID, r.Revision)
		}
	}
	return nil
}

func (v *Records) fillDetail() {
	d := v.detail
	rows := make([]Row, len(d.data.Revisions))
	for i, r := range d.data.Revisions {
		rows[i] = Row{Cells: []string{fmt.Sprint(r.Revision), stamp(r.CreatedAt)}}
	}
	d.revs.SetRows(rows)
	d.revs.Bottom()
	var hist []Row
	for _, e := range d.data.Executions {
		row := Row{Cells: []string{stamp(e.CreatedAt), fmt.Sprintf("%s %s %s → rev %d", e.FeatureID, e.Mode, e.Status, e.RecordRevision), deref(e.IdempotencyKey)}}
		if e.Status == "BLOCKED" {
			st := v.ctx.Styles.Warning
			row.Style = &st
		}
		hist = append(hist, row)
	}
	for _, a := range d.data.Audit {
		hist = append(hist, Row{Cells: []string{stamp(a.At), fmt.Sprintf("%s rev %s", a.Action, derefInt(a.Revision)), deref(a.IdempotencyKey)}})
	}
	d.history.SetRows(hist)
}

// SetSize sets the drawing area.
func (v *Records) SetSize(w, h int) {
	v.w, v.h = w, h
	v.list.table.SetSize(w, h-1)
	if v.detail != nil {
		v.detail.revs.SetSize(20, h-4)
		v.detail.history.SetSize(w-4, h-4)
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
	head := s.Title.Render("Records") + s.Subtle.Render(fmt.Sprintf(" of %s · %s · %s · m: module", v.ctx.Owner, mod, v.list.summary()))
	if v.list.err != "" {
		head = s.Danger.Render(v.list.err)
	}
	return cut(head, v.w) + "\n" + v.list.table.View(s, true)
}

func (v *Records) viewDetail() string {
	s := v.ctx.Styles
	d := v.detail
	if d.err != "" {
		return s.Danger.Render(d.err) + "\n" + s.Subtle.Render("esc: back")
	}
	if d.data == nil {
		return s.Subtle.Render("loading record " + d.id + "…")
	}
	r := d.data.Record
	head := s.Title.Render(fmt.Sprintf("%s %s", r.ModuleCode, r.ID)) + s.Subtle.Render(fmt.Sprintf(" · revision %d · %q", r.Revision, r.Title))
	sub := s.Subtle.Render(fmt.Sprintf("%d revisions · %d executions · %d audit events · 1 snapshot 2 diff 3 history · space marks diff base",
		len(d.data.Revisions), len(d.data.Executions), len(d.data.Audit)))
	bodyH := v.h - 2
	if d.mode == 2 {
		body := pane(s, "Executions and audit events", d.history.View(s, true), v.w, bodyH, true)
		return cut(head, v.w) + "\n" + cut(sub, v.w) + "\n" + body
	}
	left := pane(s, "Revisions", d.revs.View(s, true), 24, bodyH, true)
	var title, content string
	sel := d.revs.Selected()
	if sel >= 0 && sel < len(d.data.Revisions) {
		rev := d.data.Revisions[sel]
		if d.mode == 0 {
			title = fmt.Sprintf("Snapshot of revision %d", rev.Revision)
			content = prettyJSON(s, rev.Snapshot)
		} else {
			baseIdx := d.base
			if baseIdx < 0 || baseIdx >= len(d.data.Revisions) {
				baseIdx = sel - 1
			}
			if baseIdx < 0 {
				title, content = "Diff", s.Subtle.Render("revision 1 has nothing before it; select a later revision or mark a base with space")
			} else {
				base := d.data.Revisions[baseIdx]
				title = fmt.Sprintf("Diff revision %d → %d", base.Revision, rev.Revision)
				content = renderDiff(s, plainJSON(base.Snapshot), plainJSON(rev.Snapshot))
			}
		}
	}
	right := pane(s, title, content, v.w-24, bodyH, false)
	return cut(head, v.w) + "\n" + cut(sub, v.w) + "\n" + joinH(left, right)
}

// plainJSON indents JSON without colour, for diffs.
func plainJSON(raw []byte) []string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return strings.Split(string(raw), "\n")
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return strings.Split(string(b), "\n")
}

// renderDiff shows a line diff (longest common subsequence) with +/- markers.
func renderDiff(s tctx.Styles, a, b []string) string {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else if lcs[i+1][j] >= lcs[i][j+1] {
				lcs[i][j] = lcs[i+1][j]
			} else {
				lcs[i][j] = lcs[i][j+1]
			}
		}
	}
	var out []string
	i, j, changes := 0, 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			out = append(out, s.Subtle.Render("  "+a[i]))
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, s.Danger.Render("- "+a[i]))
			i++
			changes++
		default:
			out = append(out, s.Success.Render("+ "+b[j]))
			j++
			changes++
		}
	}
	if changes == 0 {
		return s.Subtle.Render("(identical)")
	}
	return strings.Join(out, "\n")
}

// ShortHelp is the footer help.
func (v *Records) ShortHelp() []key.Binding {
	if v.detail != nil {
		return []key.Binding{keyBack, keySnap, keyDiff, keyHistory, keyMark, keyPatch, keyAction, keyStorm}
	}
	return []key.Binding{keyOpen, keyModule, keyCreate, keyPatch, keyAction, keyStorm, keyRefresh}
}

// FullHelp is the ? help.
func (v *Records) FullHelp() [][]key.Binding {
	return [][]key.Binding{{keyUp, keyDown, keyPgUp, keyPgDown, keyTop, keyBottom}, {keyOpen, keyBack, keyModule, keyRefresh, keyCopy},
		{keyCreate, keyPatch, keyAction, keyStorm}, {keySnap, keyDiff, keyHistory, keyMark}}
}

// Capturing is false: this view has no text fields.
func (v *Records) Capturing() bool { return false }

// SetFilter filters the loaded rows.
func (v *Records) SetFilter(f string) { v.list.table.SetFilter(f) }

// Selection is the selected record id.
func (v *Records) Selection() string {
	if v.detail != nil && v.detail.data != nil {
		sel := v.detail.revs.Selected()
		if sel >= 0 && sel < len(v.detail.data.Revisions) {
			return string(v.detail.data.Revisions[sel].Snapshot)
		}
		return v.detail.id
	}
	if r := v.list.selected(); r != nil {
		return r.ID
	}
	return ""
}
