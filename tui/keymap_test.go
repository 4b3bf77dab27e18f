package tui_test

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	kb "github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/tui"
	"github.com/idemwork/idemwork/views"
)

// keyState is a state of a view reached from the Records list by pressing keys (each settled),
// with the screen's view in that state.
type keyState struct {
	name string
	keys []string
}

// keyStates are the states with keys of their own: every view's first screen, an open record
// (its revisions, its content pane, its history), an open key, and Storm's settings.
func keyStates() []keyState {
	var states []keyState
	for i := 0; i < 10; i++ {
		d := uictx.ViewDigit(i)
		states = append(states, keyState{"view " + d, []string{d}})
	}
	return append(states,
		keyState{"an open record", []string{"1", "enter"}},
		keyState{"an open record's content", []string{"1", "enter", "right"}},
		keyState{"an open record's history", []string{"1", "enter", "3"}},
		keyState{"an open key", []string{"2", "enter"}},
		keyState{"Storm's settings", []string{"6", "e"}},
		keyState{"a kept search", []string{"1", "/", "G", "enter"}},
	)
}

// seeded is a database holding tuitest.SeedFixed's rows, for the states of one test: each state
// gets a workbench of its own over it (reaching a state only reads), not a database of its own.
func seeded(t *testing.T) *testdb.DB {
	t.Helper()
	b := tuitest.New(t)
	tuitest.SeedFixed(t, b)
	return b.DB
}

// enter brings a fresh model (a fresh workbench over db, seeded) into the state.
func enter(t *testing.T, db *testdb.DB, w, h int, st keyState) *tui.Model {
	t.Helper()
	b := tuitest.NewOver(db)
	m := tui.New(b.Ctx, b.Backend)
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	settleModel(t, m, m.Init())
	for _, k := range st.keys {
		settleModel(t, m, cmdOf(m.Update(key(k))))
	}
	return m
}

