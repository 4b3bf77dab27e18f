package tui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/storm/stormtypes"
	"github.com/idemwork/idemwork/tui"
	"github.com/idemwork/idemwork/views"
)

// The developer's and the demo giver's workflows of issue 23, each walked through the real shell
// over a real database (storms run by the real engine, in process), keys settled one by one (no
// sleeps), and each screen read for what it says — not for how it fits.

// press sends keys (named or typed text) to the shell, each drained to the end of what it set
// off (a storm to its verdict).
func press(t *testing.T, m *tui.Model, keys ...string) {
	t.Helper()
	for _, k := range keys {
		tuitest.Drain(t, tuitest.Updater(m), cmdOf(m.Update(namedKey(k))))
	}
}

func namedKey(s string) tea.KeyMsg {
	switch s {
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "ctrl+s":
		return tea.KeyMsg{Type: tea.KeyCtrlS}
	case "ctrl+r":
		return tea.KeyMsg{Type: tea.KeyCtrlR}
	case "ctrl+u":
		return tea.KeyMsg{Type: tea.KeyCtrlU}
	case "space":
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
	case "right":
		return tea.KeyMsg{Type: tea.KeyRight}
	case "end":
		return tea.KeyMsg{Type: tea.KeyEnd}
	}
	return key(s)
}

// typeText types s into the field that has the keys, one rune at a time.
func typeText(t *testing.T, m *tui.Model, s string) {
	t.Helper()
	for _, r := range s {
		settleModel(t, m, cmdOf(m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})))
	}
}

// screenText is the screen without styles, its lines' right padding gone.
func screenText(m *tui.Model) string {
	lines := strings.Split(ansi.Strip(m.View()), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// flat is a screen's text with its line breaks and runs of spaces as one space, to read wrapped
// sentences whole (the frame's │ borders and the navigator removed first).
func flat(screen string) string {
	var body []string
	for _, l := range strings.Split(screen, "\n") {
		if i := strings.Index(l, "│"); i >= 0 {
			l = l[i+len("│"):]
		}
		body = append(body, strings.Trim(l, "│ "))
	}
	return strings.Join(strings.Fields(strings.Join(body, " ")), " ")
}

// counted wraps the session's storm runner, counting the storms and keeping their specs.
type counted struct {
	mu    sync.Mutex
	specs []stormtypes.Spec
	run   views.StormRunner
}

func (c *counted) Run(ctx context.Context, spec stormtypes.Spec, events chan<- stormtypes.Event, locks chan<- stormtypes.LockSample) (stormtypes.Summary, error) {
	c.mu.Lock()
	c.specs = append(c.specs, spec)
	c.mu.Unlock()
	return c.run(ctx, spec, events, locks)
}

func (c *counted) fired() []stormtypes.Spec {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]stormtypes.Spec(nil), c.specs...)
}

// workbench is the shell over a fresh database at w×h, its storms counted.
func workbench(t *testing.T, w, h int) (*tui.Model, tuitest.Bundle, *counted) {
	t.Helper()
	b := tuitest.New(t)
	c := &counted{run: b.Backend.Storm}
	b.Backend.Storm = c.Run
	m := tui.New(b.Ctx, b.Backend)
	m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	settleModel(t, m, m.Init())
	return m, b, c
}

