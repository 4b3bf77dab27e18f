package views_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/internal/workbench"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/views"
)

// keyPress is press (storm_test.go) with the keys these tests also use.
func keyPress(s string) tea.KeyMsg {
	switch s {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "right":
		return tea.KeyMsg{Type: tea.KeyRight}
	case "left":
		return tea.KeyMsg{Type: tea.KeyLeft}
	}
	return press(s)
}

func plant(t *testing.T, b tuitest.Bundle, sql string, args ...any) {
	t.Helper()
	_, err := b.DB.Pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// requireBlock asserts a view's screen is exactly h lines of at most w cells (the shell would
// clip anything wider, hiding the fault; it pads what is narrower), with nothing a terminal
// would obey beyond the view's own styling.
func requireBlock(t *testing.T, screen string, w, h int) []string {
	t.Helper()
	lines := strings.Split(screen, "\n")
	require.Len(t, lines, h, "the view draws exactly its height:\n%s", screen)
	for i, l := range lines {
		require.LessOrEqual(t, ansi.StringWidth(l), w, "line %d is wider than %d cells: %q", i, w, l)
		plain := ansi.Strip(l)
		for _, r := range plain {
			require.False(t, r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0), "line %d holds control %U: %q", i, r, l)
		}
	}
	return lines
}

// selectedLine is the one line carrying the cursor mark in a table's gutter: at the start of a
// line, or inside a pane's border.
func selectedLine(t *testing.T, lines []string) string {
	t.Helper()
	var found []string
	for _, l := range lines {
		p := ansi.Strip(l)
		if strings.HasPrefix(p, "> ") || strings.HasPrefix(p, "┃ > ") || strings.HasPrefix(p, "│ > ") {
			found = append(found, p)
		}
	}
	require.Len(t, found, 1, "exactly one selected row on screen:\n%s", strings.Join(lines, "\n"))
	return found[0]
}

// headText is the text above a detail's panes, its wrapped lines joined.
func headText(screen string) string {
	var out []string
	for _, l := range strings.Split(ansi.Strip(screen), "\n") {
		if strings.HasPrefix(l, "╭") || strings.HasPrefix(l, "┏") {
			break
		}
		out = append(out, strings.TrimSpace(l))
	}
	return strings.Join(out, " ")
}

