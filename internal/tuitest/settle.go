package tuitest

import (
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

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
		var msg tea.Msg
		switch fn := funcName(cmd); {
		case strings.HasSuffix(fn, "cursor.(*Model).BlinkCmd.func1"):
			return // a cursor blink: its message (a blink, or its cancellation) is dropped below
		case strings.HasSuffix(fn, "bubbletea.Tick.func1"):
			if fire, ok := tickFunc(cmd); ok {
				// The timer's message at once: a clock or refresh tick is dropped below, a
				// search's typing pause goes to update — what the timer would give, without
				// sleeping out its second (every Init holds one; the test's wall time was
				// mostly these waits).
				msg = fire(time.Now())
				break
			}
			fallthrough
		default:
			done := make(chan tea.Msg, 1)
			go func() { done <- cmd() }()
			select {
			case msg = <-done:
			case <-time.After(15 * time.Second):
				t.Fatalf("a command did not finish")
			}
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

// funcName is the name of the function behind cmd: a closure is named after the function that
// made it (bubbletea.Tick.func1).
func funcName(cmd tea.Cmd) string {
	if f := runtime.FuncForPC(reflect.ValueOf(cmd).Pointer()); f != nil {
		return f.Name()
	}
	return ""
}

// tickFunc is the fn a tea.Tick command calls when its timer fires. The command is a closure
// over the timer and fn, laid out as a function pointer, then the captured variables in the
// order the body uses them: {code, t *time.Timer, fn}. The word read as fn must point at a
// function whose code is known to the runtime, or ok is false and the command runs as it is.
func tickFunc(cmd tea.Cmd) (fn func(time.Time) tea.Msg, ok bool) {
	type tickClosure struct {
		_     uintptr // the code
		timer *time.Timer
		fn    func(time.Time) tea.Msg
	}
	c := *(**tickClosure)(unsafe.Pointer(&cmd))
	if c == nil || c.fn == nil || c.timer == nil {
		return nil, false
	}
	if runtime.FuncForPC(**(**uintptr)(unsafe.Pointer(&c.fn))) == nil {
		return nil, false
	}
	return c.fn, true
}