// Item 1: a create made in the form (summary empty, payload {}) is stormed under its key: 200
// requests, REPLAYED or JOINED, never IDEMPOTENCY_KEY_REUSED; and the CLI's create with the same
// flags as the form's command line replays it too.
func TestACreateMadeInTheFormStormsAndReplaysFromTheCLI(t *testing.T) {
	t.Parallel()
	m, b, runs := workbench(t, 120, 40)
	press(t, m, "c", "tab", "ctrl+u")
	typeText(t, m, "form-key-1")
	press(t, m, "tab")
	typeText(t, m, "form record")
	press(t, m, "ctrl+s")
	screen := screenText(m)
	require.Contains(t, screen, "EXECUTED NOTE:record:create")
	require.Contains(t, flat(screen), "the same request from a shell: idemwork create --owner alice --module NOTE --key form-key-1 --title 'form record'")

	press(t, m, "esc", "6", "e", "down", "down", "ctrl+u") // past the Module, NOTE as the form's
	typeText(t, m, "form-key-1")
	press(t, m, "down", "ctrl+u")
	typeText(t, m, "form record")
	press(t, m, "down", "down", "down", "ctrl+u")
	typeText(t, m, "200")
	press(t, m, "ctrl+s")
	require.Empty(t, runs.fired(), "ctrl+s saves the settings; it does not fire")
	press(t, m, "f")
	screen = screenText(m)
	require.Len(t, runs.fired(), 1)
	require.Contains(t, screen, "storm #1 fired 12:00:00 · create NOTE of alice · key form-key-1")
	require.Contains(t, screen, "200/200 answered")
	require.Regexp(t, `(REPLAYED|JOINED) \d+`, screen)
	require.NotContains(t, screen, "KEY_REUSED")
	require.NotContains(t, screen, "EXECUTED 1", "the form executed it; the storm only replays")
	require.Contains(t, screen, "verdict  ✓ agrees")

	// `idemwork create --owner alice --module NOTE --key form-key-1 --title 'form record'`.
	res, err := b.Kernel.Create(context.Background(), model.NewCreate("alice", kernel.ModuleNote, "form-key-1", "form record", nil, nil))
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, res.Outcome)
}

// fixedNote is the seeded NOTE record's row in Records (the list's second row, newest first).
func selectNote(t *testing.T, m *tui.Model) {
	t.Helper()
	press(t, m, "1", "G")
	require.Contains(t, selectedRow(t, m.View()), "Groceries")
}

// Item 2: the storm's target is one owner's record. Switched to another owner, the storm reads
// it again, says it fires at nothing of that owner, and f sends 0 requests; a record of the new
// owner, chosen in Records, is what it then fires at.
func TestAStormFiresAtTheNewOwnersRecordOrRefusesWithZeroRequests(t *testing.T) {
	t.Parallel()
	m, b, runs := workbench(t, 120, 40)
	tuitest.SeedFixed(t, b)
	press(t, m, "1", "r")
	selectNote(t, m)
	press(t, m, "s", "esc")
	require.Contains(t, screenText(m), "Replay storm · fires at alice's NOTE "+tuitest.NoteID+" (revision 2)")

	press(t, m, "O", "ctrl+u")
	typeText(t, m, "bob")
	press(t, m, "enter", "f")
	screen := flat(screenText(m))
	require.Contains(t, screen, "Replay storm · fires at nothing (why is below)")
	require.Contains(t, screen, "✗ RECORD_NOT_FOUND: owner bob has no NOTE record "+tuitest.NoteID+": a storm fires at nothing of another owner; in Records, s on one of bob's records")
	require.Contains(t, screen, "not fired, 0 requests sent: RECORD_NOT_FOUND", "the status line says so")
	require.Empty(t, runs.fired(), "0 requests to another owner")

	bobs, err := b.Kernel.Create(context.Background(), model.NewCreate("bob", kernel.ModuleNote, "bob-1", "bob's note", nil, nil))
	require.NoError(t, err)
	press(t, m, "1", "r", "g", "s", "esc")
	require.Contains(t, screenText(m), "fires at bob's NOTE "+bobs.Record.ID+" (revision 1)")
	press(t, m, "f")
	fired := runs.fired()
	require.Len(t, fired, 1)
	require.Equal(t, "bob", fired[0].Owner())
	require.Equal(t, bobs.Record.ID, fired[0].Patch.RecordID)
	require.Contains(t, screenText(m), "EXECUTED 1")
}

