package views_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"github.com/stretchr/testify/require"

	"idemwork/internal/testdb"
	"idemwork/internal/tuitest"
	"idemwork/kernel"
	"idemwork/storm/stormtypes"
	"idemwork/tui/shared"
	"idemwork/views"
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
	f := views.NewForm(b.Ctx, b.Backend.Form(), shared.OpenFormMsg{Kind: "create", Module: "NOTE"})
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
	b := tuitest.New(t)
	f := views.NewForm(b.Ctx, b.Backend.Form(), shared.OpenFormMsg{Kind: "create", Module: "IDENTITY"})
	f.SetSize(100, 30)
	f.Update(tea.KeyMsg{Type: tea.KeyTab})
	f.Update(tea.KeyMsg{Type: tea.KeyTab})
	typeText(f, "legacy")
	settle(t, f.Update, f.Update(tea.KeyMsg{Type: tea.KeyCtrlS}))
	require.Contains(t, f.View(), "LEGACY_WRITE_DISABLED (HTTP 410)")
}

func TestKeysShowTheDriftBetweenTheReplayAndTheLatestRecord(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	ctx := context.Background()
	c, err := b.Kernel.Create(ctx, kernel.CreateInput{Owner: "alice", Module: "NOTE", Key: "drift-1", Title: "v1"})
	require.NoError(t, err)
	for rev := 1; rev <= 3; rev++ {
		title := fmt.Sprintf("v%d", rev+1)
		_, err := b.Kernel.Patch(ctx, kernel.PatchInput{Owner: "alice", Module: "NOTE", RecordID: c.Record.ID, ExpectRevision: rev, Title: &title})
		require.NoError(t, err)
	}
	v := views.NewKeys(b.Ctx, b.Backend.Keys)
	v.SetSize(120, 37)
	settle(t, v.Update, v.OpenKey("drift-1"))
	screen := v.View()
	require.Contains(t, screen, "replay returns rev 1, latest is rev 4: drift of 3 revision(s)")
	require.Contains(t, screen, "RECORD_CREATED")
}

func TestStaleResultsAreDropped(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	v := views.NewRecords(b.Ctx, b.Backend.Records)
	v.SetSize(120, 37)
	older := v.Init() // a query issued while the owner had nothing
	msgOld := older()
	_, err := b.Kernel.Create(context.Background(), kernel.CreateInput{Owner: "alice", Module: "NOTE", Title: "fresh"})
	require.NoError(t, err)
	settle(t, v.Update, v.Update(shared.DataChangedMsg{})) // a newer query sees the record
	require.Contains(t, v.View(), "fresh")
	v.Update(msgOld) // the older answer arrives late
	require.Contains(t, v.View(), "fresh", "a stale page never overwrites a newer one")
}

func TestExecutionsCountBlockedAndJumpToTheRecord(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	tuitest.SeedFixed(t, b)
	v := views.NewExecutions(b.Ctx, b.Backend.Executions)
	v.SetSize(120, 37)
	settle(t, v.Update, v.Init())
	require.Contains(t, v.View(), "1 BLOCKED")
	msg := v.Update(tea.KeyMsg{Type: tea.KeyEnter})()
	require.Equal(t, shared.JumpMsg{Kind: shared.JumpRecord, Module: "MEM-001", ID: tuitest.MemID}, msg)
}

func TestTheOutboxViewRunsTheWorker(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	ctx := context.Background()
	c, err := b.Kernel.Create(ctx, kernel.CreateInput{Owner: "alice", Module: "COMMITMENT", Title: "call", Payload: []byte(`{"status":"OPEN"}`)})
	require.NoError(t, err)
	_, err = b.Kernel.RunFeature(ctx, kernel.FeatureInput{Owner: "alice", Module: "COMMITMENT", RecordID: c.Record.ID, FeatureID: "F02", Key: "notify-1"})
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
	b := tuitest.New(t)
	tuitest.SeedFixed(t, b)
	v := views.NewAudit(b.Ctx, b.Backend.Audit)
	v.SetSize(120, 37)
	settle(t, v.Update, v.Init())
	screen := v.View()
	require.Contains(t, screen, "FEATURE_F02_BLOCKED")
	require.Contains(t, screen, "3 loaded")
	// Newest first: the BLOCKED event is selected.
	require.Equal(t, shared.JumpMsg{Kind: shared.JumpRecord, Module: "MEM-001", ID: tuitest.MemID}, v.Update(tea.KeyMsg{Type: tea.KeyEnter})())
	require.Equal(t, shared.JumpMsg{Kind: shared.JumpKey, ID: "fixed-publish"}, v.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("K")})())
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
	require.Equal(t, shared.JumpMsg{Kind: shared.JumpKey, ID: "fixed-publish"}, v.Update(tea.KeyMsg{Type: tea.KeyEnter})())
	v.SetFilter("RECORD_PATCHED")
	require.Contains(t, v.View(), "RECORD_PATCHED")
	require.NotContains(t, v.View(), "FEATURE_F02_BLOCKED")
}

func TestLocksShowsASessionWaitingOnAnotherOnesLock(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	tuitest.SeedFixed(t, b)
	ctx := context.Background()
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
	b := tuitest.New(t)
	f := views.NewForm(b.Ctx, b.Backend.Form(), shared.OpenFormMsg{Kind: "create", Module: "NOTE"})
	f.SetSize(100, 30)
	f.Update(tea.KeyMsg{Type: tea.KeyTab}) // -> key
	f.Update(tea.KeyMsg{Type: tea.KeyCtrlU})
	typeText(f, "has space")
	require.Contains(t, f.View(), "✗ byte 3 (0x20) is not visible ASCII", "the same words the runner answers with")
	f.Update(tea.KeyMsg{Type: tea.KeyTab}) // -> title (empty)
	require.Contains(t, f.View(), "✗ must be 1-200 characters, got 0")
}