func plantKeyStates(t *testing.T, b tuitest.Bundle) {
	ctx := context.Background()
	_, err := b.Kernel.Create(ctx, model.CreateInput{Owner: "alice", Module: "NOTE", Key: "ok-1", Title: "ok"})
	require.NoError(t, err)
	_, err = b.Kernel.Create(ctx, model.CreateInput{Owner: "alice", Module: "NOTE", Key: "tampered", Title: "t"})
	require.NoError(t, err)
	plant(t, b, `UPDATE idempotency_record SET response = response || '{"title": "smuggled"}' WHERE idempotency_key = 'tampered'`)
	plant(t, b, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at) VALUES
		('alice', 'stuck', 'NOTE:record:create', repeat('a', 64), 'PROCESSING', NULL, now(), now() + interval '1 hour', now()),
		('alice', 'gone', 'NOTE:record:create', repeat('b', 64), 'SUCCEEDED', (SELECT response FROM idempotency_record WHERE idempotency_key = 'ok-1'),
			now() - interval '2 days', now() - interval '1 day', now() - interval '2 days'),
		('alice', 'legacy', 'identity:create', repeat('c', 64), 'SUCCEEDED', '{"policy": "raw-json-v1", "body": {"id": "x"}}', now(), now() + interval '1 day', now())`)
}

func openListedKey(t *testing.T, v *views.Keys, name string) string {
	t.Helper()
	settle(t, v.Update, v.Update(uictx.OwnerChangedMsg{}))
	v.Update(keyPress("g"))
	for i := 0; i < 10; i++ {
		if v.Selection() == name {
			settle(t, v.Update, v.Update(keyPress("enter")))
			return v.View()
		}
		v.Update(keyPress("j"))
	}
	t.Fatalf("key %s is not in the list:\n%s", name, v.View())
	return ""
}

func TestTheKeysViewShowsEveryKeyStateAndWhatTheNextRequestMeets(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	plantKeyStates(t, b)
	for _, size := range [][2]int{{63, 21}, {103, 37}} {
		v := views.NewKeys(b.Ctx, b.Backend.Keys)
		v.SetSize(size[0], size[1])
		settle(t, v.Update, v.Init())
		list := requireBlock(t, v.View(), size[0], size[1])
		require.Contains(t, list[0], "5 loaded", "the PROCESSING row does not break the owner's list")
		require.Contains(t, v.View(), "PROCESSING")

		screen := openListedKey(t, v, "stuck")
		requireBlock(t, screen, size[0], size[1])
		require.Contains(t, screen, "key stuck · PROCESSING")
		require.True(t, strings.HasPrefix(headText(screen), "abnormal: reserved at "), "the verdict first: %s", headText(screen))
		require.Contains(t, headText(screen), "committed without its result — nothing ran; a retry gets 409 IDEMPOTENCY_IN_PROGRESS")
		require.Contains(t, screen, "Envelope: NULL")
		require.Contains(t, screen, "409 IDEMPOTENCY_IN_PROGRESS")
		v.Update(keyPress("esc"))

		screen = openListedKey(t, v, "tampered")
		requireBlock(t, screen, size[0], size[1])
		require.Contains(t, screen, "FAILS_CLOSED")
		require.True(t, strings.HasPrefix(headText(screen), `tampered: stored envelope carries an unknown field "title"; a retry gets 500 SNAPSHOT_INTEGRITY_VIOLATION`),
			"the verdict first: %s", headText(screen))
		require.Contains(t, screen, "Replay → 500")
		require.Contains(t, screen, `"smuggled"`, "beside the coded error: the stored envelope as it is")
		v.Update(keyPress("esc"))

		screen = openListedKey(t, v, "gone")
		require.Contains(t, screen, "key gone · EXPIRED")
		require.Contains(t, headText(screen), "executes anew")
		v.Update(keyPress("esc"))

		screen = openListedKey(t, v, "legacy")
		require.Contains(t, screen, "LEGACY")
		require.Contains(t, headText(screen), "410 LEGACY_WRITE_DISABLED")
		v.Update(keyPress("esc"))

		screen = openListedKey(t, v, "ok-1")
		require.Contains(t, screen, "key ok-1 · SUCCEEDED")
		require.Contains(t, screen, "replay returns rev 1, latest is rev 1: no drift")
	}
}

func TestTheKeysListKeepsTheActionOfEveryOperationAt80Columns(t *testing.T) {
	t.Parallel()
	row := func(key, op string, rev int) model.KeyRow {
		return model.KeyRow{OwnerID: "alice", Key: key, Operation: op, Fingerprint: strings.Repeat("a", 64), Status: "SUCCEEDED",
			Response: envelope("record-snapshot-reference-v1", tuitest.NoteID, rev), CreatedAt: tuitest.Now.Add(-time.Hour), ExpiresAt: tuitest.Now.Add(time.Hour)}
	}
	v := views.NewKeys(plainCtx(), keys{rows: []model.KeyRow{
		row("fixed-publish", "MEM-001:record:"+tuitest.MemID+":feature:F02", 1),
		row("fixed-patch", "NOTE:record:"+tuitest.NoteID+":patch", 2),
		row("fixed-create", "NOTE:record:create", 1)}})
	v.SetSize(63, 21) // the body of an 80×24 terminal
	settle(t, v.Update, v.Init())
	screen := strings.Join(requireBlock(t, v.View(), 63, 21), "\n")
	require.Contains(t, screen, ":feature:F02")
	require.Contains(t, screen, ":patch")
	require.Contains(t, screen, "NOTE:record:create")
}

// At 80 columns a key is read whole: the KEY column takes the width its longest key needs and
// the operation and the policy give way first (the operation keeps its end, ":patch"); a key
// longer than what is left is cut with "…", never silently, and its row keeps its status and
// expiry.
func TestTheKeysListGivesTheKeyTheWidthItNeedsAt80Columns(t *testing.T) {
	t.Parallel()
	row := func(key, op string) model.KeyRow {
		return model.KeyRow{OwnerID: "alice", Key: key, Operation: op, Fingerprint: strings.Repeat("a", 64), Status: "SUCCEEDED",
			Response: envelope("record-snapshot-reference-v1", tuitest.NoteID, 1), CreatedAt: tuitest.Now.Add(-time.Hour), ExpiresAt: tuitest.Now.Add(time.Hour)}
	}
	long := "demo:alice:commitment-1:feature-F02:retry-2"
	src := keys{rows: []model.KeyRow{
		row("tui-01m8s0m6fa4sk294natkknd2p", "NOTE:record:"+tuitest.NoteID+":patch"),
		row("demo:alice:note-1:patch-1", "NOTE:record:"+tuitest.NoteID+":patch"),
		row("demo:alice:mem-1", "MEM-001:record:create")}}
	v := views.NewKeys(plainCtx(), src)
	v.SetSize(63, 21) // the body of an 80×24 terminal
	settle(t, v.Update, v.Init())
	lines := requireBlock(t, v.View(), 63, 21)
	require.Contains(t, lines[2], "tui-01m8s0m6fa4sk294natkknd2p SUCCEEDED", "the whole key, then its status:\n%s", strings.Join(lines, "\n"))
	require.Contains(t, lines[3], "demo:alice:note-1:patch-1 ")
	require.Contains(t, lines[3], ":patch", "the operation keeps its end")
	require.Contains(t, lines[3], "in 1h00m")

	src.rows = append(src.rows, row(long, "COMMITMENT:record:create"))
	v = views.NewKeys(plainCtx(), src)
	v.SetSize(63, 21)
	settle(t, v.Update, v.Init())
	lines = requireBlock(t, v.View(), 63, 21)
	last := ansi.Strip(lines[5])
	require.NotContains(t, last, long)
	require.Regexp(t, `demo:alice:commitment-1:featu… SUCCEEDED .* in 1h00m`, last, "cut with a mark, its row whole")
	require.Contains(t, lines[2], "tui-01m8s0m6fa4sk294natkknd2p ", "the other keys still whole")
}

func TestStoredControlCharactersAreShownNotObeyed(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	tuitest.SeedFixed(t, b)
	plant(t, b, `UPDATE record SET title = E'\x1b[31mRED\x1b[0m \x1b[2J' WHERE id = $1`, tuitest.NoteID)
	plant(t, b, `UPDATE record SET title = E'two\nlines\tand a tab' WHERE id = $1`, tuitest.MemID)
	plant(t, b, `UPDATE audit_event SET idempotency_key = E'k\x1b]52;c;aGk=\x07' WHERE id = '01JDEMOAUDIT00000000000001'`)
	for _, w := range []int{63, 103} {
		r := views.NewRecords(b.Ctx, b.Backend.Records)
		r.SetSize(w, 21)
		settle(t, r.Update, r.Init())
		lines := requireBlock(t, r.View(), w, 21)
		screen := strings.Join(lines, "\n")
		require.Contains(t, screen, "␛[31mRED␛[0m")
		require.Contains(t, screen, "two␊lines␉and a")
		require.NotContains(t, screen, "\x1b[2J")
		// Each record is one row, at its own line.
		require.Equal(t, 2, strings.Count(screen, "NOTE")+strings.Count(screen, "MEM-001"))

		a := views.NewAudit(b.Ctx, b.Backend.Audit)
		a.SetSize(w, 21)
		settle(t, a.Update, a.Init())
		require.Contains(t, strings.Join(requireBlock(t, a.View(), w, 21), "\n"), "k␛]52;c;aGk=␇")

		settle(t, r.Update, r.OpenRecord("NOTE", tuitest.NoteID))
		detail := strings.Join(requireBlock(t, r.View(), w, 21), "\n")
		require.Contains(t, detail, `"\u001b[31mRED\`, "the title, quoted with its controls escaped")
	}
}

