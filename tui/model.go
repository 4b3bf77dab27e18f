// Package tui is the workbench's Bubble Tea shell: the root model that owns the layout (header,
// navigator, focused view, footer), routes keys (a focused text field first, then the view, then
// global keys), runs the prompts for filter, jump and owner, shows help built from the focused
// view's key map, and hands every view the shared program context.
//
// Each part of the frame has a file of its own: header.go (the top line and the status line),
// navigator.go (the list of views), prompt.go (search, filter, jump, owner), help.go (the footer's
// keys and the ? overlay, both by bubbles/help). This file routes messages and keys between them
// and the views, and lays the frame out.
package tui

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/views"
)

// Layout constants.
const (
	navWidth  = 17 // including its right border
	MinWidth  = 80
	MinHeight = 24
)

// Model is the root model.
type Model struct {
	ctx     *uictx.ProgramContext
	backend views.Backend
	views   []views.View
	active  int
	nav     navigator

	records *views.Records
	keys    *views.Keys
	storm   *views.Storm

	form   *views.Form
	help   helpOverlay
	prompt *prompt

	statusText string
	statusErr  bool
	statusAt   time.Time

	width, height int
	// dbDown is true while the session's database cannot be reached (uictx.Health): the status
	// line says so until it can, and r reads every view again (refreshedAt: when it last did).
	dbDown      bool
	refreshedAt time.Time
	// Clipboard takes what y copies (nil: copying is not available in this session).
	Clipboard Clipboard
}

// Clipboard copies text where a person can paste it from and says where that is — the
// terminal's clipboard when that is confirmed, else a file it names (internal/clipboard). It may
// block briefly: the shell calls it off the update goroutine.
type Clipboard interface {
	Copy(text string) (string, error)
}

// tickMsg refreshes the clock and relative times once a second.
type tickMsg time.Time

// New builds the shell over a program context, its views reading and writing through b.
func New(ctx *uictx.ProgramContext, b views.Backend) *Model {
	m := &Model{ctx: ctx, backend: b, help: newHelpOverlay(ctx.Styles)}
	m.records = views.NewRecords(ctx, b.Records)
	m.keys = views.NewKeys(ctx, b.Keys)
	m.storm = views.NewStorm(ctx, b.StormDeps())
	m.views = []views.View{m.records, m.keys, views.NewExecutions(ctx, b.Executions), views.NewAudit(ctx, b.Audit), views.NewTimeline(ctx, b.History),
		m.storm, views.NewLocks(ctx, b.Sessions), views.NewOutbox(ctx, b.Outbox), views.NewDemo(ctx, b.Demo), views.NewVerify(ctx, b.Verify)}
	if b.Cluster != nil { // the eleventh view: no digit, reached from the navigator (tab, arrows, a click)
		m.views = append(m.views, views.NewCluster(ctx, b.Cluster, b.Storm))
	}
	return m
}

// Init loads every view's first page.
func (m *Model) Init() tea.Cmd {
	cmds := []tea.Cmd{tick()}
	for _, v := range m.views {
		cmds = append(cmds, v.Init())
	}
	return tea.Batch(cmds...)
}

func tick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// ActiveTitle names the view on screen (for tests).
func (m *Model) ActiveTitle() string { return m.views[m.active].Title() }

// FooterKeys are the bindings the footer shows (for tests).
func (m *Model) FooterKeys() []key.Binding { return m.shortHelp() }

// Active is the view on screen (for tests: its key map is what the footer and the help show).
func (m *Model) Active() views.View { return m.views[m.active] }

func (m *Model) bodySize() (int, int) {
	w := m.width - navWidth
	h := m.height - 2 - len(m.statusLines()) // header, footer help, the status's lines
	if w < 10 {
		w = 10
	}
	if h < 3 {
		h = 3
	}
	return w, h
}

func (m *Model) resize() {
	w, h := m.bodySize()
	m.ctx.Width, m.ctx.Height = w, h
	for _, v := range m.views {
		v.SetSize(w, h)
	}
	if m.form != nil {
		m.form.SetSize(w, h)
	}
}

type activatable interface{ SetActive(bool) tea.Cmd }

func (m *Model) switchTo(i int) tea.Cmd {
	if i < 0 || i >= len(m.views) || i == m.active {
		return nil
	}
	var cmds []tea.Cmd
	if a, ok := m.views[m.active].(activatable); ok {
		cmds = append(cmds, a.SetActive(false))
	}
	m.active = i
	if a, ok := m.views[m.active].(activatable); ok {
		cmds = append(cmds, a.SetActive(true))
	}
	return tea.Batch(cmds...)
}

