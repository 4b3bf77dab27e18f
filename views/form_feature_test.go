package views_test

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/views"
)

func TestTheFeaturePickerNamesEachFeatureWithItsModeAndABlockedRunSaysBlocked(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	tuitest.SeedFixed(t, b)
	for _, w := range []int{63, 103} { // the form's room in an 80- and a 120-column terminal
		f := views.NewForm(b.Ctx, b.Backend.Form(), uictx.OpenFormMsg{Kind: "action", Module: "MEM-001", RecordID: tuitest.MemID})
		f.SetSize(w, 21)
		screen := ansi.Strip(f.View())
		require.Contains(t, screen, "F01 rewrite · internal", "at %d", w)
		require.Contains(t, screen, "F02 publish · direct_external → blocked", "each feature whole, with its mode, at %d", w)
		require.NotContains(t, screen, "→ bl…")

		f.Update(tea.KeyMsg{Type: tea.KeyRight})
		require.Contains(t, ansi.Strip(f.View()), "▸F02 publish", "the chosen feature is marked")
		var msgs []tea.Msg
		settleCollect(t, f.Update, f.Update(tea.KeyMsg{Type: tea.KeyCtrlS}), &msgs)
		screen = ansi.Strip(f.View())
		require.Contains(t, screen, "BLOCKED (outcome EXECUTED)", "a BLOCKED run says BLOCKED, at %d", w)
		require.Contains(t, strings.Join(strings.Fields(screen), " "), "BLOCKED: the feature would call a provider directly")
		var status string
		for _, m := range msgs {
			if s, ok := m.(uictx.StatusMsg); ok {
				status = s.Text
			}
		}
		require.True(t, strings.HasPrefix(status, "BLOCKED (outcome EXECUTED) MEM-001:record:"), "the status line too: %q", status)

	}
}

// settleCollect is settle that keeps the messages it saw.
func settleCollect(t *testing.T, update func(tea.Msg) tea.Cmd, cmd tea.Cmd, seen *[]tea.Msg) {
	t.Helper()
	for i := 0; cmd != nil && i < 20; i++ {
		msg := cmd()
		if batch, ok := msg.(tea.BatchMsg); ok {
			for _, c := range batch {
				settleCollect(t, update, c, seen)
			}
			return
		}
		*seen = append(*seen, msg)
		switch msg.(type) {
		case uictx.StatusMsg, uictx.DataChangedMsg, uictx.JumpMsg, nil:
			return
		}
		cmd = update(msg)
	}
}
