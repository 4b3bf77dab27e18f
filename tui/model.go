// Package tui is the workbench's Bubble Tea shell: the root model that owns the layout (header,
// navigator, focused view, footer), routes keys (a focused text field first, then the view, then
// global keys), runs the prompts for filter, jump and owner, shows help built from the focused
// view's key map, and hands every view the shared program context.
package tui

import (
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/aymanbagabas/go-osc52/v2"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"idemwork/idem"
	"idemwork/internal/termsafe"
	tctx "idemwork/tui/context"
	"idemwork/views"
)

// Layout constants.
const (
	navWidth  = 17 // including its right border
	MinWidth  = 80
	MinHeight = 24
)

// Model is the root model.
type Model struct {
	ctx    *tctx.ProgramContext
	views  []views.View
	active int
	navFoc bool

	records *views.Records
	keys    *views.Keys
	storm   *views.Storm

	form   *views.Form
	help   bool
	prompt *prompt

	statusText string
	statusErr  bool
	statusAt   time.Time

	width, height int
	// Clipboard receives OSC 52 copy sequences (the terminal); nil disables copying.
	Clipboard io.Writer
}

type prompt struct {
	kind  string // search | filter | jump | owner
	input textinput.Model
	// seq numbers the search prompt's edits: a search runs when typing pauses, for the latest
	// edit only.
	seq int
}

// searchDebounce is how long typing must pause before the search runs.
const searchDebounce = 150 * time.Millisecond

// searchTickMsg runs the search for edit seq of the prompt, if it is still the latest.
type searchTickMsg struct{ seq int }

// tickMsg refreshes the clock and relative times once a second.
type tickMsg time.Time