// Item 3: results are labelled with the key, operation and body they were fired with, apart
// from the next storm's settings, and the storms before are listed under their own labels.
func TestAStormsResultsKeepTheLabelTheyWereFiredWith(t *testing.T) {
	t.Parallel()
	m, b, _ := workbench(t, 120, 40)
	tuitest.SeedFixed(t, b)
	press(t, m, "1", "r")
	selectNote(t, m)
	press(t, m, "s", "esc", "f")
	first := screenText(m)
	require.Contains(t, first, "fires at alice's NOTE "+tuitest.NoteID+" (revision 3)", "the storm moved the record")
	key1 := regexpFind(t, `storm #1 fired 12:00:00 · patch NOTE …\d+ of alice · key (tui-\S+)`, first)
	require.Contains(t, first, "  body: expectRevision 2 · title (unchanged) · summary (unchanged) · payload (unchanged)")
	require.Contains(t, first, "body: expectRevision 3 ·", "the next storm's body, apart")
	require.NotContains(t, first, "next: patch · key "+key1, "the next patch goes under another key")

	press(t, m, "f")
	second := screenText(m)
	require.Contains(t, second, "  body: expectRevision 3 ·")
	require.Contains(t, second, "earlier storms:")
	require.Regexp(t, `#1 12:00:00 patch key `+key1+` · EXECUTED 1`, second)
}

func regexpFind(t *testing.T, re, s string) string {
	t.Helper()
	got := regexp.MustCompile(re).FindStringSubmatch(s)
	require.Len(t, got, 2, "%s in:\n%s", re, s)
	return got[1]
}

// focusedField is the Storm settings' focused field on screen ("" none).
func focusedField(screen string) string {
	for _, l := range strings.Split(screen, "\n") {
		_, after, ok := strings.Cut(l, "│▸ ")
		if !ok {
			continue
		}
		for _, f := range []string{"Operation", "Module", "Feature", "Idempotency-Key", "Title", "Summary", "Payload", "Input", "Expect revision",
			"Requests (N)", "Concurrency", "Processes", "Via", "Servers", "In-process sharing", "Fail the first attempt", "Hold the winner"} {
			if strings.HasPrefix(after, f) {
				return f
			}
		}
	}
	return ""
}

// Item 4: in the Storm's settings ctrl+s saves and only f fires; ↓ and tab leave every field,
// whatever the operation; a space typed into the key is shown as ␠, its error under the field.
func TestTheStormsKeysDoWhatItsFooterSays(t *testing.T) {
	t.Parallel()
	m, b, runs := workbench(t, 120, 40)
	tuitest.SeedFixed(t, b)
	press(t, m, "1", "r")
	selectNote(t, m)
	press(t, m, "s")
	require.Contains(t, m.FooterKeys()[0].Help().Desc, "save the settings")
	for _, op := range []string{"patch", "action", "create"} {
		focused := map[string]bool{}
		for i := 0; i < 18; i++ {
			before := focusedField(screenText(m))
			focused[before] = true
			press(t, m, []string{"down", "tab"}[i%2])
			require.NotEqual(t, before, focusedField(screenText(m)), "%s storm: %s is left by ↓/tab", op, before)
		}
		for _, f := range []string{"Operation", "Idempotency-Key", "Requests (N)", "Hold the winner"} {
			require.True(t, focused[f], "%s storm: ↓/tab reach %s: %v", op, f, focused)
		}
		switch op {
		case "patch":
			require.True(t, focused["Payload"] && focused["Summary"] && focused["Expect revision"], "patch: %v", focused)
		case "action":
			require.True(t, focused["Input"] && focused["Feature"], "action: %v", focused)
		case "create":
			require.True(t, focused["Module"] && focused["Title"] && focused["Summary"] && focused["Payload"], "create: %v", focused)
		}
		// The operation is the first field: → cycles it.
		for focusedField(screenText(m)) != "Operation" {
			press(t, m, "down")
		}
		press(t, m, "right")
	}
	press(t, m, "ctrl+s")
	require.Empty(t, runs.fired(), "ctrl+s saves")
	require.Contains(t, screenText(m), "settings saved · f fires 50 requests")

	press(t, m, "e", "down", "end", "space")
	screen := screenText(m)
	require.Contains(t, screen, "✗ byte 30 (0x20) is not visible ASCII")
	require.Regexp(t, `as typed: …?\S*␠`, screen, "the invisible space is shown")
	press(t, m, "esc", "f")
	require.Empty(t, runs.fired(), "a wrong key fires nothing")
	require.Equal(t, "Idempotency-Key", focusedField(screenText(m)), "the settings open on the wrong field, its error under it")
}

