package views_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/storm/stormtypes"
	"github.com/idemwork/idemwork/views"
)

func TestMain(m *testing.M) {
	time.Local = time.UTC
	lipgloss.SetColorProfile(termenv.Ascii)
	testdb.Main(m)
}

// settle runs cmd the way Bubble Tea would (tuitest.Settle).
func settle(t *testing.T, update func(tea.Msg) tea.Cmd, cmd tea.Cmd) {
	t.Helper()
	tuitest.Settle(t, update, cmd)
}

func typeText(f *views.Form, s string) {
	for _, r := range s {
		f.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
}

func TestTheFormValidatesJSONAsYouTypeAndSendingAgainReplays(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	f := views.NewForm(b.Ctx, b.Backend.Form(), uictx.OpenFormMsg{Kind: "create", Module: "NOTE"})
	f.SetSize(100, 30)
	tab := tea.KeyMsg{Type: tea.KeyTab}
	f.Update(tab) // -> key
	f.Update(tea.KeyMsg{Type: tea.KeyCtrlU})
	typeText(f, "form-key-1")
	f.Update(tab) // -> title
	typeText(f, "from the form")
	f.Update(tab) // -> summary
	f.Update(tab) // -> payload
	f.Update(tea.KeyMsg{Type: tea.KeyCtrlU})
	typeText(f, `{"a":`)
	require.Contains(t, f.View(), "✗ payload: unexpected end of JSON")
	typeText(f, `1}`)
	require.Contains(t, f.View(), "✓ a valid JSON object")

	settle(t, f.Update, f.Update(tea.KeyMsg{Type: tea.KeyCtrlS}))
	require.Contains(t, f.View(), "EXECUTED")
	first := recordIDOnScreen(t, f.View())

	settle(t, f.Update, f.Update(tea.KeyMsg{Type: tea.KeyCtrlR}))
	require.Contains(t, f.View(), "REPLAYED")
	require.Equal(t, first, recordIDOnScreen(t, f.View()), "the replay shows the first record")

	var n int
	require.NoError(t, b.DB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM record WHERE owner_id = 'alice'`).Scan(&n))
	require.Equal(t, 1, n, "one record in the database")
}

func recordIDOnScreen(t *testing.T, screen string) string {
	t.Helper()
	for _, l := range strings.Split(screen, "\n") {
		if i := strings.Index(l, "record "); i >= 0 {
			fields := strings.Fields(l[i+len("record "):])
			if len(fields) > 0 {
				return fields[0]
			}
		}
	}
	t.Fatalf("no record id on screen:\n%s", screen)
	return ""
}

func TestAFormErrorShowsItsCodeNotARawDatabaseError(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err       error
		want, not string
	}{
		{apperr.New(apperr.LegacyWriteDisable, "identity:create is a disabled legacy operation"), "LEGACY_WRITE_DISABLED (HTTP 410): identity:create is a disabled legacy operation", ""},
		{fmt.Errorf("insert record: %w", errors.New(`ERROR: duplicate key value violates unique constraint "record_pkey" (SQLSTATE 23505)`)),
			"INTERNAL (HTTP 500): internal error in insert record", "duplicate key"},
	} {
		w := &writer{answer: func(any) (model.WriteResult, error) { return model.WriteResult{}, c.err }}
		f := views.NewForm(plainCtx(), views.FormDeps{Writer: w}, uictx.OpenFormMsg{Kind: "create", Module: "IDENTITY"})
		f.SetSize(200, 30)
		f.Update(tea.KeyMsg{Type: tea.KeyTab})
		f.Update(tea.KeyMsg{Type: tea.KeyTab})
		typeText(f, "legacy")
		settle(t, f.Update, f.Update(tea.KeyMsg{Type: tea.KeyCtrlS}))
		require.Contains(t, f.View(), c.want)
		if c.not != "" {
			require.NotContains(t, f.View(), c.not)
		}
		require.Equal(t, "IDENTITY", w.last().(model.CreateInput).Module)
	}
}

func TestKeysShowTheDriftBetweenTheReplayAndTheLatestRecord(t *testing.T) {
	t.Parallel()
	const id = "01JDRIFT000000000000000000"
	rec := func(rev int) *model.Record {
		return &model.Record{ID: id, OwnerID: "alice", ModuleCode: "NOTE", Revision: rev, Title: fmt.Sprintf("v%d", rev), Payload: []byte(`{}`)}
	}
	created, action := "drift-1", "RECORD_CREATED"
	kv := model.KeyView{Key: "drift-1", Operation: model.OpCreate("NOTE"), Status: "SUCCEEDED", State: model.KeySucceeded,
		Envelope: envelope("record-snapshot-reference-v1", id, 1), Restored: model.RestoredView{Record: rec(1)}, Latest: model.LatestView{Record: rec(4)},
		Verdict: "a retry replays the first result", Replay: &model.Response{Status: 201, Headers: map[string]string{idemtype.HeaderOutcome: "REPLAYED"}, Body: "{}\n"},
		Lives: []model.KeyLife{{Current: true, Label: "current life", Events: []model.Event{{Kind: "audit", ID: "a1", Action: &action, Key: &created, At: tuitest.Now}}}}}
	v := views.NewKeys(plainCtx(), keys{views: map[string]model.KeyView{"drift-1": kv}})
	v.SetSize(120, 37)
	settle(t, v.Update, v.OpenKey("drift-1"))
	screen := v.View()
	require.Contains(t, screen, "replay returns rev 1, latest is rev 4: drift of 3 revision(s)")
	require.Contains(t, screen, "RECORD_CREATED")
}

func TestStaleResultsAreDropped(t *testing.T) {
	t.Parallel()
	src := &records{}
	v := views.NewRecords(plainCtx(), src)
	v.SetSize(120, 37)
	older := v.Init() // a query issued while the owner had nothing
	msgOld := older()
	src.add(model.Record{ID: "01JFRESH000000000000000000", OwnerID: "alice", ModuleCode: "NOTE", Revision: 1, Title: "fresh"})
	settle(t, v.Update, v.Update(uictx.DataChangedMsg{})) // a newer query sees the record
	require.Contains(t, v.View(), "fresh")
	v.Update(msgOld) // the older answer arrives late
	require.Contains(t, v.View(), "fresh", "a stale page never overwrites a newer one")
	require.Equal(t, 2, src.reads)
}

// blockedRun is the BLOCKED execution of the fixed data set (tuitest.SeedFixed).
func blockedRun() model.Execution {
	key := "fixed-publish"
	at := tuitest.Now.Add(-49 * time.Minute)
	return model.Execution{ID: "01JDEMOEXEC000000000000001", OwnerID: "alice", ModuleCode: "MEM-001", RecordID: tuitest.MemID, FeatureID: "F02",
		Mode: "blocked_external", Status: "BLOCKED", RecordRevision: 1, IdempotencyKey: &key, CreatedAt: at, UpdatedAt: at}
}

func TestExecutionsCountBlockedAndJumpToTheRecord(t *testing.T) {
	t.Parallel()
	v := views.NewExecutions(plainCtx(), page[model.Execution]{rows: []model.Execution{blockedRun()}})
	v.SetSize(120, 37)
	settle(t, v.Update, v.Init())
	require.Contains(t, v.View(), "1 BLOCKED")
	msg := v.Update(tea.KeyMsg{Type: tea.KeyEnter})()
	require.Equal(t, uictx.JumpMsg{Kind: uictx.JumpRecord, Module: "MEM-001", ID: tuitest.MemID}, msg)
}

func TestTheOutboxViewRunsTheWorker(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	ctx := context.Background()
	c, err := b.Kernel.Create(ctx, model.CreateInput{Owner: "alice", Module: "COMMITMENT", Title: "call", Payload: []byte(`{"status":"OPEN"}`)})
	require.NoError(t, err)
	_, err = b.Kernel.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: "COMMITMENT", RecordID: c.Record.ID, FeatureID: "F02", Key: "notify-1"})
	require.NoError(t, err)
	v := views.NewOutbox(b.Ctx, b.Backend.Outbox)
	v.SetSize(120, 37)
	settle(t, v.Update, v.Init())
	require.Contains(t, v.View(), "PENDING")
	settle(t, v.Update, v.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("d")}))
	require.Contains(t, v.View(), "DELIVERED")
}

func TestTheStormViewCountsOutcomesAndShowsTheVerdict(t *testing.T) {
	t.Parallel()
	var got stormtypes.Spec
	run := func(ctx context.Context, spec stormtypes.Spec, events chan<- stormtypes.Event, _ chan<- stormtypes.LockSample) (stormtypes.Summary, error) {
		got = spec
		for i := 0; i < spec.N; i++ {
			o := "JOINED"
			if i == 0 {
				o = "EXECUTED"
			}
			events <- stormtypes.Event{Index: i, Outcome: o, LatencyMs: float64(i + 1)}
		}
		return stormtypes.Summary{Requests: spec.N, Verdict: stormtypes.Verdict{Verdict: "agrees", Text: "agrees: exactly one request executed",
			Answers: stormtypes.Part{OK: true, Text: "50 requests: EXECUTED 1, JOINED 49"}, Database: stormtypes.Part{OK: true, Text: "key SUCCEEDED: 1 revision"}}}, nil
	}
	v := views.NewStorm(plainCtx(), views.StormDeps{Run: run})
	v.SetSize(120, 37)
	settle(t, v.Update, v.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("f")}))
	screen := v.View()
	require.Equal(t, 50, got.N)
	require.True(t, got.Share)
	require.Equal(t, "alice", got.Owner())
	require.Equal(t, stormtypes.OpCreate, got.Op)
	require.Contains(t, screen, "50/50")
	require.Contains(t, screen, "EXECUTED 1")
	require.Contains(t, screen, "JOINED 49")
	require.Contains(t, screen, "p50 25.00")
	require.Contains(t, screen, "verdict  ✓ agrees: exactly one request executed")
}

func TestAuditJumpsToTheRecordAndToTheKeyOfAnEvent(t *testing.T) {
	t.Parallel()
	note, mem, exec := tuitest.NoteID, tuitest.MemID, "01JDEMOEXEC000000000000001"
	event := func(id, module string, record *string, action string, rev int, key string, minutes int) model.AuditEvent {
		return model.AuditEvent{ID: id, OwnerID: "alice", ModuleCode: module, RecordID: record, Action: action, Revision: &rev,
			IdempotencyKey: &key, Detail: []byte(`{}`), At: tuitest.Now.Add(time.Duration(minutes-120) * time.Minute)}
	}
	blocked := event("01JDEMOAUDIT00000000000003", "MEM-001", &mem, "FEATURE_F02_BLOCKED", 1, "fixed-publish", 11)
	blocked.ExecutionID = &exec
	v := views.NewAudit(plainCtx(), page[model.AuditEvent]{rows: []model.AuditEvent{blocked, // newest first, as the store pages
		event("01JDEMOAUDIT00000000000002", "NOTE", &note, "RECORD_PATCHED", 2, "fixed-patch", 5),
		event("01JDEMOAUDIT00000000000001", "NOTE", &note, "RECORD_CREATED", 1, "fixed-create", 0)}})
	v.SetSize(120, 37)
	settle(t, v.Update, v.Init())
	screen := v.View()
	require.Contains(t, screen, "FEATURE_F02_BLOCKED")
	require.Contains(t, screen, "3 loaded")
	// Newest first: the BLOCKED event is selected.
	require.Equal(t, uictx.JumpMsg{Kind: uictx.JumpRecord, Module: "MEM-001", ID: tuitest.MemID}, v.Update(tea.KeyMsg{Type: tea.KeyEnter})())
	require.Equal(t, uictx.JumpMsg{Kind: uictx.JumpKey, ID: "fixed-publish"}, v.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("K")})())
}

func TestTheTimelineMergesEveryKindNewestFirstAndOpensKeys(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	tuitest.SeedFixed(t, b)
	v := views.NewTimeline(b.Ctx, b.Backend.History)
	v.SetSize(120, 37)
	settle(t, v.Update, v.Init())
	screen := v.View()
	for _, kind := range []string{"audit", "execution", "key", "revision"} {
		require.Contains(t, screen, kind)
	}
	// The newest entries are the publish key and its BLOCKED execution (same instant, "key" sorts last).
	require.Equal(t, uictx.JumpMsg{Kind: uictx.JumpKey, ID: "fixed-publish"}, v.Update(tea.KeyMsg{Type: tea.KeyEnter})())
	v.(views.Filterer).SetFilter("RECORD_PATCHED")
	require.Contains(t, v.View(), "RECORD_PATCHED")
	require.NotContains(t, v.View(), "FEATURE_F02_BLOCKED")
}

func TestLocksShowsASessionWaitingOnAnotherOnesLock(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	tuitest.SeedFixed(t, b)
	ctx := testdb.Context(t)
	holder, err := b.DB.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `UPDATE record SET title = 'held' WHERE id = $1`, tuitest.NoteID)
	require.NoError(t, err)
	waiterDone := make(chan error, 1)
	go func() {
		_, err := b.DB.Pool.Exec(ctx, `UPDATE record SET title = 'waiting' WHERE id = $1`, tuitest.NoteID)
		waiterDone <- err
	}()

	v := views.NewLocks(b.Ctx, b.Backend.Sessions)
	v.SetSize(120, 37)
	deadline := time.Now().Add(20 * time.Second)
	refresh := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("r")}
	// The waiter shows as blocked a moment before pg_locks names the lock it waits on (it takes
	// the tuple lock first), so wait for both.
	for !(v.Waiting() == 1 && strings.Contains(v.View(), "transactionid")) && time.Now().Before(deadline) {
		settle(t, v.Update, v.Update(refresh))
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, 1, v.Waiting(), "the blocked UPDATE shows as waiting")
	require.Contains(t, v.View(), "1 waiting on a lock")
	require.Contains(t, v.View(), "transactionid")
	require.NoError(t, holder.Rollback(ctx))
	require.NoError(t, <-waiterDone)
}

func TestTheFormJudgesKeysAndTitlesByTheRunnersAndKernelsOwnRules(t *testing.T) {
	t.Parallel()
	f := views.NewForm(plainCtx(), views.FormDeps{}, uictx.OpenFormMsg{Kind: "create", Module: "NOTE"})
	f.SetSize(100, 30)
	f.Update(tea.KeyMsg{Type: tea.KeyTab}) // -> key
	f.Update(tea.KeyMsg{Type: tea.KeyCtrlU})
	typeText(f, "has space")
	require.Contains(t, f.View(), "✗ byte 3 (0x20) is not visible ASCII", "the same words the runner answers with")
	f.Update(tea.KeyMsg{Type: tea.KeyTab}) // -> title (empty)
	require.Contains(t, f.View(), "✗ must be 1-200 characters, got 0")
}

// failing is a RecordReader whose every read fails with err.
type failing struct{ err error }

func (f failing) Records(context.Context, model.RecordQuery) ([]model.Record, string, error) {
	return nil, "", f.err
}
func (f failing) RecordModule(context.Context, string, string) (string, error) { return "", f.err }
func (f failing) RecordOutline(context.Context, string, string, string) (model.RecordOutline, error) {
	return model.RecordOutline{}, f.err
}
func (f failing) GetRevision(context.Context, string, string, int) (model.Revision, error) {
	return model.Revision{}, f.err
}

// A reader's failure reaches the screen as words: an unreachable database says what to do, a
// coded error shows its code and message, and anything uncoded is INTERNAL naming the steps
// (never the driver's text, which can hold a connection string).
func TestAReadersFailureIsWordedNeverShownRaw(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err       error
		want, not string
	}{
		{views.Unreachable(apperr.New(apperr.DatabaseUnavailable, "the connection to the database was lost")),
			"DATABASE_UNAVAILABLE: the database is not reachable (the status line says what to do)", "connection to the database was lost"},
		{apperr.New(apperr.DatabaseUnavailable, "the database cancelled the statement when it reached statement_timeout"),
			"DATABASE_UNAVAILABLE: the database cancelled the statement when it reached statement_timeout", "not reachable"},
		{fmt.Errorf("read records: %w", errors.New("dial postgres://app:s3cret@db/app failed")),
			"INTERNAL: internal error in read records; the cause is in the server log", "s3cret"},
	} {
		v := views.NewRecords(plainCtx(), failing{c.err})
		v.SetSize(240, 20) // wide enough for the whole line
		settle(t, v.Update, v.Init())
		screen := v.View()
		require.Contains(t, strings.Join(strings.Fields(screen), " "), c.want)
		require.NotContains(t, screen, c.not)
	}
}

// A Fit column widens when the next page brings a longer cell: every row is laid out again at
// the new width, the other columns giving way (a flexible one down to its Min).
func TestAFitColumnWidensForTheNextPagesLongerCells(t *testing.T) {
	t.Parallel()
	tb := &views.Table{Columns: []views.Column{{Title: "KEY", Fit: true, Min: 4}, {Title: "WHAT", Min: 6, Tail: true}, {Title: "AT", Width: 5}}}
	tb.SetSize(40, 5)
	tb.SetRows([]views.Row{{Cells: []string{"k1", "NOTE:record:create", "12:00"}}})
	s := plainCtx().Styles
	require.Contains(t, ansi.Strip(tb.View(s, true)), "> k1   NOTE:record:create")
	tb.AppendRows([]views.Row{{Cells: []string{"tui-01m8s0m6fa4sk294natk", "NOTE:record:ID:patch", "12:01"}}})
	screen := ansi.Strip(tb.View(s, true))
	require.Contains(t, screen, "  tui-01m8s0m6fa4sk294natk …patch 12:01", screen)
	require.Contains(t, screen, "> k1                       …reate 12:00", "the first row laid out again")
}

// A list's selection is an item, not a position: a reload that brings a newer row keeps the
// selected record selected (one line down), with the new row in view above it.
func TestAReloadKeepsTheSelectedRowAndShowsTheNewOneAbove(t *testing.T) {
	t.Parallel()
	src := &records{}
	for i, title := range []string{"oldest", "middle", "newest"} {
		src.add(model.Record{ID: fmt.Sprintf("01JREC%020d", i), OwnerID: "alice", ModuleCode: "NOTE", Revision: 1, Title: title})
	}
	v := views.NewRecords(plainCtx(), src)
	v.SetSize(100, 20)
	settle(t, v.Update, v.Init())
	v.Update(press("j")) // "middle"
	require.Equal(t, fmt.Sprintf("01JREC%020d", 1), v.Selection())
	src.add(model.Record{ID: "01JREC99999999999999999999", OwnerID: "alice", ModuleCode: "NOTE", Revision: 1, Title: "brand new"})
	settle(t, v.Update, v.Update(uictx.DataChangedMsg{}))
	require.Equal(t, fmt.Sprintf("01JREC%020d", 1), v.Selection(), "the same record stays selected")
	lines := strings.Split(ansi.Strip(v.View()), "\n")
	require.Contains(t, lines[2], "brand new", "the new row is in view, above")
	require.Contains(t, lines[4], "> ", "the selection moved down with its row")
	require.Contains(t, lines[4], "middle")
}