const bigID = "01JBXG00000000000000000000"

func TestTheRevisionListKeepsTheSelectedRevisionOnScreen(t *testing.T) {
	t.Parallel()
	src := &records{}
	bigRecordIn(src, bigID, 200, 1)
	for _, size := range [][2]int{{63, 21}, {103, 37}} {
		v := views.NewRecords(plainCtx(), src)
		v.SetSize(size[0], size[1])
		settle(t, v.Update, v.OpenRecord("NOTE", bigID))
		lines := requireBlock(t, v.View(), size[0], size[1])
		require.Contains(t, selectedLine(t, lines), "> 200", "the newest revision is selected and shown")
		for i := 0; i < 60; i++ {
			settle(t, v.Update, v.Update(keyPress("k")))
		}
		lines = requireBlock(t, v.View(), size[0], size[1])
		require.Contains(t, selectedLine(t, lines), "> 140")
		settle(t, v.Update, v.Update(keyPress("G")))
		lines = requireBlock(t, v.View(), size[0], size[1])
		require.Contains(t, selectedLine(t, lines), "> 200", "G selects the last revision, on screen")
		require.Contains(t, lines[3], "Snapshot rev 200")
	}
}

func TestDetailPanesScrollShowTheirPositionAndYCopiesTheFocusedOne(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	ctx := context.Background()
	c, err := b.Kernel.Create(ctx, model.CreateInput{Owner: "alice", Module: "NOTE", Key: "long", Title: "long",
		Payload: []byte(fmt.Sprintf(`{"items": [%s]}`, strings.TrimSuffix(strings.Repeat(`"item",`, 80), ",")))})
	require.NoError(t, err)
	v := views.NewKeys(b.Ctx, b.Backend.Keys)
	v.SetSize(103, 37)
	settle(t, v.Update, v.OpenKey("long"))
	screen := v.View()
	require.Contains(t, screen, "Replay → 201 1-", "the replay pane says it holds more than it shows")
	require.Contains(t, screen, "↓")
	before := screen
	v.Update(keyPress("j"))
	require.NotEqual(t, before, v.View(), "j scrolls the focused pane")
	require.Contains(t, v.View(), "Replay → 201 2-")

	// y copies the focused pane: the response a retry gets, as it goes over the wire.
	head, body, ok := strings.Cut(v.Selection(), "\n\n")
	require.True(t, ok, v.Selection())
	require.True(t, strings.HasPrefix(head, "HTTP 201 Created\n"), head)
	require.Contains(t, head, "Idempotent-Replayed: true")
	var replayed map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &replayed))
	require.Equal(t, "REPLAYED", replayed["outcome"])
	require.Equal(t, c.Record.ID, replayed["record"].(map[string]any)["id"])
	v.Update(keyPress("left"))
	require.Equal(t, "Envelope (stored)", v.FocusedPane())
	require.Contains(t, v.Selection(), `"policy": "record-snapshot-reference-v1"`, "y copies the envelope when it is focused")
}