// Item 5: after a patch the form is filled from the new latest (and ctrl+r still replays the
// patch sent); the rules form's footer is its own, the focused navigator's too; a kept search
// is cleared with esc, as the footer says.
func TestFormsAndFootersStayTrueAfterEachAction(t *testing.T) {
	t.Parallel()
	m, b, _ := workbench(t, 120, 40)
	tuitest.SeedFixed(t, b)
	press(t, m, "1", "r")
	selectNote(t, m)
	press(t, m, "p")
	require.Contains(t, screenText(m), "prefilled from revision 2, the latest")
	press(t, m, "tab", "tab", "ctrl+u")
	typeText(t, m, "Groceries (Sunday)")
	press(t, m, "ctrl+s")
	screen := screenText(m)
	require.Contains(t, screen, "EXECUTED NOTE:record:"+tuitest.NoteID+":patch")
	require.Contains(t, screen, "prefilled from revision 3, the latest (your patch wrote it)")
	require.NotContains(t, screen, "revision 2, the latest")
	require.Contains(t, flat(screen), "Expect revision 3 > Title Groceries (Sunday)")
	press(t, m, "ctrl+r")
	require.Contains(t, screenText(m), "REPLAYED NOTE:record:"+tuitest.NoteID+":patch", "ctrl+r sends the patch that was sent")
	press(t, m, "esc", "R")
	var footer []string
	for _, b := range m.FooterKeys() {
		footer = append(footer, b.Help().Key)
	}
	require.Equal(t, []string{"ctrl+s", "esc"}, footer, "the rules form: no key to resend, no key to renew")
	press(t, m, "esc", "tab")
	nav := screenText(m)
	require.Contains(t, lastLines(nav, 2), "↑/k previous view · ↓/j next view · enter/→ into the view · tab back to the view")
	press(t, m, "tab", "1", "esc", "/")
	typeText(t, m, "Meeting")
	press(t, m, "enter")
	require.Contains(t, screenText(m), "1 match: title contains \"Meeting\"")
	require.Contains(t, lastLines(screenText(m), 2), "esc clear the search")
	press(t, m, "esc")
	require.Contains(t, screenText(m), "Records of alice · all modules · 2 loaded")
}