func (m *Model) indexOf(v views.View) int {
	for i, x := range m.views {
		if x == v {
			return i
		}
	}
	return 0
}

// Update routes messages, then follows the database's health: every message may be the answer
// that found it gone, or back.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	_, cmd := m.update(msg)
	if c := m.watchHealth(); c != nil {
		cmd = tea.Batch(cmd, c)
	}
	return m, cmd
}

// watchHealth notices the database going away or coming back. Gone, the status line says so
// (with the session's --data-dir and what to do) until it answers again, and no view's rows are
// dropped for it; back, every view reads again at once.
func (m *Model) watchHealth() tea.Cmd {
	down := m.ctx.Health.Down()
	if down == m.dbDown {
		return nil
	}
	before := len(m.statusLines())
	m.dbDown = down
	if len(m.statusLines()) != before {
		m.resize()
	}
	if down {
		return nil
	}
	const said = "the database answers again: every view was read again"
	if time.Since(m.refreshedAt) < 2*time.Second {
		return status(said, false) // the r that found it back read every view already
	}
	return tea.Batch(status(said, false), m.broadcast(uictx.DataChangedMsg{}))
}

func (m *Model) update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.resize()
		return m, nil
	case tickMsg:
		if m.statusText != "" && time.Since(m.statusAt) > m.statusShownFor() {
			m.setStatus("", false)
		}
		return m, tea.Batch(tick(), m.broadcast(views.TickMsg{}))
	case uictx.StatusMsg:
		m.setStatus(msg.Text, msg.Error)
		return m, nil
	case uictx.OwnerChangedMsg, uictx.DataChangedMsg:
		return m, m.broadcast(msg)
	case uictx.JumpMsg:
		return m, m.jump(msg)
	case uictx.OpenFormMsg:
		if m.ctx.ReadOnly() && msg.Kind != "rules" {
			return m, status(m.ctx.ReadOnlyMessage(), true)
		}
		m.form = views.NewForm(m.ctx, m.backend.Form(), msg)
		w, h := m.bodySize()
		m.form.SetSize(w, h)
		return m, m.form.Init()
	case uictx.OpenStormMsg:
		m.storm.Prepare(msg)
		m.nav.focused = false
		return m, m.switchTo(m.indexOf(m.storm))
	case views.FormClosedMsg:
		m.form = nil
		return m, nil
	case tea.MouseMsg:
		return m, m.mouse(msg)
	case searchTickMsg:
		return m, m.searchTick(msg)
	case tea.KeyMsg:
		return m, m.keyMsg(msg)
	}
	// Results of queries: every view checks its own request ids and ignores the rest.
	cmd := m.broadcast(msg)
	if m.form != nil {
		cmd = tea.Batch(cmd, m.form.Update(msg))
	}
	return m, cmd
}

func status(text string, isErr bool) tea.Cmd {
	return func() tea.Msg { return uictx.StatusMsg{Text: text, Error: isErr} }
}

func (m *Model) broadcast(msg tea.Msg) tea.Cmd {
	cmds := make([]tea.Cmd, 0, len(m.views))
	for _, v := range m.views {
		cmds = append(cmds, v.Update(msg))
	}
	return tea.Batch(cmds...)
}

func (m *Model) jump(msg uictx.JumpMsg) tea.Cmd {
	m.nav.focused, m.help.shown = false, false
	switch msg.Kind {
	case uictx.JumpRecord:
		return tea.Batch(m.switchTo(m.indexOf(m.records)), m.records.OpenRecord(msg.Module, msg.ID))
	case uictx.JumpKey:
		return tea.Batch(m.switchTo(m.indexOf(m.keys)), m.keys.OpenKey(msg.ID))
	}
	return nil
}

// keyMsg handles a key message. Several runes that arrived in one read (typed fast, or pasted
// without bracketed paste) are text where a text field has the keys — a prompt, a form's or the
// Storm's text field — and go to it whole, marked as pasted, so that no binding takes them (a
// chunk "down" or "esc" would match one by its name, and a text input's own "home"/"left");
// anywhere else they are several keypresses ("jjj").
func (m *Model) keyMsg(msg tea.KeyMsg) tea.Cmd {
	if msg.Type != tea.KeyRunes || len(msg.Runes) < 2 || msg.Paste {
		return m.key(msg)
	}
	if m.textHasKeys() {
		msg.Paste = true
		return m.key(msg)
	}
	cmds := make([]tea.Cmd, 0, len(msg.Runes))
	for _, r := range msg.Runes {
		cmds = append(cmds, m.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: msg.Alt}))
	}
	return tea.Batch(cmds...)
}

