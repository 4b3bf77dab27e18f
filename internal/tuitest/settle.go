package tuitest

import (
	"reflect"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// Settle runs cmd the way Bubble Tea would — batches fan out, sequences run in order, each
// message goes back to update — but drops timer messages (ticks, cursor blinks) so the chain
// ends. A search's typing pause
// is not dropped: it runs at once. A chain deeper than 12 messages is cut (see Drain).
func Settle(t testing.TB, update func(tea.Msg) tea.Cmd, cmd tea.Cmd) {
	t.Helper()
	settle(t, update, cmd, 12)
}

// Drain is Settle to the end of every chain, however long — a storm's events, one message per
// batch, until it is done — within a minute.
func Drain(t testing.TB, update func(tea.Msg) tea.Cmd, cmd tea.Cmd) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	settle(t, func(msg tea.Msg) tea.Cmd {
		if time.Now().After(deadline) {
			t.Fatalf("the commands did not end within a minute (last message %T)", msg)
		}
		return update(msg)
	}, cmd, -1)
}

func settle(t testing.TB, update func(tea.Msg) tea.Cmd, cmd tea.Cmd, depth int) {
	t.Helper()
	var run func(cmd tea.Cmd, depth int)
	run = func(cmd tea.Cmd, depth int) {
		if cmd == nil || depth == 0 {
			return
		}
		done := make(chan tea.Msg, 1)
		go func() { done <- cmd() }()
		var msg tea.Msg
		select {
		case msg = <-done:
		case <-time.After(15 * time.Second):
			t.Fatalf("a command did not finish")
		}
		if batch, ok := msg.(tea.BatchMsg); ok {
			for _, c := range batch {
				run(c, depth)
			}
			return
		}
		// tea.Sequence's message is unexported: a slice of commands, run in order.
		if rv := reflect.ValueOf(msg); rv.Kind() == reflect.Slice && rv.Type().Elem() == reflect.TypeOf(tea.Cmd(nil)) {
			for i := 0; i < rv.Len(); i++ {
				run(rv.Index(i).Interface().(tea.Cmd), depth)
			}
			return
		}
		if msg == nil {
			return
		}
		name := strings.ToLower(reflect.TypeOf(msg).String())
		if (strings.Contains(name, "tick") && !strings.Contains(name, "search")) || strings.Contains(name, "blink") {
			return
		}
		run(update(msg), depth-1)
	}
	run(cmd, depth)
}

// Updater adapts a tea.Model's Update to Settle.
func Updater(m tea.Model) func(tea.Msg) tea.Cmd {
	return func(msg tea.Msg) tea.Cmd {
		_, cmd := m.Update(msg)
		return cmd
	}
}