// New builds the shell over a program context.
func New(ctx *tctx.ProgramContext) *Model {
	m := &Model{ctx: ctx}
	m.records = views.NewRecords(ctx)
	m.keys = views.NewKeys(ctx)
	m.storm = views.NewStorm(ctx)
	m.views = []views.View{m.records, m.keys, views.NewExecutions(ctx), views.NewAudit(ctx), views.NewTimeline(ctx),
		m.storm, views.NewLocks(ctx), views.NewOutbox(ctx), views.NewDemo(ctx), views.NewVerify(ctx)}
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

func (m *Model) bodySize() (int, int) {
	w := m.width - navWidth
	h := m.height - 3 // header, footer help, footer status
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

// Update routes messages.
func (m *Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.resize()
		return m, nil
	case tickMsg:
		if m.statusText != "" && time.Since(m.statusAt) > 8*time.Second {
			m.statusText = ""
		}
		return m, tea.Batch(tick(), m.broadcast(views.TickMsg{}))
	case tctx.StatusMsg:
		m.statusText, m.statusErr, m.statusAt = msg.Text, msg.Error, time.Now()
		return m, nil
	case tctx.OwnerChangedMsg, tctx.DataChangedMsg:
		return m, m.broadcast(msg)
	case tctx.JumpMsg:
		return m, m.jump(msg)
	case tctx.OpenFormMsg:
		if m.ctx.ReadOnly() && msg.Kind != "rules" {
			return m, status(m.ctx.ReadOnlyMessage(), true)
		}
		m.form = views.NewForm(m.ctx, msg)
		w, h := m.bodySize()
		m.form.SetSize(w, h)
		return m, m.form.Init()
	case tctx.OpenStormMsg:
		m.storm.Prepare(msg)
		m.navFoc = false
		return m, m.switchTo(m.indexOf(m.storm))
	case views.FormClosedMsg:
		m.form = nil
		return m, nil
	case tea.MouseMsg:
		return m, m.mouse(msg)
	case searchTickMsg:
		if p := m.prompt; p != nil && p.kind == "search" && msg.seq == p.seq {
			if sv, ok := m.views[m.active].(views.Searcher); ok {
				return m, sv.Search(strings.TrimSpace(p.input.Value()))
			}
		}
		return m, nil
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
	return func() tea.Msg { return tctx.StatusMsg{Text: text, Error: isErr} }
}

func (m *Model) broadcast(msg tea.Msg) tea.Cmd {
	cmds := make([]tea.Cmd, 0, len(m.views))
	for _, v := range m.views {
		cmds = append(cmds, v.Update(msg))
	}
	return tea.Batch(cmds...)
}

var ulidRE = regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{26}$`)

func (m *Model) jump(msg tctx.JumpMsg) tea.Cmd {
	m.navFoc, m.help = false, false
	switch msg.Kind {
	case tctx.JumpRecord:
		return tea.Batch(m.switchTo(m.indexOf(m.records)), m.records.OpenRecord(msg.Module, msg.ID))
	case tctx.JumpKey:
		return tea.Batch(m.switchTo(m.indexOf(m.keys)), m.keys.OpenKey(msg.ID))
	}
	return nil
}

// keyMsg handles a key message. Several runes that arrived in one read ("jjj") are several
// keypresses unless a text field takes them, where they are typed (or pasted) text.
func (m *Model) keyMsg(msg tea.KeyMsg) tea.Cmd {
	if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Paste && m.prompt == nil && m.form == nil && !m.views[m.active].Capturing() {
		cmds := make([]tea.Cmd, 0, len(msg.Runes))
		for _, r := range msg.Runes {
			cmds = append(cmds, m.key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}, Alt: msg.Alt}))
		}
		return tea.Batch(cmds...)
	}
	return m.key(msg)
}

func (m *Model) key(msg tea.KeyMsg) tea.Cmd {
	g := m.ctx.Keys
	if msg.String() == "ctrl+c" {
		return tea.Quit
	}
	if m.prompt != nil {
		return m.updatePrompt(msg)
	}
	if m.form != nil {
		return m.form.Update(msg)
	}
	if m.help {
		if key.Matches(msg, g.Help) || msg.String() == "esc" || key.Matches(msg, g.Quit) {
			m.help = false
		}
		return nil
	}
	v := m.views[m.active]
	if v.Capturing() {
		return v.Update(msg)
	}
	switch {
	case key.Matches(msg, g.Quit):
		return tea.Quit
	case key.Matches(msg, g.Help):
		m.help = true
		return nil
	case key.Matches(msg, g.NextFocus), key.Matches(msg, g.PrevFocus):
		m.navFoc = !m.navFoc
		return nil
	case key.Matches(msg, g.Filter):
		if sv, ok := v.(views.Searcher); ok {
			return m.openPrompt("search", "search "+v.Title()+": "+sv.SearchHint(), sv.Query())
		}
		return m.openPrompt("filter", v.Title()+" filter (the rows on screen)", "")
	case key.Matches(msg, g.Jump):
		return m.openPrompt("jump", "jump to (owner O | key K | record ID)", "")
	case key.Matches(msg, g.Owner):
		return m.openPrompt("owner", "owner", m.ctx.Owner)
	case key.Matches(msg, g.Rules):
		return func() tea.Msg { return tctx.OpenFormMsg{Kind: "rules"} }
	case key.Matches(msg, g.ClockFwd):
		return m.moveClock(time.Hour)
	case key.Matches(msg, g.ClockBack):
		return m.moveClock(-time.Hour)
	case key.Matches(msg, g.ClockReset):
		if m.ctx.Clock != nil {
			m.ctx.Clock.Reset()
		}
		return tea.Batch(status("clock reset to the system time", false), m.broadcast(views.TickMsg{}))
	case msg.String() == "y":
		return m.copySelection()
	}
	if m.navFoc {
		switch msg.String() {
		case "up", "k":
			return m.switchTo((m.active + len(m.views) - 1) % len(m.views))
		case "down", "j":
			return m.switchTo((m.active + 1) % len(m.views))
		case "enter", "right", "l":
			m.navFoc = false
		}
		return nil
	}
	// Digits switch views directly (1-9, and 0 for the tenth), except a digit the focused view
	// has a key of its own for, shown in its footer: 1-3 inside an open record choose its pane,
	// 0 in Outbox clears the provider's failures.
	if i, ok := tctx.ViewIndex(msg.String()); ok && key.Matches(msg, m.ctx.Keys.Views) && i < len(m.views) && !ownsKey(v, msg) {
		return m.switchTo(i)
	}
	return v.Update(msg)
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

func (m *Model) copySelection() tea.Cmd {
	sel := m.views[m.active].Selection()
	if sel == "" {
		return status("nothing selected to copy", true)
	}
	if m.Clipboard != nil {
		_, _ = osc52.New(sel).WriteTo(m.Clipboard)
	}
	return status("copied "+cutText(sel, 60)+" (OSC 52)", false)
}

func cutText(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func (m *Model) openPrompt(kind, placeholder, value string) tea.Cmd {
	in := textinput.New()
	in.Prompt = map[string]string{"search": "/", "filter": "/", "jump": ":", "owner": "owner: "}[kind]
	in.Cursor.Style = m.ctx.Styles.Cursor
	in.Placeholder = placeholder
	in.SetValue(value)
	in.CharLimit = 300
	in.Width = m.width - 10
	in.Focus()
	m.prompt = &prompt{kind: kind, input: in}
	return textinput.Blink
}

func (m *Model) updatePrompt(msg tea.KeyMsg) tea.Cmd {
	p := m.prompt
	switch msg.Type {
	case tea.KeyEsc:
		m.prompt = nil
		switch p.kind {
		case "filter":
			m.views[m.active].SetFilter("")
		case "search":
			// esc leaves search: every row again.
			if sv, ok := m.views[m.active].(views.Searcher); ok && sv.Query() != "" {
				return sv.Search("")
			}
		}
		return nil
	case tea.KeyEnter:
		m.prompt = nil
		return m.submitPrompt(p.kind, strings.TrimSpace(p.input.Value()))
	}
	before := p.input.Value()
	var cmd tea.Cmd
	p.input, cmd = p.input.Update(msg)
	switch {
	case p.kind == "filter":
		m.views[m.active].SetFilter(p.input.Value())
	case p.kind == "search" && p.input.Value() != before:
		p.seq++
		seq := p.seq
		cmd = tea.Batch(cmd, tea.Tick(searchDebounce, func(time.Time) tea.Msg { return searchTickMsg{seq: seq} }))
	}
	return cmd
}

func (m *Model) submitPrompt(kind, value string) tea.Cmd {
	switch kind {
	case "filter":
		m.views[m.active].SetFilter(value)
		return nil
	case "search":
		// enter keeps what typing already searched; it searches only what was not yet asked.
		if sv, ok := m.views[m.active].(views.Searcher); ok && sv.Query() != value {
			return sv.Search(value)
		}
		return nil
	case "owner":
		return m.setOwner(value)
	}
	// jump: "owner X", "key X", "record X", or a bare value (a ULID is a record, else a key).
	word, rest, _ := strings.Cut(value, " ")
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(word) {
	case "owner", "o":
		return m.setOwner(rest)
	case "key", "k":
		return m.jump(tctx.JumpMsg{Kind: tctx.JumpKey, ID: rest})
	case "record", "r":
		return m.jump(tctx.JumpMsg{Kind: tctx.JumpRecord, ID: rest})
	}
	if value == "" {
		return nil
	}
	if ulidRE.MatchString(value) {
		return m.jump(tctx.JumpMsg{Kind: tctx.JumpRecord, ID: value})
	}
	return m.jump(tctx.JumpMsg{Kind: tctx.JumpKey, ID: value})
}

func (m *Model) setOwner(owner string) tea.Cmd {
	if err := idem.ValidateOwner(owner); err != nil {
		return status("VALIDATION_FAILED: "+strings.TrimPrefix(err.Error(), "VALIDATION_FAILED: "), true)
	}
	m.ctx.Owner = owner
	return tea.Batch(status("owner is now "+owner, false), m.broadcast(tctx.OwnerChangedMsg{}))
}

func (m *Model) mouse(msg tea.MouseMsg) tea.Cmd {
	if m.form != nil || m.prompt != nil || m.help {
		return nil
	}
	y := msg.Y - 1 // below the header
	if msg.X < navWidth {
		if msg.Button == tea.MouseButtonLeft && msg.Action == tea.MouseActionPress && y >= 0 && y < len(m.views) {
			m.navFoc = false
			return m.switchTo(y)
		}
		if msg.Button == tea.MouseButtonWheelUp || msg.Button == tea.MouseButtonWheelDown {
			return nil
		}
		return nil
	}
	if y < 0 {
		return nil
	}
	msg.X -= navWidth
	msg.Y = y
	m.navFoc = false
	return m.views[m.active].Update(msg)
}

// View renders the screen.
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
	case m.help:
		body = lipgloss.Place(w, h, lipgloss.Center, lipgloss.Center, m.helpView(w-4))
	case m.form != nil:
		body = lipgloss.Place(w, h, lipgloss.Center, lipgloss.Center, m.form.View())
	default:
		body = m.views[m.active].View()
	}
	body = fit(body, w, h)
	main := lipgloss.JoinHorizontal(lipgloss.Top, m.navView(h), body)
	return fit(strings.Join([]string{m.headerView(), main, m.helpLine(), m.statusLine()}, "\n"), m.width, m.height)
}

func padRight(s string, w int) string {
	if n := ansi.StringWidth(s); n < w {
		return s + strings.Repeat(" ", w-n)
	}
	return s
}

// fit pads or clips a block to exactly w×h so the frame never shifts. Each line passes
// termsafe.Frame first: whatever a view let through, only styling reaches the terminal.
func fit(s string, w, h int) string {
	lines := strings.Split(termsafe.Frame(s), "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		if n := ansi.StringWidth(l); n > w {
			lines[i] = ansi.Truncate(l, w, "")
		} else if n < w {
			lines[i] = l + strings.Repeat(" ", w-n)
		}
	}
	for len(lines) < h {
		lines = append(lines, strings.Repeat(" ", w))
	}
	return strings.Join(lines, "\n")
}

func (m *Model) headerView() string {
	s := m.ctx.Styles
	c := m.ctx.Conn
	conn := c.Display
	if c.Database != "" {
		conn += " · db " + c.Database
	}
	parts := []string{s.HeaderTitle.Render("idemwork"), s.Subtle.Render(termsafe.Line(conn)), "owner " + s.Bold.Render(termsafe.Line(m.ctx.Owner))}
	if m.ctx.ReadOnly() {
		badge := "READ-ONLY"
		if r := c.ReadOnlyReason; r != "" && r != "read-only session" {
			badge += " · " + r
		}
		parts = append(parts, s.BadgeDanger.Render(badge))
	} else {
		parts = append(parts, s.Badge.Render("read-write"))
	}
	if m.ctx.Clock != nil && m.ctx.Clock.Offset() != 0 {
		parts = append(parts, s.BadgeWarn.Render("clock "+fmtOffset(m.ctx.Clock.Offset())))
	}
	if m.ctx.Kernel != nil {
		parts = append(parts, s.Subtle.Render(fmt.Sprintf("MEM-001 max %d", m.ctx.Kernel.Registry.Rules.Snapshot().MemMaxContentLength)))
	}
	parts = append(parts, s.Subtle.Render(m.ctx.Now().Local().Format("15:04:05")))
	sep := s.Subtle.Render(" │ ")
	// The connection gives way first on a narrow terminal: owner, mode and clock matter more.
	if over := ansi.StringWidth(" "+strings.Join(parts, sep)) - m.width; over > 0 {
		keep := ansi.StringWidth(conn) - over
		if keep < 8 {
			parts = append(parts[:1], parts[2:]...)
		} else {
			parts[1] = s.Subtle.Render(ansi.Truncate(conn, keep, "…"))
		}
	}
	return fit(" "+strings.Join(parts, sep), m.width, 1)
}

func fmtOffset(d time.Duration) string {
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return sign + d.Round(time.Second).String()
}

func (m *Model) navView(h int) string {
	s := m.ctx.Styles
	lines := make([]string, 0, h)
	for i, v := range m.views {
		// The active view is marked in the text too (NO_COLOR, plain captures): ">" when the view
		// has the keys, "»" when the navigator has them.
		// Each view is labelled with the digit that switches to it.
		digit := tctx.ViewDigit(i)
		label := fmt.Sprintf("  %s %s", digit, v.Title())
		st := s.NavItem
		if i == m.active {
			st = s.NavActive
			label = fmt.Sprintf("> %s %s", digit, v.Title())
			if m.navFoc {
				st = s.NavFocused
				label = fmt.Sprintf("» %s %s", digit, v.Title())
			}
		}
		// Truncate before styling: lipgloss would wrap a long label onto a second line.
		lines = append(lines, st.Render(padRight(ansi.Truncate(label, navWidth-3, "…"), navWidth-3)))
	}
	for len(lines) < h {
		lines = append(lines, strings.Repeat(" ", navWidth-1))
	}
	return s.Nav.Height(h).Render(strings.Join(lines[:h], "\n"))
}

func (m *Model) shortHelp() []key.Binding {
	if m.form != nil {
		return m.form.ShortHelp()
	}
	g := m.ctx.Keys
	return append(m.views[m.active].ShortHelp(), g.Filter, g.Jump, g.NextFocus, g.Help, g.Quit)
}

func renderBindings(s tctx.Styles, bs []key.Binding) string {
	var parts []string
	for _, b := range bs {
		if !b.Enabled() {
			continue
		}
		h := b.Help()
		parts = append(parts, s.HelpKey.Render(h.Key)+" "+s.HelpDesc.Render(h.Desc))
	}
	return strings.Join(parts, s.Subtle.Render(" · "))
}

func (m *Model) helpLine() string {
	if m.prompt != nil {
		return fit(" "+m.prompt.input.View(), m.width, 1)
	}
	return fit(" "+renderBindings(m.ctx.Styles, m.shortHelp()), m.width, 1)
}

func (m *Model) statusLine() string {
	s := m.ctx.Styles
	if m.statusText == "" {
		return fit(s.Subtle.Render(" ready"), m.width, 1)
	}
	st := s.Status
	if m.statusErr {
		st = s.StatusError
	}
	return fit(" "+st.Render(termsafe.Line(m.statusText)), m.width, 1)
}

func (m *Model) helpView(w int) string {
	s := m.ctx.Styles
	g := m.ctx.Keys
	v := m.views[m.active]
	var lines []string
	lines = append(lines, s.Title.Render("In "+v.Title()))
	for _, group := range v.FullHelp() {
		lines = append(lines, "  "+renderBindings(s, group))
	}
	lines = append(lines, "", s.Title.Render("Everywhere"))
	lines = append(lines, "  "+renderBindings(s, []key.Binding{g.Filter, g.Jump, g.Owner, g.Rules, g.NextFocus, g.Help, g.Quit}))
	lines = append(lines, "  "+renderBindings(s, []key.Binding{g.Views, key.NewBinding(key.WithKeys("y"), key.WithHelp("y", "copy selection (OSC 52)"))}))
	lines = append(lines, "  "+renderBindings(s, []key.Binding{g.ClockFwd, g.ClockBack, g.ClockReset}))
	lines = append(lines, "", s.Subtle.Render("jump: ':owner bob', ':key K', ':record ID', or a bare ULID/key · mouse: wheel scrolls, click selects"))
	lines = append(lines, s.Subtle.Render("? or esc closes this help"))
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, w, "…")
	}
	return s.Modal.Render(strings.Join(lines, "\n"))
}