// textHasKeys reports whether the key goes to a text field: the prompt's, or the form's or the
// focused view's when theirs has the focus.
func (m *Model) textHasKeys() bool {
	switch {
	case m.prompt != nil:
		return true
	case m.form != nil:
		return m.form.TextFocused()
	case m.help.shown:
		return false
	}
	return textFocused(m.views[m.active])
}

// key routes one key: ctrl+c quits from anywhere; an open prompt, form or help takes every
// other key; a view that captures (a field being typed) comes next; then the global keys, the
// navigator when it has the focus, the digits, and last the focused view.
func (m *Model) key(msg tea.KeyMsg) tea.Cmd {
	g := m.ctx.Keys.Global
	if key.Matches(msg, g.ForceQuit) {
		return tea.Quit
	}
	if m.prompt != nil {
		return m.updatePrompt(msg)
	}
	// A digit switches views wherever no text field has the keys: over the help, and in a form or
	// the storm's settings on a choice field (the form closes, as esc closes it).
	digit, _ := uictx.ViewIndex(msg.String())
	isDigit := msg.Type == tea.KeyRunes && !msg.Paste && key.Matches(msg, g.Views) && digit < len(m.views)
	if m.form != nil {
		if isDigit && !m.form.TextFocused() {
			m.form = nil
			return m.switchTo(digit)
		}
		return m.form.Update(msg)
	}
	v := m.views[m.active]
	if m.help.shown {
		if key.Matches(msg, g.Help, m.ctx.Keys.Shell.HelpClose, g.Quit) {
			m.help.shown = false
		}
		if isDigit && !ownsKey(v, msg) {
			m.help.shown = false
			return m.switchTo(digit)
		}
		return nil
	}
	if v.Capturing() {
		if isDigit && !textFocused(v) {
			return m.switchTo(digit)
		}
		return v.Update(msg)
	}
	switch {
	case key.Matches(msg, g.Quit):
		return tea.Quit
	case key.Matches(msg, g.Help):
		m.help.shown = true
		return nil
	case key.Matches(msg, g.NextFocus, g.PrevFocus):
		m.nav.focused = !m.nav.focused
		return nil
	case key.Matches(msg, g.Filter):
		if sv, ok := v.(views.Searcher); ok {
			return m.openPrompt(promptSearch, "search "+v.Title()+": "+sv.SearchHint(), sv.Query())
		}
		if _, ok := v.(views.Filterer); ok {
			return m.openPrompt(promptFilter, v.Title()+" filter (the rows on screen)", "")
		}
		return status(v.Title()+" has no rows to filter or search", false)
	case key.Matches(msg, g.Jump):
		return m.openPrompt(promptJump, "jump to (owner O | key K | record ID)", "")
	case key.Matches(msg, g.Owner):
		return m.openPrompt(promptOwner, "owner", m.ctx.Owner)
	case key.Matches(msg, g.Rules):
		return func() tea.Msg { return uictx.OpenFormMsg{Kind: "rules"} }
	case key.Matches(msg, g.ClockFwd):
		return m.moveClock(time.Hour)
	case key.Matches(msg, g.ClockBack):
		return m.moveClock(-time.Hour)
	case key.Matches(msg, g.ClockReset):
		if m.ctx.Clock != nil {
			m.ctx.Clock.Reset()
		}
		return tea.Batch(status("clock reset to the system time", false), m.broadcast(views.TickMsg{}))
	case key.Matches(msg, g.Copy):
		return m.copySelection()
	}
	if m.nav.focused {
		if i, ok := m.nav.key(m.ctx.Keys.Shell, msg, m.active, len(m.views)); ok {
			return m.switchTo(i)
		}
		if i, ok := uictx.ViewIndex(msg.String()); ok && key.Matches(msg, g.Views) && i < len(m.views) {
			return m.switchTo(i)
		}
		return nil
	}
	if m.dbDown && key.Matches(msg, m.ctx.Keys.List.Refresh) {
		// One r reads every view again (each would otherwise need its own).
		m.refreshedAt = time.Now()
		return tea.Batch(status("reading every view again…", false), m.broadcast(uictx.DataChangedMsg{}))
	}
	// Digits switch views directly (1-9, and 0 for the tenth), except a digit the focused view
	// has a key of its own for, shown in its footer: 1-3 inside an open record choose its pane,
	// 0 in Outbox clears the provider's failures.
	if key.Matches(msg, g.Views) && !ownsKey(v, msg) {
		if i, ok := uictx.ViewIndex(msg.String()); ok && i < len(m.views) {
			return m.switchTo(i)
		}
	}
	return v.Update(msg)
}

