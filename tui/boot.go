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

// BootResult is what opening the database gave: the program context and the views' readers and
// writers, or why it failed.
type BootResult struct {
	Ctx     *uictx.ProgramContext
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
	styles        uictx.Styles
	keys          uictx.GlobalKeys // q and ctrl+c quit while the database is prepared
	stage         string
	done          <-chan BootResult
	notice        string
	started       time.Time
	model         *Model
	err           error
	width, height int
	// Clipboard is handed to the workbench (see Model.Clipboard).
	Clipboard Clipboard
}

type bootDoneMsg BootResult

type bootTickMsg struct{}

// NewBoot shows stage until done delivers the program context.
func NewBoot(styles uictx.Styles, stage string, done <-chan BootResult) *Boot {
	return &Boot{styles: styles, keys: uictx.DefaultKeys().Global, stage: stage, done: done, started: time.Now()}
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
			notice := uictx.StatusMsg{Text: b.notice, Error: true}
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
	counter := fmt.Sprintf("(%s)", elapsed)
	stage := "idemwork " + termsafe.Line(b.stage)
	if b.width == 0 {
		return s.HeaderTitle.Render("idemwork") + stage[len("idemwork"):] + " " + s.Subtle.Render(counter) + "\n" + s.Subtle.Render("q or ctrl+c gives up")
	}
	// The stage wraps at its spaces (a long data dir at 80 columns) and the counter follows it,
	// on the last line or a line of its own: it is how a person sees the start is not stuck.
	w := max(b.width-2, 10)
	var lines []string
	line := ""
	for _, word := range strings.Fields(stage) {
		switch {
		case line == "":
			line = word
		case ansi.StringWidth(line)+1+ansi.StringWidth(word) <= w:
			line += " " + word
		default:
			lines, line = append(lines, line), word
		}
	}
	if ansi.StringWidth(line)+1+len(counter) <= w {
		lines = append(lines, line+" "+s.Subtle.Render(counter))
	} else {
		lines = append(lines, line, s.Subtle.Render(counter))
	}
	for i, l := range lines {
		if i == 0 {
			l = s.HeaderTitle.Render("idemwork") + strings.TrimPrefix(l, "idemwork")
		}
		lines[i] = ansi.Truncate(l, w, "…")
	}
	lines = append(lines, s.Subtle.Render("q or ctrl+c gives up"))
	return lipgloss.Place(b.width, b.height, lipgloss.Center, lipgloss.Center, strings.Join(lines, "\n"))
}
