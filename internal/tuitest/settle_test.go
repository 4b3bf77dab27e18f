package tuitest_test

import (
	"testing"
	"time"

	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/tuitest"
)

type searchTickMsg struct{ seq int }
type clockTickMsg struct{}
type loadedMsg struct{}

// Settle gives a timer's message at once instead of sleeping it out: a search's typing pause
// reaches update, a clock tick is dropped, a cursor blink is dropped, and the commands around
// them run as before.
func TestSettleFiresTimersAtOnceAndDropsThePeriodicOnes(t *testing.T) {
	t.Parallel()
	in := textinput.New()
	var got []tea.Msg
	update := func(msg tea.Msg) tea.Cmd {
		got = append(got, msg)
		if _, ok := msg.(loadedMsg); ok {
			return in.Focus() // the cursor's blink
		}
		return nil
	}
	start := time.Now()
	tuitest.Settle(t, update, tea.Batch(
		tea.Tick(time.Hour, func(time.Time) tea.Msg { return clockTickMsg{} }),
		tea.Tick(time.Hour, func(time.Time) tea.Msg { return searchTickMsg{seq: 7} }),
		func() tea.Msg { return loadedMsg{} },
		textinput.Blink,
	))
	require.Less(t, time.Since(start), 10*time.Second, "no timer was waited out")
	require.Len(t, got, 2, "the clock tick and the blink dropped: %#v", got)
	require.Equal(t, searchTickMsg{seq: 7}, got[0], "the search's pause reaches update")
	require.Equal(t, loadedMsg{}, got[1])
}
