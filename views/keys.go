package views

import (
	gocontext "context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"idemwork/idem"
	"idemwork/kernel"
	"idemwork/store"
	tctx "idemwork/tui/context"
)

// Keys lists the owner's idempotency keys; a selected key opens side by side: the raw
// envelope, the exact result a replay restores, the latest record, the drift between them, and
// the audit events written by that request.
type Keys struct {
	ctx  *tctx.ProgramContext
	w, h int
	list paged[store.KeyRow]
	req  int // detail requests

	detail *keyDetail
}

type keyDetail struct {
	req   int
	key   string
	view  *kernel.KeyView
	err   string
	audit Table
}

// NewKeys returns the Keys view.
func NewKeys(ctx *tctx.ProgramContext) *Keys {
	v := &Keys{ctx: ctx}
	v.list.table.Columns = []Column{{Title: "KEY", Min: 14}, {Title: "STATUS", Width: 10}, {Title: "POLICY", Width: 18}, {Title: "OPERATION", Width: 24}, {Title: "EXPIRES", Width: 10}}
	v.list.fetch = func(ctx gocontext.Context, db *store.DB, owner, cursor string) ([]store.KeyRow, string, error) {
		return db.KeyPage(ctx, owner, pageSize, cursor)
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
	view kernel.KeyView
	err  error
}

func (v *Keys) reload() tea.Cmd { return v.list.reload(v.ctx) }

// OpenKey shows one key side by side (used by jumps).
func (v *Keys) OpenKey(k string) tea.Cmd {
	d := &keyDetail{key: k}
	d.audit.Columns = []Column{{Title: "WHEN", Width: 14}, {Title: "ACTION", Min: 12}, {Title: "REV", Width: 4}, {Title: "RECORD", Width: 14}}
	v.detail = d
	v.SetSize(v.w, v.h)
	return v.loadDetail()
}

func (v *Keys) loadDetail() tea.Cmd {
	v.req++
	v.detail.req = v.req
	req, k, owner, name := v.req, v.ctx.Kernel, v.ctx.Owner, v.detail.key
	return query(func(ctx gocontext.Context) tea.Msg {
		view, err := k.InspectKey(ctx, owner, name)
		return keyDetailMsg{req: req, view: view, err: err}
	})
}

// Update handles messages.
func (v *Keys) Update(msg tea.Msg) tea.Cmd {
	if v.list.handle(msg) {
		return nil
	}
	switch msg := msg.(type) {
	case keyDetailMsg:
		if v.detail == nil || msg.req != v.detail.req {
			return nil
		}
		if msg.err != nil {
			v.detail.err = errText(msg.err)
			return nil
		}
		v.detail.view = &msg.view
		var rows []Row
		for _, a := range []store.AuditEvent{} {
			rows = append(rows, Row{Cells: []string{stamp(a.At), a.Action, derefInt(a.Revision), shortID(deref(a.RecordID), 14)}})
		}
		v.detail.audit.SetRows(rows)
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
		if v.detail == nil {
			return v.list.mouse(v.ctx, msg, msg.Y-1)
		}
	case tea.KeyMsg:
		if v.detail != nil {
			switch {
			case key.Matches(msg, keyBack):
				v.detail = nil
			case key.Matches(msg, keyRefresh):
				return v.loadDetail()
			case key.Matches(msg, keyOpen):
				if kv := v.detail.view; kv != nil {
					if r := kv.Latest.Record; r != nil {
						return jump(tctx.JumpRecord, r.ModuleCode, r.ID)
					}
				}
			default:
				moveTable(&v.detail.audit, msg, 5)
			}
			return nil
		}
		if ok, cmd := v.list.keyNav(v.ctx, msg, v.h-2); ok {
			return cmd
		}
		switch {
		case key.Matches(msg, keyOpen):
			if r := v.list.selected(); r != nil {
				return v.OpenKey(r.Key)
			}
		case key.Matches(msg, keyRefresh):
			return v.reload()
		}
	}
	return nil
}

func jump(kind tctx.JumpKind, module, id string) tea.Cmd {
	return func() tea.Msg { return tctx.JumpMsg{Kind: kind, Module: module, ID: id} }
}

func (v *Keys) keyRow(r store.KeyRow) Row {
	now := v.ctx.Now()
	s := v.ctx.Styles
	policy := "-"
	var style *lipgloss.Style
	if r.Response != nil {
		if env, err := idem.ParseEnvelope(r.Response); err == nil {
			policy = env.Policy
			if env.Legacy {
				policy = "LEGACY raw-json-v1"
				style = &s.Warning
			}
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
	return Row{Cells: []string{r.Key, r.Status, policy, r.Operation, expires}, Style: style}
}

// SetSize sets the drawing area.
func (v *Keys) SetSize(w, h int) {
	v.w, v.h = w, h
	v.list.table.SetSize(w, h-1)
	if v.detail != nil {
		v.detail.audit.SetSize(w-4, auditPaneHeight(h)-2)
	}
}

func auditPaneHeight(h int) int {
	if h < 24 {
		return 6
	}
	return 8
}

// View renders the view.
func (v *Keys) View() string {
	s := v.ctx.Styles
	if v.detail != nil {
		return v.viewDetail()
	}
	head := s.Title.Render("Idempotency keys") + s.Subtle.Render(fmt.Sprintf(" of %s · %s", v.ctx.Owner, v.list.summary()))
	if v.list.err != "" {
		head = s.Danger.Render(v.list.err)
	}
	return cut(head, v.w) + "\n" + v.list.table.View(s, true)
}

// Drift describes how the replayed result relates to the latest record.
func Drift(kv *kernel.KeyView) string {
	r, l := kv.Restored.Record, kv.Latest.Record
	switch {
	case kv.Legacy:
		return "legacy raw-json-v1 receipt: readable only; a replay of identity:create is refused (410)"
	case kv.RestoreError != nil:
		return fmt.Sprintf("a replay FAILS CLOSED: %s", kv.RestoreError.Code)
	case kv.Status == "PROCESSING":
		return "PROCESSING: reserved but never committed as a success; never replayed, never re-executed"
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

func (v *Keys) viewDetail() string {
	s := v.ctx.Styles
	d := v.detail
	if d.err != "" {
		return s.Danger.Render(d.err) + "\n" + s.Subtle.Render("esc: back")
	}
	kv := d.view
	if kv == nil {
		return s.Subtle.Render("loading key " + d.key + "…")
	}
	now := v.ctx.Now()
	expiry := "expires " + ago(now, kv.ExpiresAt)
	if !kv.ExpiresAt.After(now) {
		expiry = "EXPIRED (the next request with this key executes again)"
	}
	lines := []string{
		s.Title.Render("key "+kv.Key) + s.Subtle.Render(" · "+kv.Status+" · "+expiry),
		s.Subtle.Render("operation ") + kv.Operation,
		s.Subtle.Render("fingerprint ") + kv.Fingerprint,
	}
	driftStyle := s.Success
	if kv.Latest.Record != nil && kv.Restored.Record != nil && kv.Latest.Record.Revision != kv.Restored.Record.Revision {
		driftStyle = s.Warning
	}
	if kv.RestoreError != nil || kv.Status == "PROCESSING" {
		driftStyle = s.Danger
	}
	lines = append(lines, driftStyle.Render(Drift(kv)))
	head := fitBlock(strings.Join(lines, "\n"), v.w, len(lines))

	auditH := auditPaneHeight(v.h)
	bodyH := v.h - len(lines) - auditH
	if bodyH < 5 {
		bodyH = 5
	}
	// Show the restored record itself (with its execution beside it for features), not the
	// wrapper, so the pane's space goes to the result.
	restored, restoredTitle := "null", "Replay returns"
	switch r := kv.Restored; {
	case r.Execution != nil:
		b, _ := json.Marshal(map[string]any{"record": r.Record, "execution": r.Execution})
		restored, restoredTitle = string(b), fmt.Sprintf("Replay returns rev %d + execution", r.Record.Revision)
	case r.Record != nil:
		b, _ := json.Marshal(r.Record)
		restored, restoredTitle = string(b), fmt.Sprintf("Replay returns rev %d", r.Record.Revision)
	case r.Review != nil:
		b, _ := json.Marshal(r.Review)
		restored, restoredTitle = string(b), "Replay returns the review"
	}
	latestTitle := "Latest record"
	if kv.Latest.Record != nil {
		latestTitle = fmt.Sprintf("Latest record (rev %d)", kv.Latest.Record.Revision)
	}
	latest := "null"
	if kv.Latest.Record != nil {
		b, _ := json.Marshal(kv.Latest.Record)
		latest = string(b)
	}
	envTitle := "Envelope (stored)"
	if kv.Legacy {
		envTitle = "Envelope (LEGACY raw-json-v1)"
	}
	var body string
	if v.w >= 96 {
		body = columns(s, v.w, bodyH, []string{envTitle, restoredTitle, latestTitle},
			[]string{prettyJSON(s, kv.Envelope), prettyJSON(s, []byte(restored)), prettyJSON(s, []byte(latest))}, 1)
	} else {
		env := s.Subtle.Render("envelope ") + compactJSON(kv.Envelope)
		body = fitBlock(env, v.w, 1) + "\n" + columns(s, v.w, bodyH-1, []string{restoredTitle, latestTitle},
			[]string{prettyJSON(s, []byte(restored)), prettyJSON(s, []byte(latest))}, 0)
	}
	audit := pane(s, fmt.Sprintf("Audit events written by this request (%d)", d.audit.Len()), d.audit.View(s, false), v.w, auditH, false)
	return head + "\n" + body + "\n" + audit
}

func compactJSON(raw []byte) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// ShortHelp is the footer help.
func (v *Keys) ShortHelp() []key.Binding {
	if v.detail != nil {
		return []key.Binding{keyBack, keyOpen, keyRefresh, keyCopy}
	}
	return []key.Binding{keyOpen, keyRefresh, keyCopy}
}

// FullHelp is the ? help.
func (v *Keys) FullHelp() [][]key.Binding {
	return [][]key.Binding{{keyUp, keyDown, keyPgUp, keyPgDown, keyTop, keyBottom}, {keyOpen, keyBack, keyRefresh, keyCopy}}
}

// Capturing is false.
func (v *Keys) Capturing() bool { return false }

// SetFilter filters loaded rows.
func (v *Keys) SetFilter(f string) { v.list.table.SetFilter(f) }

// Selection is the selected key, or the envelope in the detail.
func (v *Keys) Selection() string {
	if v.detail != nil {
		if v.detail.view != nil {
			return string(v.detail.view.Envelope)
		}
		return v.detail.key
	}
	if r := v.list.selected(); r != nil {
		return r.Key
	}
	return ""
}