func lastLines(screen string, n int) string {
	lines := strings.Split(strings.TrimRight(screen, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Item 6: the Outbox's provider line reads the message's row, as the Demo does; a message
// prepended by a write keeps the selected one selected; an owner switch starts at the top.
func TestTheOutboxReadsTheRowAndKeepsItsSelection(t *testing.T) {
	t.Parallel()
	m, b, _ := workbench(t, 120, 40)
	ctx := context.Background()
	c, err := b.Kernel.Create(ctx, model.NewCreate("alice", kernel.ModuleCommitment, "c", "call the plumber", nil, json.RawMessage(`{"status":"OPEN"}`)))
	require.NoError(t, err)
	notify := func(key string) {
		_, err := b.Kernel.RunFeature(ctx, model.NewFeature("alice", kernel.ModuleCommitment, c.Record.ID, "F02", key, nil))
		require.NoError(t, err)
	}
	notify("n1")
	// Delivered by another worker than the session's (as the Demo's walk-through does).
	_, err = b.DB.Pool.Exec(ctx, `UPDATE outbox_message SET status = 'DELIVERED', attempts = 3 WHERE owner_id = 'alice'`)
	require.NoError(t, err)
	press(t, m, "8", "r")
	screen := flat(screenText(m))
	require.Contains(t, screen, "the row: 3 calls to provider notifier with idempotency id")
	require.Contains(t, screen, "DELIVERED")
	require.Contains(t, screen, "this session's simulated provider: 0 calls for it (3 of the row's were another worker's")
	require.NotContains(t, screen, "nothing delivered")
	first := selectedRow(t, m.View())

	notify("n2") // a newer message: the list's first row from now on
	settleModel(t, m, cmdOf(m.Update(uictx.DataChangedMsg{})))
	require.Contains(t, screenText(m), "2 loaded")
	require.Equal(t, first, selectedRow(t, m.View()), "the same message stays selected, one row down")

	press(t, m, "O", "ctrl+u")
	typeText(t, m, "bob")
	press(t, m, "enter")
	require.Contains(t, screenText(m), "Outbox of bob")
	require.NotContains(t, screenText(m), "DELIVERED", "nothing of alice's stays on screen")
}

// unreachable is a database that went away: every read fails as the workbench's readers fail
// when the cluster stops, noting it in the session's health; reads counts the reads asked for.
type unreachable struct {
	views.RecordReader
	down   *bool
	health *uictx.Health
	mu     *sync.Mutex
	reads  *int
}

func (u unreachable) Records(ctx context.Context, q model.RecordQuery) ([]model.Record, string, error) {
	u.mu.Lock()
	*u.reads++
	down := *u.down
	u.mu.Unlock()
	if down {
		u.health.Note(true, false)
		return nil, "", views.Unreachable(apperr.New(apperr.DatabaseUnavailable, "the connection to the database was lost"))
	}
	rows, next, err := u.RecordReader.Records(ctx, q)
	u.health.Note(false, err == nil)
	return rows, next, err
}

// Item 7: a database that stops empties nothing silently: the rows read stay (with the error
// and their time above them), the status line names the session's --data-dir and what to do,
// wrapped, for as long as it is down; one r reads every view again.
func TestAStoppedDatabaseIsSaidAndOneRReadsEveryViewAgain(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	tuitest.SeedFixed(t, b)
	down, reads, mu := false, 0, &sync.Mutex{}
	b.Backend.Records = unreachable{RecordReader: b.Backend.Records, down: &down, health: b.Ctx.Health, mu: mu, reads: &reads}
	m := tui.New(b.Ctx, b.Backend)
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	settleModel(t, m, m.Init())
	require.Contains(t, screenText(m), "Groceries")
	mu.Lock()
	down = true
	mu.Unlock()
	press(t, m, "r")
	screen := screenText(m)
	require.Contains(t, screen, "Groceries", "the rows read before stay")
	require.Contains(t, flat(screen), "✗ DATABASE_UNAVAILABLE: the database is not reachable (the status line says what to do) · rows as of 12:00:00")
	status := lastLines(screen, 3)
	require.Contains(t, flat(status), "DATABASE_UNAVAILABLE: the database is not reachable (stopped, or the connection dropped): start it with idemwork --data-dir /test/pg db start, or restart the workbench; r refreshes every view")
	require.NotContains(t, status, "…", "wrapped, not cut")
	require.NotContains(t, screen, " ready")

	mu.Lock()
	down, reads = false, 0
	mu.Unlock()
	press(t, m, "5", "r") // in Timeline: one r
	mu.Lock()
	require.Equal(t, 1, reads, "Records was read again too, once")
	mu.Unlock()
	screen = screenText(m)
	require.Contains(t, screen, "the database answers again: every view was read again")
	press(t, m, "1")
	require.NotContains(t, screenText(m), "DATABASE_UNAVAILABLE")
}

// copied is a clipboard that keeps what it was given and says the terminal did not confirm it.
type copied struct{ got []string }

func (c *copied) Copy(text string) (string, error) {
	c.got = append(c.got, text)
	return "this terminal does not answer OSC 52, so the copy cannot be confirmed; saved to /tmp/x/copied.txt", nil
}

// Item 8: a read-only session's footer offers no write; y says where the copy went, never a
// copy it cannot confirm; G in Timeline, Audit and Keys reaches the last row in one reversed
// page; "1 revision", "1 audit event".
func TestReachTheEndCopyTrulyAndOfferOnlyWhatActs(t *testing.T) {
	t.Parallel()
	m, b, _ := workbench(t, 120, 40)
	tuitest.SeedFixed(t, b)
	ctx := context.Background()
	// 250 audit events and keys older than the fixed ones: three pages and a half.
	_, err := b.DB.Pool.Exec(ctx, `
INSERT INTO audit_event (owner_id, id, module_code, action, idempotency_key, at)
SELECT 'alice', 'old-' || lpad(i::text, 4, '0'), 'NOTE', 'RECORD_PATCHED', 'old-key-' || lpad(i::text, 4, '0'),
  '2026-11-01T00:00:00Z'::timestamptz + i * interval '1 minute' FROM generate_series(1, 250) i;
INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
SELECT 'alice', 'old-key-' || lpad(i::text, 4, '0'), 'NOTE:record:create', 'f', 'SUCCEEDED', '{}',
  '2026-11-01T00:00:00Z'::timestamptz + i * interval '1 minute', '2126-11-01T00:00:00Z', '2026-11-01T00:00:00Z' FROM generate_series(1, 250) i;`)
	require.NoError(t, err)
	for _, v := range []struct{ digit, first, last string }{
		{"4", "FEATURE_F02_BLOCKED", "old-key-0001"}, // Audit, newest first: the oldest is the last
		{"5", "fixed-publish", "old-key-0001"},       // Timeline: the key's row, then its audit event
		{"2", "fixed-publish", "old-key-0001"},       // Keys, newest first
	} {
		press(t, m, v.digit, "r")
		require.Contains(t, selectedRow(t, m.View()), v.first)
		require.Contains(t, screenText(m), "more below (G: the last)")
		press(t, m, "G")
		screen := screenText(m)
		require.Contains(t, selectedRow(t, m.View()), v.last, "view %s: G selects the very last row", v.digit)
		require.Contains(t, screen, "the last 100 · more above (g: the top)")
		press(t, m, "g")
		require.Contains(t, selectedRow(t, m.View()), v.first)
	}

	cb := &copied{}
	m.Clipboard = cb
	press(t, m, "1", "r", "g", "y")
	require.Equal(t, []string{tuitest.MemID}, cb.got, screenText(m))
	require.Contains(t, flat(lastLines(screenText(m), 3)), "y: "+tuitest.MemID+": this terminal does not answer OSC 52, so the copy cannot be confirmed; saved to /tmp/x/copied.txt")

	press(t, m, "enter")
	require.Contains(t, screenText(m), "1 revision · 1 execution · 1 audit event as of")

	b.Ctx.Conn.ReadOnly, b.Ctx.Conn.ReadOnlyReason = true, "read-only session"
	press(t, m, "esc")
	footer := lastLines(screenText(m), 2)
	for _, write := range []string{"c create", "p patch", "a run feature", "s storm"} {
		require.NotContains(t, footer, write, "a read-only session's footer")
	}
	press(t, m, "6")
	require.NotContains(t, lastLines(screenText(m), 2), "f fire")
}

// The cold start's counter stays whole at 80 columns, whatever the data dir's length: the real
// program (teatest) shows the stage wrapped and the counter moving, then q gives up.
func TestTheColdStartKeepsItsCounterAt80Columns(t *testing.T) {
	t.Parallel()
	stage := "creating the database cluster in /work/scratch/some/long/path/to/the/pg (first run: initdb takes a few seconds)…"
	boot := tui.NewBoot(uictx.NewStyles(uictx.MonoTheme()), stage, make(chan tui.BootResult))
	tm := teatest.NewTestModel(t, boot, teatest.WithInitialTermSize(80, 24))
	counter := regexp.MustCompile(`\(\d+(\.\d+)?m?s\)`)
	teatest.WaitFor(t, tm.Output(), func(out []byte) bool {
		return bytes.Contains(out, []byte("gives up")) && counter.MatchString(ansi.Strip(string(out)))
	}, teatest.WithDuration(10*time.Second))
	tm.Send(key("q"))
	screen := ansi.Strip(tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).View())
	require.Regexp(t, counter, screen, "the counter:\n%s", screen)
	require.Contains(t, flat(screen), "(first run: initdb takes a few seconds)…")
	for _, l := range strings.Split(screen, "\n") {
		require.LessOrEqual(t, ansi.StringWidth(l), 80)
		require.NotContains(t, l, "……", "nothing cut")
	}
}