func flatten(groups [][]kb.Binding) []kb.Binding {
	var out []kb.Binding
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func sameBinding(a, b kb.Binding) bool {
	return slices.Equal(a.Keys(), b.Keys()) && a.Help() == b.Help()
}

// collisions names every key two different bindings claim among those active at once.
func collisions(active []kb.Binding) []string {
	var out []string
	owner := map[string]kb.Binding{}
	for _, b := range active {
		if !b.Enabled() {
			continue
		}
		for _, k := range b.Keys() {
			if o, ok := owner[k]; ok && !sameBinding(o, b) {
				out = append(out, fmt.Sprintf("%q is both %q (%s) and %q (%s)", k, o.Help().Key, o.Help().Desc, b.Help().Key, b.Help().Desc))
			}
			owner[k] = b
		}
	}
	return out
}

// activeKeys are the bindings that act at once in the view's state: the shell's global keys,
// which it matches before the view (all but the digits, which yield to a digit the view shows
// in its footer), and the view's own; while the view takes the keys for a field, only ctrl+c
// stays the shell's.
func activeKeys(km uictx.KeyMap, v views.View) []kb.Binding {
	g := km.Global
	shell := []kb.Binding{g.ForceQuit}
	if !v.Capturing() {
		shell = append(shell, g.Quit, g.Help, g.Filter, g.Jump, g.NextFocus, g.PrevFocus, g.Owner, g.Rules,
			g.ClockFwd, g.ClockBack, g.ClockReset, g.Copy)
	}
	return append(shell, append(v.ShortHelp(), flatten(v.FullHelp())...)...)
}

// shadowedDigits names the view's bindings on a digit that the shell would take to switch
// views: a view owns a digit only by showing it in its footer.
func shadowedDigits(km uictx.KeyMap, v views.View) []string {
	if v.Capturing() {
		return nil
	}
	var out []string
	for _, b := range flatten(v.FullHelp()) {
		for _, k := range b.Keys() {
			msg := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
			if kb.Matches(msg, km.Global.Views) && !slices.ContainsFunc(v.ShortHelp(), func(f kb.Binding) bool { return kb.Matches(msg, f) }) {
				out = append(out, fmt.Sprintf("%q (%s) switches views instead: it is not in the footer", k, b.Help().Desc))
			}
		}
	}
	return out
}

func TestNoTwoKeysActiveInOneViewCollide(t *testing.T) {
	t.Parallel()
	km := uictx.DefaultKeys()
	db := seeded(t)
	for _, st := range keyStates() {
		m := enter(t, db, 120, 40, st)
		v := m.Active()
		at := st.name + " (" + v.Title() + ")"
		require.Empty(t, collisions(activeKeys(km, v)), "%s: two bindings claim one key", at)
		require.Empty(t, shadowedDigits(km, v), at)
	}
}

// The check itself: a view binding that reuses a global key, or two of a view's bindings on one
// key, or a digit kept out of the footer, are found.
func TestTheCollisionCheckFindsAKeyClaimedTwice(t *testing.T) {
	t.Parallel()
	km := uictx.DefaultKeys()
	ref := kb.NewBinding(kb.WithKeys("R"), kb.WithHelp("R", "reload"))
	require.Len(t, collisions([]kb.Binding{km.Global.Rules, ref}), 1, "R is the rules form everywhere")
	require.Len(t, collisions([]kb.Binding{km.Records.Module, kb.NewBinding(kb.WithKeys("m"), kb.WithHelp("m", "mark"))}), 1)
	require.Empty(t, collisions([]kb.Binding{km.Global.Copy, km.Global.Copy}), "one binding shown twice is one action")
	require.Empty(t, collisions([]kb.Binding{km.Records.Mark, kb.NewBinding(kb.WithKeys(" "), kb.WithHelp("space", "page"), kb.WithDisabled())}),
		"a disabled binding does not act")
}

// helpShows reports whether the screen shows the binding as the help lays it out: its key, then
// (after the padding of a column, or one space) its description, on one line.
func helpShows(screen string, b kb.Binding) bool {
	h := b.Help()
	re := regexp.MustCompile(`(^|[\s│·])` + regexp.QuoteMeta(h.Key) + ` +` + regexp.QuoteMeta(h.Desc) + `($|[\s│·])`)
	for _, l := range strings.Split(screen, "\n") {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

func TestTheHelpShowsEveryKeyOfTheFocusedViewAndTheGlobalKeys(t *testing.T) {
	t.Parallel()
	km := uictx.DefaultKeys()
	var global []kb.Binding
	gv := reflect.ValueOf(km.Global)
	for i := 0; i < gv.NumField(); i++ {
		global = append(global, gv.Field(i).Interface().(kb.Binding))
	}
	global = append(global, km.Shell.NavUp, km.Shell.NavDown, km.Shell.NavLeave)
	db := seeded(t)
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		for _, st := range keyStates() {
			m := enter(t, db, size[0], size[1], st)
			v := m.Active()
			if v.Capturing() {
				continue // ? is typed into the field
			}
			at := fmt.Sprintf("%s (%s) at %dx%d", st.name, v.Title(), size[0], size[1])
			m.Update(key("?"))
			screen := ansi.Strip(m.View())
			require.Contains(t, screen, "In "+v.Title(), at)
			for _, b := range append(flatten(v.FullHelp()), global...) {
				require.True(t, helpShows(screen, b), "%s: the help shows %q %q:\n%s", at, b.Help().Key, b.Help().Desc, screen)
			}
			m.Update(key("esc"))
			require.NotContains(t, ansi.Strip(m.View()), "Everywhere", "%s: esc closes the help", at)
		}
	}
}

// Every binding of the key map is shown somewhere: in a view's footer or help, the global and
// navigator keys of the help, or a write form's footer; ctrl+o (open the record written) is on
// the form's line after a write, enter and shift+tab in a field are what every form does, and
// the prompt's enter and esc and the help's own esc are said in words.
func TestEveryBindingOfTheKeyMapIsShownWhereItActs(t *testing.T) {
	t.Parallel()
	km := uictx.DefaultKeys()
	var shown []kb.Binding
	db := seeded(t)
	for _, st := range keyStates() {
		v := enter(t, db, 120, 40, st).Active()
		shown = append(shown, v.ShortHelp()...)
		if !v.Capturing() { // while a field takes the keys, ? is typed: only the footer shows
			shown = append(shown, flatten(v.FullHelp())...)
		}
	}
	// A write form's footer, and its line after a write (ctrl+o opens the record written).
	m, _ := newModel(t, 120, 40)
	settleModel(t, m, cmdOf(m.Update(key("c"))))
	require.Contains(t, m.View(), "Create a record")
	shown = append(shown, m.FooterKeys()...)
	// ctrl+r is on the form's footer once something was sent.
	shown = append(shown, km.Form.ToRecord, km.Form.Enter, km.Form.Prev, km.Form.Resend)
	shown = append(shown, km.Shell.NavUp, km.Shell.NavDown, km.Shell.NavLeave, km.Shell.PromptCancel, km.Shell.PromptEnter, km.Shell.HelpClose)
	gv := reflect.ValueOf(km.Global)
	for i := 0; i < gv.NumField(); i++ {
		shown = append(shown, gv.Field(i).Interface().(kb.Binding))
	}
	var walk func(path string, v reflect.Value)
	walk = func(path string, v reflect.Value) {
		if b, ok := v.Interface().(kb.Binding); ok {
			require.True(t, b.Enabled() && b.Help().Key != "" && b.Help().Desc != "", "%s has keys and help", path)
			require.True(t, slices.ContainsFunc(shown, func(s kb.Binding) bool { return sameBinding(s, b) }), "%s (%q %q) is shown nowhere", path, b.Help().Key, b.Help().Desc)
			return
		}
		for i := 0; i < v.NumField(); i++ {
			walk(path+"."+v.Type().Field(i).Name, v.Field(i))
		}
	}
	walk("KeyMap", reflect.ValueOf(km))
}