func TestTheDiffIsPathLevelComputedOnSelectionAndMarksItsBase(t *testing.T) {
	t.Parallel()
	src := &records{}
	bigRecordIn(src, bigID, 5, 1)
	v := views.NewRecords(plainCtx(), src)
	v.SetSize(103, 37)
	settle(t, v.Update, v.OpenRecord("NOTE", bigID))
	settle(t, v.Update, v.Update(keyPress("2")))
	screen := v.View()
	require.Contains(t, screen, "Diff rev 4 (base: the revision before) → rev 5")
	require.Contains(t, screen, "~ payload.i: 4 → 5")
	require.Contains(t, screen, "- payload.items[2]: \"c\"")
	require.Contains(t, screen, "[-4-]{+5+}", "a long text shows its edit, not two copies")
	require.Contains(t, screen, "~ revision: 4 → 5")

	// Mark revision 2 as the base, then look at 5 against it.
	for i := 0; i < 3; i++ {
		settle(t, v.Update, v.Update(keyPress("k")))
	}
	settle(t, v.Update, v.Update(keyPress(" ")))
	settle(t, v.Update, v.Update(keyPress("G")))
	screen = v.View()
	require.Contains(t, screen, "Diff rev 2 (the marked base) → rev 5")
	require.Contains(t, screen, "base ◆ 2")
	require.Contains(t, screen, "~ payload.i: 2 → 5")
	require.Contains(t, screen, "- payload.items[2]", "rev 2 has three items, rev 5 two")
	changes := v.DiffShown()
	require.NotEmpty(t, changes)
}

