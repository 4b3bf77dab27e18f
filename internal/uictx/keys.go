package uictx

import "github.com/charmbracelet/bubbles/key"

// KeyMap is every key binding of the workbench, the shell's and each view's, in one value that
// the shell hands to every view (ProgramContext.Keys). The shell and the views match keys only
// through it (key.Matches), and the help overlay renders it, so a key is declared once, shown
// where it acts, and a test can find two bindings of one view that claim the same key.
type KeyMap struct {
	Global GlobalKeys
	Shell  ShellKeys
	List   ListKeys
	Pane   PaneKeys

	Records  RecordsKeys
	Keys     KeysKeys
	Timeline TimelineKeys
	Verify   VerifyKeys
	Storm    StormKeys
	Locks    LocksKeys
	Outbox   OutboxKeys
	Demo     DemoKeys
	Form     FormKeys
}

// GlobalKeys act in every view: the shell matches them before the focused view, so a view may
// not bind their keys (except Views: a digit the focused view binds in its footer is the
// view's, see the shell's routing).
type GlobalKeys struct {
	Quit, Help, Filter, Jump, NextFocus, PrevFocus, Owner, Rules, ClockFwd, ClockBack, ClockReset key.Binding
	// ForceQuit quits from anywhere, even while a field or a prompt takes the keys.
	ForceQuit key.Binding
	// Copy copies the focused view's selection to the terminal's clipboard (OSC 52); views show
	// it in their footers.
	Copy key.Binding
	// Views are the digits that switch views: 1-9 the first nine in navigator order, 0 the tenth
	// (ViewIndex).
	Views key.Binding
}

// ShellKeys act in one of the shell's modes: the navigator focused, a prompt open, the help
// shown.
type ShellKeys struct {
	NavUp, NavDown, NavLeave  key.Binding
	PromptCancel, PromptEnter key.Binding
	HelpClose                 key.Binding
}

// ListKeys move in a table or a pane and act on the selected row.
type ListKeys struct {
	Up, Down, PgUp, PgDown, Top, Bottom key.Binding
	Open, Back, Refresh                 key.Binding
	// ToKey opens the idempotency key of the selected row in Keys.
	ToKey key.Binding
	// ClearSearch leaves a kept search (the list shows every row again); shown while one is.
	ClearSearch key.Binding
}

// PaneKeys move between side-by-side panes; Page pages down within one.
type PaneKeys struct {
	Left, Right, Page key.Binding
}

// RecordsKeys are Records' own: the list's writes and an open record's panes.
type RecordsKeys struct {
	Module, Create, Patch, Action, Storm key.Binding
	Snapshot, Diff, History, Mark        key.Binding
}

// KeysKeys are Keys' own: an open key's export for a support ticket.
type KeysKeys struct{ Export key.Binding }

// TimelineKeys are Timeline's own.
type TimelineKeys struct{ Export key.Binding }

// VerifyKeys are Verify's own: a running check is cancelled.
type VerifyKeys struct{ Cancel key.Binding }

// StormKeys are Storm's own (its settings are edited with FormKeys, and saved with Save: only
// Fire fires).
type StormKeys struct{ Fire, Edit, Stop, Save key.Binding }

// LocksKeys are Locks' own.
type LocksKeys struct{ Pause, Idle key.Binding }

// OutboxKeys drive Outbox's worker and simulated provider.
type OutboxKeys struct{ Deliver, FailOne, FailSet, FailClear, Crash key.Binding }

// DemoKeys walk the demo.
type DemoKeys struct {
	Next, Reset, Blocked, Outbox, Compare key.Binding
	// PrevPart and NextPart move between the walk-throughs and the comparison.
	PrevPart, NextPart key.Binding
}

// FormKeys act in a write form and in Storm's settings.
type FormKeys struct {
	Submit, Resend, NewKey, Cancel, Next, Prev, ToRecord key.Binding
	// Enter moves to the next field, and on the last one submits.
	Enter key.Binding
	// ChoicePrev and ChoiceNext cycle a choice field (a module, an operation).
	ChoicePrev, ChoiceNext key.Binding
}

func bind(help string, desc string, keys ...string) key.Binding {
	return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
}

