package tui

import (
	"regexp"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/views"
)

// promptKind is what a prompt asks for.
type promptKind string

// Prompts.
const (
	promptSearch promptKind = "search" // the view searches the database as typing pauses
	promptFilter promptKind = "filter" // the rows on screen, as typed
	promptJump   promptKind = "jump"   // a record, a key or an owner
	promptOwner  promptKind = "owner"
)

// prompt is the footer's one-line field: /, : and O open it, enter submits it, esc cancels it.
type prompt struct {
	kind  promptKind
	input textinput.Model
	// seq numbers the search prompt's edits: a search runs when typing pauses, for the latest
	// edit only.
	seq int
}

// searchDebounce is how long typing must pause before the search runs.
const searchDebounce = 150 * time.Millisecond

// searchTickMsg runs the search for edit seq of the prompt, if it is still the latest.
type searchTickMsg struct{ seq int }

var ulidRE = regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{26}$`)

func (m *Model) openPrompt(kind promptKind, placeholder, value string) tea.Cmd {
	in := textinput.New()
	in.Prompt = map[promptKind]string{promptSearch: "/", promptFilter: "/", promptJump: ":", promptOwner: "owner: "}[kind]
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
	k := m.ctx.Keys.Shell
	switch {
	case key.Matches(msg, k.PromptCancel):
		m.prompt = nil
		switch p.kind {
		case promptFilter:
			m.setFilter("")
		case promptSearch:
			// esc leaves search: every row again.
			if sv, ok := m.views[m.active].(views.Searcher); ok && sv.Query() != "" {
				return sv.Search("")
			}
		}
		return nil
	case key.Matches(msg, k.PromptEnter):
		m.prompt = nil
		return m.submitPrompt(p.kind, strings.TrimSpace(p.input.Value()))
	}
	before := p.input.Value()
	var cmd tea.Cmd
	p.input, cmd = p.input.Update(msg)
	switch {
	case p.kind == promptFilter:
		m.setFilter(p.input.Value())
	case p.kind == promptSearch && p.input.Value() != before:
		p.seq++
		seq := p.seq
		cmd = tea.Batch(cmd, tea.Tick(searchDebounce, func(time.Time) tea.Msg { return searchTickMsg{seq: seq} }))
	}
	return cmd
}

// searchTick runs the search typing paused on, unless a later edit came since.
func (m *Model) searchTick(msg searchTickMsg) tea.Cmd {
	if p := m.prompt; p != nil && p.kind == promptSearch && msg.seq == p.seq {
		if sv, ok := m.views[m.active].(views.Searcher); ok {
			return sv.Search(strings.TrimSpace(p.input.Value()))
		}
	}
	return nil
}

func (m *Model) submitPrompt(kind promptKind, value string) tea.Cmd {
	switch kind {
	case promptFilter:
		m.setFilter(value)
		return nil
	case promptSearch:
		// enter keeps what typing already searched; it searches only what was not yet asked.
		if sv, ok := m.views[m.active].(views.Searcher); ok && sv.Query() != value {
			return sv.Search(value)
		}
		return nil
	case promptOwner:
		return m.setOwner(value)
	}
	// jump: "owner X", "key X", "record X", or a bare value (a ULID is a record, else a key).
	word, rest, _ := strings.Cut(value, " ")
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(word) {
	case "owner", "o":
		return m.setOwner(rest)
	case "key", "k":
		return m.jump(uictx.JumpMsg{Kind: uictx.JumpKey, ID: rest})
	case "record", "r":
		return m.jump(uictx.JumpMsg{Kind: uictx.JumpRecord, ID: rest})
	}
	if value == "" {
		return nil
	}
	if ulidRE.MatchString(value) {
		return m.jump(uictx.JumpMsg{Kind: uictx.JumpRecord, ID: value})
	}
	return m.jump(uictx.JumpMsg{Kind: uictx.JumpKey, ID: value})
}

func (m *Model) setOwner(owner string) tea.Cmd {
	if err := idemtype.ValidateOwner(owner); err != nil {
		return status("VALIDATION_FAILED: "+strings.TrimPrefix(err.Error(), "VALIDATION_FAILED: "), true)
	}
	m.ctx.Owner = owner
	return tea.Batch(status("owner is now "+owner, false), m.broadcast(uictx.OwnerChangedMsg{}))
}

// setFilter narrows the active view's rows, when it is a Filterer (only those open the filter
// prompt).
func (m *Model) setFilter(s string) {
	if f, ok := m.views[m.active].(views.Filterer); ok {
		f.SetFilter(s)
	}
}