func TestAKeysEarlierLifeIsShownApart(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	ctx := context.Background()
	_, err := b.Kernel.Create(ctx, model.CreateInput{Owner: "alice", Module: "NOTE", Key: "twice", Title: "same"})
	require.NoError(t, err)
	b.Clock.Advance(25 * time.Hour)
	_, err = b.Kernel.Create(ctx, model.CreateInput{Owner: "alice", Module: "NOTE", Key: "twice", Title: "same"})
	require.NoError(t, err)
	v := views.NewKeys(b.Ctx, b.Backend.Keys)
	v.SetSize(103, 37)
	settle(t, v.Update, v.OpenKey("twice"))
	screen := v.View()
	require.Contains(t, screen, "current life + 1 other")
	require.Contains(t, screen, "current life: transaction ")
	require.Contains(t, screen, "earlier life: transaction ")
	require.True(t, strings.HasPrefix(headText(screen), "expired at "), "the verdict first: %s", headText(screen))
	require.Contains(t, headText(screen), " and ran again: it executed once at ")
	// The whole pane, as y copies it when it is focused.
	v.Update(keyPress("right"))
	v.Update(keyPress("right"))
	require.Contains(t, v.FocusedPane(), "Rows of this key by transaction")
	all := v.Selection()
	cur := strings.Index(all, "current life: transaction ")
	old := strings.Index(all, "earlier life: transaction ")
	require.Less(t, cur, old, "the current life first")
	require.Equal(t, 1, strings.Count(all[cur:old], "RECORD_CREATED"), "the current life lists its own rows only")
	require.Equal(t, 1, strings.Count(all[cur:old], " key       "), "and the key row")
	require.Equal(t, 1, strings.Count(all[old:], "RECORD_CREATED"))
	require.Equal(t, 0, strings.Count(all[old:], " key       "), "the earlier life has no key row of its own any more")
}

func TestASearchAsksTheDatabaseAndEnterOpensTheRowUnderTheCursor(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	plant(t, b, `INSERT INTO record (owner_id, id, module_code, revision, title, summary, payload, created_at, updated_at)
		SELECT 'alice', '01JCAR' || lpad(g::text, 20, '0'), 'NOTE', 1, 'Carol note ' || g, '', '{}', now() - g * interval '1 minute', now()
		FROM generate_series(1, 250) g`)
	v := views.NewRecords(b.Ctx, b.Backend.Records)
	v.SetSize(103, 37)
	settle(t, v.Update, v.Init())
	require.Contains(t, v.View(), "100 loaded · more below", "one keyset page, not the owner")
	require.NotContains(t, v.View(), "Carol note 207")

	// A record far beyond the loaded page is found, and a trailing space changes nothing.
	settle(t, v.Update, v.Search("note 207 "))
	screen := v.View()
	require.Contains(t, screen, `1 match: title contains "note 207"`)
	require.Contains(t, selectedLine(t, strings.Split(screen, "\n")), "Carol note 207")
	settle(t, v.Update, v.Update(keyPress("enter")))
	require.Contains(t, v.View(), "NOTE 01JCAR00000000000000000207", "enter opens exactly the row under the cursor")
	v.Update(keyPress("esc"))

	settle(t, v.Update, v.Search("note 7"))
	screen = v.View()
	require.Contains(t, screen, `11 matches: title contains "note 7"`, "7, 70-79, 170-179 and 270… the database's answer")
	for i := 0; i < 3; i++ {
		v.Update(keyPress("j"))
	}
	sel := selectedLine(t, strings.Split(v.View(), "\n"))
	want := strings.Fields(sel[strings.Index(sel, "Carol"):])[2]
	settle(t, v.Update, v.Update(keyPress("enter")))
	require.Contains(t, v.View(), fmt.Sprintf("\"Carol note %s\"", want))
	v.Update(keyPress("esc"))

	settle(t, v.Update, v.Search("id:01jcar0000000000000000002"))
	require.Contains(t, v.View(), `10 matches: id starts with "01JCAR0000000000000000002" (newest first)`)
	settle(t, v.Update, v.Search(""))
	require.Contains(t, v.View(), "100 loaded · more below")
}

