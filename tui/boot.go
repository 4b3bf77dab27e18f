package tui

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/tui/shared"
	"github.com/idemwork/idemwork/views"
)

// BootResult is what opening the database gave: the program context and the views' readers and
// writers, or why it failed.
type BootResult struct {
	Ctx     *shared.ProgramContext
	Backend views.Backend
	// Notice is what the user should know that did not stop the opening (demo data left
	// unseeded); the workbench opens with it in its status line.
	Notice string
	Err    error
}

// Boot is the program's first model. Creating or starting the embedded cluster takes seconds,
// so the terminal says what is being prepared from the very first frame ("creating the database
// cluster…") while the database opens elsewhere; then Boot hands over to the workbench.
type Boot struct {
	styles        shared.Styles
	keys          shared.GlobalKeys // q and ctrl+c quit while the database is prepared
	stage         string
	done          <-chan BootResult
	notice        string
	started       time.Time
	model         *Model
	err           error
	width, height int
	// Clipboard is handed to the workbench (see Model.Clipboard).
	Clipboard io.Writer
}

type bootDoneMsg BootResult

type bootTickMsg struct{}

// NewBoot shows stage until done delivers the program context.
func NewBoot(styles shared.Styles, stage string, done <-chan BootResult) *Boot {
	return &Boot{styles: styles, keys: shared.DefaultKeys().Global, stage: stage, done: done, started: time.Now()}
}

// Err is why the database could not be opened (nil when it was, or when the user quit first).
func (b *Boot) Err() error { return b.err }

// Notice is the opening's notice (BootResult.Notice), "" when there was none.
func (b *Boot) Notice() string { return b.notice }

// Workbench is the workbench once it took over (nil before).
func (b *Boot) Workbench() *Model { return b.model }

// Init waits for the database.
func (b *Boot) Init() tea.Cmd {
	done := b.done
	return tea.Batch(func() tea.Msg { return bootDoneMsg(<-done) }, bootTick())
}

func bootTick() tea.Cmd {
	return tea.Tick(200*time.Millisecond, func(time.Time) tea.Msg { return bootTickMsg{} })
}

// Update waits, then forwards everything to the workbench.
func (b *Boot) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	if b.model != nil {
		_, cmd := b.model.Update(msg)
		return b, cmd
	}
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		b.width, b.height = msg.Width, msg.Height
	case bootTickMsg:
		return b, bootTick()
	case tea.KeyMsg:
		if key.Matches(msg, b.keys.Quit, b.keys.ForceQuit) {
			return b, tea.Quit
		}
	case bootDoneMsg:
		if msg.Err != nil {
			b.err = msg.Err
			return b, tea.Quit
		}
		b.model = New(msg.Ctx, msg.Backend)
		b.model.Clipboard = b.Clipboard
		cmds := []tea.Cmd{b.model.Init()}
		if b.notice = msg.Notice; b.notice != "" {
			notice := shared.StatusMsg{Text: b.notice, Error: true}
			cmds = append(cmds, func() tea.Msg { return notice })
		}
		if b.width > 0 {
			_, cmd := b.model.Update(tea.WindowSizeMsg{Width: b.width, Height: b.height})
			cmds = append(cmds, cmd)
		}
		return b, tea.Batch(cmds...)
	}
	return b, nil
}

// View shows the stage and the time it has taken; before the terminal's size is known it is
// plain text, so the first frame already says it.
func (b *Boot) View() string {
	if b.model != nil {
		return b.model.View()
	}
	s := b.styles
	elapsed := time.Since(b.started).Truncate(100 * time.Millisecond)
	text := s.HeaderTitle.Render("idemwork") + " " + termsafe.Line(b.stage) + s.Subtle.Render(fmt.Sprintf(" (%s)", elapsed)) +
		"\n" + s.Subtle.Render("q or ctrl+c gives up")
	if b.width == 0 {
		return text
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = ansi.Truncate(l, b.width, "…")
	}
	return lipgloss.Place(b.width, b.height, lipgloss.Center, lipgloss.Center, strings.Join(lines, "\n"))
}