// textFocused reports whether a text field of v has the keys: a view that captures them says
// so (views.TextFocuser), or has one.
func textFocused(v views.View) bool {
	if tf, ok := v.(views.TextFocuser); ok {
		return tf.TextFocused()
	}
	return v.Capturing()
}

// ownsKey reports whether the view's footer (its keys for what it shows now) binds msg.
func ownsKey(v views.View, msg tea.KeyMsg) bool {
	for _, b := range v.ShortHelp() {
		if b.Enabled() && key.Matches(msg, b) {
			return true
		}
	}
	return false
}

func (m *Model) moveClock(d time.Duration) tea.Cmd {
	if m.ctx.Clock == nil {
		return nil
	}
	m.ctx.Clock.Advance(d)
	return tea.Batch(status(fmt.Sprintf("clock moved: now %s (offset %s); keys expire by this clock", m.ctx.Now().Local().Format("Jan 2 15:04"), m.ctx.Clock.Offset()), false),
		m.broadcast(views.TickMsg{}))
}

// copySelection copies the focused view's selection and says where it went: the clipboard only
// when that was confirmed, else the file it was saved to.
func (m *Model) copySelection() tea.Cmd {
	sel := m.views[m.active].Selection()
	if sel == "" {
		return status("nothing selected to copy", true)
	}
	c := m.Clipboard
	if c == nil {
		return status("copying is not available in this session", true)
	}
	what := cutText(sel, 40)
	return func() tea.Msg {
		where, err := c.Copy(sel)
		if err != nil {
			return uictx.StatusMsg{Text: "y: " + what + " was not copied: " + err.Error(), Error: true}
		}
		return uictx.StatusMsg{Text: "y: " + what + ": " + where}
	}
}

func cutText(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// mouse routes a click on the navigator to it and everything right of it to the focused view,
// in the view's own coordinates.
func (m *Model) mouse(msg tea.MouseMsg) tea.Cmd {
	if m.form != nil || m.prompt != nil || m.help.shown {
		return nil
	}
	y := msg.Y - 1 // below the header
	if msg.X < navWidth {
		if i, ok := m.nav.click(msg, y, len(m.views)); ok {
			return m.switchTo(i)
		}
		return nil
	}
	if y < 0 {
		return nil
	}
	msg.X -= navWidth
	msg.Y = y
	m.nav.focused = false
	return m.views[m.active].Update(msg)
}

// View renders the screen: the header, the navigator beside the focused view (or a form over
// it, or the help over both), the footer's keys and the status line.
func (m *Model) View() string {
	if m.width == 0 {
		return "starting…"
	}
	s := m.ctx.Styles
	if m.width < MinWidth || m.height < MinHeight {
		msg := fmt.Sprintf("idemwork needs at least %d×%d; this terminal is %d×%d", MinWidth, MinHeight, m.width, m.height)
		return lipgloss.Place(m.width, m.height, lipgloss.Center, lipgloss.Center, s.Warning.Render(msg))
	}
	w, h := m.bodySize()
	var body string
	switch {
	case m.help.shown:
		body = m.help.view(s, m.ctx.Keys, m.views[m.active], w, h)
	case m.form != nil:
		body = lipgloss.Place(w, h, lipgloss.Center, lipgloss.Center, m.form.View())
	default:
		body = m.views[m.active].View()
	}
	main := lipgloss.JoinHorizontal(lipgloss.Top, m.nav.view(s, m.views, m.active, h), fit(body, w, h))
	return fit(strings.Join([]string{header(m.ctx, m.backend.Catalog, m.width), main, m.footerKeys(), m.statusLine()}, "\n"), m.width, m.height)
}

func padRight(s string, w int) string {
	if n := ansi.StringWidth(s); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}

// fit pads or clips a block to exactly w×h so the frame never shifts. Each line passes
// termsafe.Frame first: whatever a view let through, only styling reaches the terminal. A line
// cut to the width ends in "…", so the reader knows text is missing.
func fit(s string, w, h int) string {
	lines := strings.Split(termsafe.Frame(s), "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		if n := ansi.StringWidth(l); n > w {
			lines[i] = ansi.Truncate(l, w, "…")
		} else if n < w {
			lines[i] = l + strings.Repeat(" ", w-n)
		}
	}
	for len(lines) < h {
		lines = append(lines, strings.Repeat(" ", w))
	}
	return strings.Join(lines, "\n")
}