func TestAuditAndTimelineSearchTheWholeHistory(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	tuitest.SeedFixed(t, b)
	plant(t, b, `INSERT INTO audit_event (owner_id, id, module_code, action, idempotency_key, detail, at)
		SELECT 'alice', 'bulk' || lpad(g::text, 6, '0'), 'NOTE', 'RECORD_PATCHED', 'bulk-' || g, '{}', now() + g * interval '1 ms' FROM generate_series(1, 500) g`)
	a := views.NewAudit(b.Ctx, b.Backend.Audit)
	a.SetSize(103, 37)
	settle(t, a.Update, a.Init())
	require.NotContains(t, a.View(), "FEATURE_F02_BLOCKED", "the blocked event is pages behind the bulk")
	s := a.(views.Searcher)
	settle(t, a.Update, s.Search("feature_"))
	screen := a.View()
	require.Contains(t, screen, `1 match: action starts with "FEATURE_"`)
	require.Contains(t, screen, "FEATURE_F02_BLOCKED")
	settle(t, a.Update, s.Search("key:fixed-p"))
	require.Contains(t, a.View(), `2 matches: key starts with "fixed-p" (key order)`)

	tl := views.NewTimeline(b.Ctx, b.Backend.History)
	tl.SetSize(103, 37)
	settle(t, tl.Update, tl.(views.Searcher).Search("fixed-publish"))
	screen = tl.View()
	require.Contains(t, screen, `3 matches: keys starting with "fixed-publish"`, "the key, its execution and its audit event")

	e := views.NewExecutions(b.Ctx, b.Backend.Executions)
	e.SetSize(103, 37)
	settle(t, e.Update, e.(views.Searcher).Search("record:01JDEMOMEM"))
	require.Contains(t, e.View(), "1 match: record id starts with")
	require.Equal(t, uictx.JumpMsg{Kind: uictx.JumpKey, ID: "fixed-publish"}, e.Update(keyPress("K"))())

	settle(t, e.Update, e.(views.Searcher).Search("bad key"))
	require.Contains(t, e.View(), "VALIDATION_FAILED", "a search the database cannot run says why")
}

func TestTheRecordsHistoryPaneOpensKeysAndShowsThemWhole(t *testing.T) {
	t.Parallel()
	run := blockedRun()
	mem, rev := tuitest.MemID, 1
	src := &records{execs: map[string][]model.Execution{mem: {run}}, audit: map[string][]model.AuditEvent{mem: {{ID: "01JDEMOAUDIT00000000000003",
		OwnerID: "alice", ModuleCode: "MEM-001", RecordID: &mem, Action: "FEATURE_F02_BLOCKED", Revision: &rev, ExecutionID: &run.ID,
		IdempotencyKey: run.IdempotencyKey, Detail: []byte(`{}`), At: run.CreatedAt}}}}
	src.add(model.Record{ID: mem, OwnerID: "alice", ModuleCode: "MEM-001", Revision: 1, Title: "Meeting notes", Payload: []byte(`{}`)},
		json.RawMessage(`{"id": "`+mem+`", "title": "Meeting notes"}`))
	v := views.NewRecords(plainCtx(), src)
	v.SetSize(63, 21)
	settle(t, v.Update, v.OpenRecord("MEM-001", tuitest.MemID))
	v.Update(keyPress("3"))
	screen := strings.Join(requireBlock(t, v.View(), 63, 21), "\n")
	require.Contains(t, screen, "fixed-publish", "the key is shown whole")
	require.Equal(t, uictx.JumpMsg{Kind: uictx.JumpKey, ID: "fixed-publish"}, v.Update(keyPress("enter"))())
	require.Equal(t, uictx.JumpMsg{Kind: uictx.JumpKey, ID: "fixed-publish"}, v.Update(keyPress("K"))())
	require.Equal(t, "fixed-publish", v.Selection())
}