// DefaultKeys is the workbench's key map.
func DefaultKeys() KeyMap {
	return KeyMap{
		Global: GlobalKeys{
			Quit:       bind("q", "quit", "q"),
			ForceQuit:  bind("ctrl+c", "force quit", "ctrl+c"),
			Help:       bind("?", "help", "?"),
			Filter:     bind("/", "search", "/"),
			Jump:       bind(":", "jump", ":"),
			NextFocus:  bind("tab", "focus", "tab"),
			PrevFocus:  bind("shift+tab", "focus back", "shift+tab"),
			Owner:      bind("O", "owner", "O"),
			Rules:      bind("R", "module rules", "R"),
			ClockFwd:   bind("}", "clock +1h", "}"),
			ClockBack:  bind("{", "clock -1h", "{"),
			ClockReset: bind("=", "clock reset", "="),
			Copy:       bind("y", "copy", "y"),
			Views:      bind("1-9 0", "switch view (0 is the tenth)", "1", "2", "3", "4", "5", "6", "7", "8", "9", "0"),
		},
		Shell: ShellKeys{
			NavUp:        bind("↑/k", "previous view", "up", "k"),
			NavDown:      bind("↓/j", "next view", "down", "j"),
			NavLeave:     bind("enter/→", "into the view", "enter", "right", "l"),
			PromptCancel: bind("esc", "cancel", "esc"),
			PromptEnter:  bind("enter", "go", "enter"),
			HelpClose:    bind("esc", "close the help", "esc"),
		},
		List: ListKeys{
			Up:      bind("↑/k", "up", "up", "k"),
			Down:    bind("↓/j", "down", "down", "j"),
			PgUp:    bind("pgup", "page up", "pgup", "ctrl+u"),
			PgDown:  bind("pgdn", "page down", "pgdown", "ctrl+d"),
			Top:     bind("g", "top", "home", "g"),
			Bottom:  bind("G", "bottom", "end", "G"),
			Open:    bind("enter", "open", "enter"),
			Back:    bind("esc", "back", "esc", "backspace"),
			Refresh: bind("r", "refresh", "r"),
			ToKey:   bind("K", "open its key", "K"),
			// esc, as the search prompt's esc: the list shows every row again.
			ClearSearch: bind("esc", "clear the search", "esc"),
		},
		Pane: PaneKeys{
			Left:  bind("←/h", "pane left", "left", "h"),
			Right: bind("→/l", "pane right", "right", "l"),
			Page:  bind("space", "page down", " "),
		},
		Records: RecordsKeys{
			Module:   bind("m", "module filter", "m"),
			Create:   bind("c", "create", "c"),
			Patch:    bind("p", "patch", "p"),
			Action:   bind("a", "run feature", "a"),
			Storm:    bind("s", "storm this record", "s"),
			Snapshot: bind("1", "snapshot", "1"),
			Diff:     bind("2", "diff", "2"),
			History:  bind("3", "executions+audit", "3"),
			Mark:     bind("space", "mark diff base", " "),
		},
		Keys:     KeysKeys{Export: bind("x", "export for a ticket (Markdown)", "x")},
		Timeline: TimelineKeys{Export: bind("x", "export to a CSV file", "x")},
		Verify:   VerifyKeys{Cancel: bind("ctrl+x", "cancel the check", "ctrl+x")},
		Storm: StormKeys{
			Fire: bind("f", "fire", "f"),
			Edit: bind("e", "edit settings and body", "e"),
			Stop: bind("ctrl+x", "stop", "ctrl+x"),
			Save: bind("ctrl+s", "save the settings (f fires)", "ctrl+s"),
		},
		Locks: LocksKeys{
			Pause: bind("p", "pause/resume", "p"),
			Idle:  bind("i", "show/hide idle sessions", "i"),
		},
		Outbox: OutboxKeys{
			Deliver:   bind("d", "deliver due", "d"),
			FailOne:   bind("f", "+1 failure", "f"),
			FailSet:   bind("F", "set failures", "F"),
			FailClear: bind("0", "no failures", "0"),
			Crash:     bind("c", "crash switch", "c"),
		},
		Demo: DemoKeys{
			Next:     bind("n/enter", "next step", "n", "enter"),
			Reset:    bind("x", "restart this walk-through", "x"),
			Blocked:  bind("b", "blocked_external", "b"),
			Outbox:   bind("o", "the outbox instead", "o"),
			Compare:  bind("c", "side by side", "c"),
			PrevPart: bind("←", "previous part", "left"),
			NextPart: bind("→", "next part", "right"),
		},
		Form: FormKeys{
			Submit:     bind("ctrl+s", "submit", "ctrl+s"),
			Resend:     bind("ctrl+r", "send again (same key)", "ctrl+r"),
			NewKey:     bind("ctrl+n", "fresh key", "ctrl+n"),
			Cancel:     bind("esc", "close", "esc"),
			Enter:      bind("enter", "next field; submit on the last", "enter"),
			Next:       bind("tab/↓", "next field", "tab", "down"),
			Prev:       bind("shift+tab/↑", "previous field", "shift+tab", "up"),
			ChoicePrev: bind("←", "previous choice", "left"),
			ChoiceNext: bind("→/space", "next choice", "right", " "),
			ToRecord:   bind("ctrl+o", "open the record", "ctrl+o"),
		},
	}
}

// ViewIndex is the navigator position a digit switches to: 1-9 the first nine, 0 the tenth.
func ViewIndex(k string) (int, bool) {
	if len(k) != 1 || k[0] < '0' || k[0] > '9' {
		return 0, false
	}
	if k[0] == '0' {
		return 9, true
	}
	return int(k[0] - '1'), true
}

// ViewDigit is the digit that switches to navigator position i ("" past the tenth).
func ViewDigit(i int) string {
	switch {
	case i >= 0 && i < 9:
		return string(rune('1' + i))
	case i == 9:
		return "0"
	}
	return ""
}