func TestJumpingToAnotherOwnersRecordSaysItIsNotThere(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	plant(t, b, `INSERT INTO record VALUES ('bob', '01JB0B00000000000000000000', 'NOTE', 1, 'bob''s', '', '{}', now(), now())`)
	v := views.NewRecords(b.Ctx, b.Backend.Records)
	v.SetSize(103, 37)
	settle(t, v.Update, v.OpenRecord("", "01JB0B00000000000000000000"))
	screen := v.View()
	require.Contains(t, screen, "RECORD_NOT_FOUND: owner alice has no record 01JB0B00000000000000000000")
	require.NotContains(t, screen, "internal error")
}

// proxy forwards loopback TCP to the test database's Unix socket until stop: then it closes its
// listener and every connection, as a cluster that stopped would.
func proxy(t *testing.T, dsn string) (addr string, stop func()) {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	sock := filepath.Join(u.Query().Get("host"), ".s.PGSQL."+u.Query().Get("port"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("unix", sock)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
			go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
		}
	}()
	return ln.Addr().String(), func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	}
}

func TestAStoppedDatabaseIsSaidInWordsNotDriverText(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	addr, stop := proxy(t, b.DB.DSN)
	u, err := url.Parse(b.DB.DSN)
	require.NoError(t, err)
	user := u.Query().Get("user")
	if u.User != nil {
		user = u.User.Username()
	}
	db, err := store.Open(context.Background(), fmt.Sprintf("postgres://%s@%s%s?sslmode=disable&connect_timeout=2", user, addr, u.Path), store.Options{})
	require.NoError(t, err)
	defer db.Close()
	// The workbench's readers over that connection, as cli wires them.
	v := views.NewKeys(b.Ctx, workbench.Backend(workbench.Sources{DB: db, Kernel: b.Kernel}).Keys)
	v.SetSize(103, 37)
	settle(t, v.Update, v.Init())
	require.Contains(t, v.View(), "0 loaded", "the workbench reads through the database")
	// The cluster stops under the workbench.
	stop()
	settle(t, v.Update, v.Update(keyPress("r")))
	screen := v.View()
	require.Contains(t, screen, "the database is not reachable")
	require.NotContains(t, screen, "dial")
	require.NotContains(t, screen, "127.0.0.1")
	require.NotContains(t, screen, "EOF")
}

func TestTimelineXExportsTheWholeSelectionToACSVFileAndSaysWhere(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	tuitest.SeedFixed(t, b)
	plant(t, b, `INSERT INTO audit_event (owner_id, id, module_code, action, idempotency_key, detail, at)
		SELECT 'alice', 'bulk' || lpad(g::text, 6, '0'), 'NOTE', 'BULK', 'bulk-' || g, '{}', now() + g * interval '1 ms' FROM generate_series(1, 1200) g`)
	b.Ctx.ExportDir = t.TempDir()
	v := views.NewTimeline(b.Ctx, b.Backend.History)
	v.SetSize(103, 37)
	settle(t, v.Update, v.Init())
	require.Contains(t, v.View(), "100 loaded · more below", "the screen holds a page")
	var last uictx.StatusMsg
	settle(t, func(m tea.Msg) tea.Cmd {
		if s, ok := m.(uictx.StatusMsg); ok {
			last = s
			return nil
		}
		return v.Update(m)
	}, v.Update(keyPress("x")))
	require.False(t, last.Error, last.Text)
	require.Contains(t, last.Text, "exported 1210 entries (oldest first, CSV) to "+b.Ctx.ExportDir)
	path := strings.TrimSpace(last.Text[strings.Index(last.Text, " to ")+4:])
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 1+1210, "a header and every entry of the owner, not the loaded page")

	// With a search, what it matches.
	settle(t, v.Update, v.(views.Searcher).Search("fixed-publish"))
	last = uictx.StatusMsg{}
	settle(t, func(m tea.Msg) tea.Cmd {
		if s, ok := m.(uictx.StatusMsg); ok {
			last = s
			return nil
		}
		return v.Update(m)
	}, v.Update(keyPress("x")))
	require.Contains(t, last.Text, "exported 3 entries (oldest first, CSV) to "+b.Ctx.ExportDir)
}
