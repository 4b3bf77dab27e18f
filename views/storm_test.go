package views_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/storm/stormtypes"
	"github.com/idemwork/idemwork/views"
)

// program runs views the way the shell does: commands run off the update goroutine, their
// messages come back one at a time and go to every view (the shell broadcasts what it does
// not handle itself), until a condition holds.
type program struct {
	t     *testing.T
	views []interface{ Update(tea.Msg) tea.Cmd }
	msgs  chan tea.Msg
}

func newProgram(t *testing.T, vs ...interface{ Update(tea.Msg) tea.Cmd }) *program {
	return &program{t: t, views: vs, msgs: make(chan tea.Msg, 1024)}
}

func (p *program) run(cmd tea.Cmd) {
	if cmd == nil {
		return
	}
	go func() {
		msg := cmd()
		if batch, ok := msg.(tea.BatchMsg); ok {
			for _, c := range batch {
				p.run(c)
			}
			return
		}
		if msg != nil {
			p.msgs <- msg
		}
	}()
}

// send delivers msg to every view and runs what they return.
func (p *program) send(msg tea.Msg) {
	for _, v := range p.views {
		p.run(v.Update(msg))
	}
}

// until processes messages until cond holds.
func (p *program) until(cond func() bool, what string) {
	p.t.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case m := <-p.msgs:
			p.send(m)
		case <-deadline:
			var screens []string
			for _, v := range p.views {
				if vv, ok := v.(interface{ View() string }); ok {
					screens = append(screens, vv.View())
				}
			}
			p.t.Fatalf("timed out waiting for %s; screens:\n%s", what, strings.Join(screens, "\n----\n"))
		}
	}
}

func press(s string) tea.KeyMsg {
	switch s {
	case "ctrl+x":
		return tea.KeyMsg{Type: tea.KeyCtrlX}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
}

func TestTheStormViewReportsAStormOfRejectionsAsRejectionsNotADisagreement(t *testing.T) {
	t.Parallel()
	run := func(_ context.Context, spec stormtypes.Spec, events chan<- stormtypes.Event, _ chan<- stormtypes.LockSample) (stormtypes.Summary, error) {
		for i := range spec.N {
			events <- stormtypes.Event{Index: i, Outcome: "REVISION_CONFLICT", Err: "record is at revision 5, not the expected 4", LatencyMs: 1}
		}
		return summaryOf(spec, map[string]int{"REVISION_CONFLICT": spec.N}, stormtypes.Verdict{Verdict: stormtypes.VerdictRejected, Code: "REVISION_CONFLICT",
			Text:     "no request succeeded: REVISION_CONFLICT × 50",
			Answers:  stormtypes.Part{OK: true, Text: `50 requests: rejected: REVISION_CONFLICT × 50 (REVISION_CONFLICT: "record is at revision 5, not the expected 4")`},
			Database: stormtypes.Part{OK: true, Text: "nothing written: the key was ABSENT before the storm and still is"}}), nil
	}
	v := views.NewStorm(plainCtx(), views.StormDeps{Run: run})
	v.SetSize(120, 37)
	p := newProgram(t, v)
	p.send(press("f"))
	p.until(func() bool { return !v.Running() && strings.Contains(v.View(), "verdict") }, "the verdict")
	screen := v.View()
	require.Contains(t, screen, "answers  ✓ 50 requests: rejected: REVISION_CONFLICT × 50")
	require.Contains(t, strings.Join(strings.Fields(screen), " "), `"record is at revision 5, not the expected 4"`, "the reason is on screen")
	require.Contains(t, screen, "database ✓ nothing written: the key was ABSENT before the storm and still is")
	require.Contains(t, screen, "verdict  ✗ no request succeeded: REVISION_CONFLICT × 50")
	require.NotContains(t, screen, "DISAGREES")
}

func TestAStalledStormSaysWhatItWaitsOnAndStopsAccountingForEveryRequest(t *testing.T) {
	t.Parallel()
	// What the sampler saw: 20 of the storm's sessions wait on a psql session's transaction.
	psql := stormtypes.Blocker{PID: 4242, Application: "psql", State: "idle in transaction", XactMs: 6300, LockType: "transactionid", Waiters: 20}
	run := func(ctx context.Context, spec stormtypes.Spec, _ chan<- stormtypes.Event, locks chan<- stormtypes.LockSample) (stormtypes.Summary, error) {
		locks <- stormtypes.LockSample{Waiting: 20, InXact: 20, PeakWaiting: 20, PeakAt: tuitest.Now, Blockers: []stormtypes.Blocker{psql}}
		<-ctx.Done() // stuck behind the lock until stopped
		return summaryOf(spec, map[string]int{"CANCELLED": 20}, stormtypes.Verdict{Verdict: stormtypes.VerdictStopped, Code: "CANCELLED",
			Text:     "stopped: 0 answered, 20 cancelled",
			Answers:  stormtypes.Part{Text: "stopped: 0 answered, 20 cancelled: cancelled: CANCELLED × 20"},
			Database: stormtypes.Part{OK: true, Text: "nothing written: the key was ABSENT before the storm and still is"}}), ctx.Err()
	}
	v := views.NewStorm(plainCtx(), views.StormDeps{Run: run})
	v.SetSize(120, 37)
	p := newProgram(t, v)
	p.send(press("f"))
	// The clock moves while nothing is answered, and the view says what the storm waits on.
	p.until(func() bool { return strings.Contains(v.View(), "no answer for 1.") }, "the stall line")
	screen := v.View()
	require.Contains(t, screen, "0/50 answered · 1.")
	require.Contains(t, screen, "locks: 20 of the storm's sessions wait now · peak 20 at 12:00:00.000")
	require.Contains(t, strings.Join(strings.Fields(screen), " "), `held by pid 4242 (application "psql", idle in transaction, transaction open 6.3 s)`)

	p.send(press("ctrl+x"))
	p.until(func() bool { return !v.Running() }, "the stop")
	screen = v.View()
	require.Contains(t, screen, "stopped: 0 answered, 20 cancelled")
	require.Contains(t, screen, "answers  ✗ stopped: 0 answered, 20 cancelled")
	require.Contains(t, screen, "CANCELLED 20", "every request counted, sent or not")
	require.NotContains(t, screen, "context canceled")
	require.NotContains(t, screen, "internal error")
	// After the storm, the peak stays and nothing claims sessions wait "now".
	require.Contains(t, screen, "locks: peak 0 of the storm's sessions waiting")
	require.NotContains(t, screen, "wait now")
}

func TestTheStormViewCountsWaitsOfRejectionsAndShowsTheExecutionStatus(t *testing.T) {
	t.Parallel()
	records := newLatest(model.Record{ID: tuitest.MemID, OwnerID: "alice", ModuleCode: "MEM-001", Revision: 1, Title: "Meeting notes",
		Payload: []byte(`{"currentContent":"Ship it","originalContent":"Ship it"}`)})
	run := func(_ context.Context, spec stormtypes.Spec, events chan<- stormtypes.Event, _ chan<- stormtypes.LockSample) (stormtypes.Summary, error) {
		events <- stormtypes.Event{Index: 0, Outcome: "EXECUTED", ExecutionStatus: "BLOCKED", LatencyMs: 2}
		for i := 1; i < spec.N; i++ {
			events <- stormtypes.Event{Index: i, Outcome: "REPLAYED", Waited: true, ExecutionStatus: "BLOCKED", LatencyMs: 3}
		}
		s := summaryOf(spec, map[string]int{"EXECUTED": 1, "REPLAYED": spec.N - 1}, stormtypes.Verdict{Verdict: stormtypes.VerdictAgrees,
			Text: "agrees", Answers: stormtypes.Part{OK: true, Text: "ok"},
			Database: stormtypes.Part{OK: true, Text: "key SUCCEEDED: 0 revisions, 1 audit event; execution BLOCKED (the feature calls a provider directly: it failed closed, nothing was sent)"}})
		peak := tuitest.Now
		s.Verified.ExecutionStatus, s.Locks, s.Waited = "BLOCKED", stormtypes.LockStats{PeakWaiting: 16, PeakAt: &peak, Samples: 9}, spec.N-1
		return s, nil
	}
	v := views.NewStorm(plainCtx(), views.StormDeps{Run: run, Records: records, Catalog: &catalog{}})
	v.Prepare(uictx.OpenStormMsg{Module: "MEM-001", RecordID: tuitest.MemID, Revision: 1})
	v.SetSize(120, 37)
	p := newProgram(t, v)
	p.run(v.SetActive(true))
	p.until(func() bool { return strings.Contains(v.View(), `title "Meeting notes"`) }, "the target")
	// Operation: patch → action; the feature F01 → F02.
	p.send(tea.KeyMsg{Type: tea.KeyRight})
	p.send(tea.KeyMsg{Type: tea.KeyTab})
	p.send(tea.KeyMsg{Type: tea.KeyRight})
	p.send(press("esc"))
	p.send(press("f"))
	p.until(func() bool { return !v.Running() && strings.Contains(v.View(), "verdict") }, "the verdict")
	screen := v.View()
	require.Contains(t, screen, "waited on the unique index 49")
	require.Contains(t, screen, "execution BLOCKED")
	require.Contains(t, screen, "last execution BLOCKED")
	require.Contains(t, screen, "EXECUTED 1 (BLOCKED)", "the outcome that committed the BLOCKED execution says so")
	require.Contains(t, screen, "failed closed, nothing was sent")
	require.Contains(t, screen, "locks: peak 16 of the storm's sessions waiting at 12:00:00.000 (9 samples)")
}

func TestTheStormFormShowsTheBodyAndFollowsTheRecordsRevision(t *testing.T) {
	t.Parallel()
	records := newLatest(
		model.Record{ID: tuitest.NoteID, OwnerID: "alice", ModuleCode: "NOTE", Revision: 2, Title: "Groceries (Saturday)",
			Payload: []byte(`{"items": ["milk", "eggs", "bread"]}`)},
		model.Record{ID: tuitest.MemID, OwnerID: "alice", ModuleCode: "MEM-001", Revision: 1, Title: "Meeting notes",
			Payload: []byte(`{"currentContent":"Ship it","originalContent":"Ship it"}`)})
	var mu sync.Mutex
	var specs []stormtypes.Spec
	run := func(ctx context.Context, spec stormtypes.Spec, events chan<- stormtypes.Event, _ chan<- stormtypes.LockSample) (stormtypes.Summary, error) {
		mu.Lock()
		specs = append(specs, spec)
		mu.Unlock()
		if spec.Op == stormtypes.OpPatch { // as the engine would: the record moves on by one revision
			records.update(spec.Patch.RecordID, func(r *model.Record) { r.Revision++ })
		}
		events <- stormtypes.Event{Index: 0, Outcome: "EXECUTED", LatencyMs: 1}
		return summaryOf(spec, map[string]int{"EXECUTED": 1}, stormtypes.Verdict{Verdict: stormtypes.VerdictAgrees, Text: "agrees"}), nil
	}
	deps := views.StormDeps{Run: run, Records: records, Catalog: &catalog{}}
	v := views.NewStorm(plainCtx(), deps)
	// Records hands over a stale revision: the view reads the record itself.
	v.Prepare(uictx.OpenStormMsg{Module: "NOTE", RecordID: tuitest.NoteID, Revision: 1})
	v.SetSize(120, 37)
	p := newProgram(t, v)
	p.run(v.SetActive(true))
	p.until(func() bool { return strings.Contains(v.View(), "(revision 2)") }, "the record's revision")
	screen := v.View()
	require.Contains(t, screen, `NOTE `+tuitest.NoteID+` (revision 2)`+"\n"+`title "Groceries (Saturday)"`)
	require.Regexp(t, `Title\s+Groceries \(Saturday\)`, screen, "the body is shown, prefilled from the record")
	require.Regexp(t, `Payload\s+\{"items": \["milk", "eggs", "bread"\]\}`, screen)
	require.Regexp(t, `Expect revision\s+2`, screen)

	p.send(press("esc"))
	// The fields hold the record's values, as the patch form's do: left so, they are not sent.
	require.Contains(t, v.View(), `body: expectRevision 2 · title (unchanged) · summary (unchanged) · payload (unchanged)`)
	p.send(press("f"))
	p.until(func() bool { return !v.Running() && strings.Contains(v.View(), "(revision 3)") }, "the revision after the storm")
	require.Contains(t, v.View(), "body: expectRevision 3 ·", "the next storm patches from where this one left the record")
	mu.Lock()
	require.Equal(t, stormtypes.OpPatch, specs[0].Op)
	require.Nil(t, specs[0].Patch.Title, "no silent rename: the title is not sent, the record keeps it")
	require.Equal(t, 2, specs[0].Patch.ExpectRevision)
	require.Equal(t, tuitest.NoteID, specs[0].Patch.RecordID)
	require.Equal(t, "alice", specs[0].Owner())
	mu.Unlock()

	// Fired again, the next patch (expectRevision 3, another body) goes under a new key: under
	// the first one it could only be IDEMPOTENCY_KEY_REUSED.
	p.send(press("f"))
	p.until(func() bool { return !v.Running() && strings.Contains(v.View(), "(revision 4)") }, "the second patch storm")
	mu.Lock()
	require.Len(t, specs, 2)
	require.Equal(t, 3, specs[1].Patch.ExpectRevision)
	require.NotEqual(t, specs[0].Patch.Key, specs[1].Patch.Key, "another body, another key")
	mu.Unlock()

	// A create storm from a MEM-001 record sends the module's template as its payload.
	v2 := views.NewStorm(plainCtx(), deps)
	v2.Prepare(uictx.OpenStormMsg{Module: "MEM-001", RecordID: tuitest.MemID, Revision: 1})
	v2.SetSize(120, 37)
	p2 := newProgram(t, v2)
	p2.send(tea.KeyMsg{Type: tea.KeyLeft}) // patch → create
	p2.send(press("esc"))
	require.Contains(t, v2.View(), `body: title "storm" · summary (none) · payload {"originalContent"`)
	p2.send(press("f"))
	p2.until(func() bool { return !v2.Running() && strings.Contains(v2.View(), "verdict") }, "the create storm")
	mu.Lock()
	last := specs[len(specs)-1]
	mu.Unlock()
	require.Equal(t, stormtypes.OpCreate, last.Op)
	require.Equal(t, "MEM-001", last.Create.Module)
	require.Contains(t, string(last.Create.Payload), `"currentContent"`)
	require.Equal(t, "storm", last.Create.Title)
}

func TestTheStormProgressLineIsNeverCut(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	run := func(ctx context.Context, spec stormtypes.Spec, events chan<- stormtypes.Event, _ chan<- stormtypes.LockSample) (stormtypes.Summary, error) {
		for i := range 7 {
			events <- stormtypes.Event{Index: i, Outcome: "JOINED", LatencyMs: 366}
		}
		<-release
		return summaryOf(spec, map[string]int{"JOINED": 7}, stormtypes.Verdict{Verdict: stormtypes.VerdictAgrees, Text: "agrees"}), nil
	}
	v := views.NewStorm(plainCtx(), views.StormDeps{Run: run})
	p := newProgram(t, v)
	v.SetSize(64, 21)
	p.send(press("f"))
	p.until(func() bool { return strings.Contains(v.View(), "7/50 answered") }, "progress")
	for _, w := range []int{40, 64, 80, 104, 137, 184} {
		v.SetSize(w, 21)
		var line string
		for _, l := range strings.Split(v.View(), "\n") {
			if strings.Contains(l, "answered") {
				line = l
			}
		}
		require.NotEmpty(t, line, "width %d", w)
		require.LessOrEqual(t, ansi.StringWidth(line), w)
		require.Regexp(t, `7/50 answered · \d+\.\d s elapsed$`, strings.TrimRight(line, " "), "width %d", w)
	}
	close(release)
	p.until(func() bool { return !v.Running() }, "the end")
}

// connectAs opens a session of b's database named application.
func connectAs(t *testing.T, dsn, application string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), testdb.WithParam(dsn, "application_name", application))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func TestTheLocksViewNamesAStormsSessionsItsKeyAndItsPeak(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	tuitest.SeedFixed(t, b)
	ctx := testdb.Context(t)
	holder, err := b.DB.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `UPDATE record SET title = 'held' WHERE id = $1`, tuitest.NoteID)
	require.NoError(t, err)
	idle := connectAs(t, b.DB.DSN, "an idle bystander")
	require.NoError(t, idle.Ping(ctx))

	// A storm whose one session waits on the holder while it runs.
	waiting := make(chan error, 1)
	run := func(sctx context.Context, spec stormtypes.Spec, events chan<- stormtypes.Event, locks chan<- stormtypes.LockSample) (stormtypes.Summary, error) {
		c, err := pgx.Connect(ctx, testdb.WithParam(b.DB.DSN, "application_name", stormtypes.AppNamePrefix(spec.ID)+"p0"))
		if err != nil {
			return stormtypes.Summary{}, err
		}
		go func() { // it ends when the holder rolls back
			defer c.Close(ctx)
			_, err := c.Exec(ctx, `UPDATE record SET title = 'waiting' WHERE id = $1`, tuitest.NoteID)
			waiting <- err
		}()
		locks <- stormtypes.LockSample{Waiting: 1, PeakWaiting: 1, PeakAt: tuitest.Now}
		<-sctx.Done()
		s := summaryOf(spec, map[string]int{"CANCELLED": spec.N}, stormtypes.Verdict{Verdict: stormtypes.VerdictStopped, Text: "stopped"})
		peak := tuitest.Now.Add(1500 * time.Millisecond)
		s.Locks = stormtypes.LockStats{PeakWaiting: 1, PeakAt: &peak, Samples: 42}
		return s, sctx.Err()
	}
	sv := views.NewStorm(b.Ctx, views.StormDeps{Run: run, Records: b.Backend.Latest, Catalog: b.Backend.Catalog})
	lv := views.NewLocks(b.Ctx, b.Backend.Sessions)
	sv.SetSize(184, 57)
	lv.SetSize(184, 57)
	p := newProgram(t, sv, lv)
	p.run(lv.SetActive(true))
	p.send(press("f"))
	storming := regexp.MustCompile(`idemwork storm [0-9a-f]{6} p0\s+active\s+transactionid`)
	p.until(func() bool { return lv.Waiting() == 1 && storming.MatchString(lv.View()) }, "the storm's session waiting on the holder")
	screen := lv.View()
	key := sv.Selection()
	require.Contains(t, screen, "running: 1 of its sessions wait now, peak 1 at 12:00:00.000")
	row := lineWith(screen, "idemwork storm")
	require.Contains(t, row, key[:14], "the storm's key, as far as the column goes")
	require.Regexp(t, `\d+\.\d s`, row, "a readable duration")
	require.NotContains(t, screen, "an idle bystander", "idle sessions are hidden by default")
	require.Regexp(t, `[1-9]\d* idle hidden \(i\)`, screen)
	holderRow := lineWith(screen, "idle in tx")
	require.NotEmpty(t, holderRow, "an open transaction is never hidden")

	p.send(press("i"))
	require.Contains(t, lv.View(), "an idle bystander")
	require.Contains(t, lv.View(), "idle shown (i hides)")

	p.send(press("ctrl+x"))
	p.until(func() bool { return !sv.Running() }, "the stop")
	require.Contains(t, lv.View(), fmt.Sprintf("last storm %s on key %s: peak 1 of its sessions waiting at 12:00:01.500 (42 samples every 15ms)",
		strings.Fields(strings.TrimLeft(row, "> "))[3], key)) // the row may carry the cursor mark
	require.NoError(t, holder.Rollback(ctx))
	require.NoError(t, <-waiting)
}

func lineWith(screen, s string) string {
	for _, l := range strings.Split(screen, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// statusRecorder keeps the status messages the program carried.
type statusRecorder struct {
	mu   sync.Mutex
	msgs []uictx.StatusMsg
}

func (r *statusRecorder) Update(msg tea.Msg) tea.Cmd {
	if st, ok := msg.(uictx.StatusMsg); ok {
		r.mu.Lock()
		r.msgs = append(r.msgs, st)
		r.mu.Unlock()
	}
	return nil
}

func (r *statusRecorder) last() (uictx.StatusMsg, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.msgs) == 0 {
		return uictx.StatusMsg{}, false
	}
	return r.msgs[len(r.msgs)-1], true
}

// A storm fired while the database is down sends no request (the engine cannot read the key
// first) and has no summary: the verdict's place says it did not run, with the code and what
// to do, at 80 columns, and the status line says it as an error — never a blank, never
// "storm done". A storm stopped before it sent anything says that too.
func TestAStormThatDidNotRunSaysSoWithItsCode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"database down", views.Unreachable(apperr.New(apperr.DatabaseUnavailable, "the connection to the database was lost or could not be made")),
			"verdict ✗ the storm did not run: DATABASE_UNAVAILABLE: the database is not reachable (stopped, or the connection dropped): " +
				"start it with idemwork --data-dir /srv/idemwork/pg db start, or restart the workbench; r refreshes every view · f fires the storm again"},
		{"statement timeout", apperr.New(apperr.DatabaseUnavailable, "the database cancelled the statement when it reached statement_timeout"),
			"verdict ✗ the storm did not run: DATABASE_UNAVAILABLE: the database cancelled the statement when it reached statement_timeout"},
		{"stopped first", context.Canceled, "verdict ✗ the storm did not run: stopped before any request was sent"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			run := func(context.Context, stormtypes.Spec, chan<- stormtypes.Event, chan<- stormtypes.LockSample) (stormtypes.Summary, error) {
				return stormtypes.Summary{}, c.err
			}
			ctx := plainCtx()
			ctx.Conn.DataDir = "/srv/idemwork/pg" // the session's --data-dir, named in what to do
			v := views.NewStorm(ctx, views.StormDeps{Run: run})
			v.SetSize(63, 21) // the body at 80×24
			rec := &statusRecorder{}
			p := newProgram(t, v, rec)
			p.send(press("f"))
			p.until(func() bool { _, ok := rec.last(); return ok && !v.Running() }, "the storm's end")
			screen := ansi.Strip(v.View())
			for _, l := range strings.Split(screen, "\n") {
				require.LessOrEqual(t, ansi.StringWidth(l), 63)
			}
			require.Contains(t, strings.Join(strings.Fields(screen), " "), c.want, "the whole reason, wrapped:\n%s", screen)
			require.NotContains(t, screen, "…", "nothing of it cut:\n%s", screen)
			st, _ := rec.last()
			require.True(t, st.Error, "%+v", st)
			require.Equal(t, "storm #1 did not run: "+strings.TrimPrefix(c.want, "verdict ✗ the storm did not run: "), st.Text)
		})
	}
}

// explainer answers what a KEY_REUSED request differs in.
type explainer struct{ got model.WriteRequest }

func (e *explainer) ExplainKeyReuse(_ context.Context, r model.WriteRequest) (model.ReuseReport, error) {
	e.got = r
	return model.ReuseReport{Rebuilt: true, Fields: []model.FieldDiff{{Name: "title"}, {Name: "payload", Detail: "at payload.text"}}}, nil
}

// A storm answered IDEMPOTENCY_KEY_REUSED says which fields of its body differ from the key's
// first request; a lock peak above "waited on the unique index" says why the two differ.
func TestAStormSaysWhatItsBodyDiffersInAndWhyLocksExceedWaits(t *testing.T) {
	t.Parallel()
	run := func(_ context.Context, spec stormtypes.Spec, events chan<- stormtypes.Event, _ chan<- stormtypes.LockSample) (stormtypes.Summary, error) {
		for i := range spec.N {
			events <- stormtypes.Event{Index: i, Outcome: string(apperr.KeyReused), LatencyMs: 1}
		}
		s := summaryOf(spec, map[string]int{string(apperr.KeyReused): spec.N}, stormtypes.Verdict{Verdict: stormtypes.VerdictRejected, Text: "no request succeeded"})
		s.Locks = stormtypes.LockStats{PeakWaiting: 14, Samples: 9}
		return s, nil
	}
	ex := &explainer{}
	v := views.NewStorm(plainCtx(), views.StormDeps{Run: run, Reuse: ex})
	v.SetSize(120, 37)
	p := newProgram(t, v)
	p.send(press("f"))
	p.until(func() bool { return !v.Running() && strings.Contains(v.View(), "differs from") }, "the explanation")
	screen := strings.Join(strings.Fields(ansi.Strip(v.View())), " ")
	require.Contains(t, screen, "IDEMPOTENCY_KEY_REUSED: this request differs from the key's first request in title, payload (at payload.text)")
	require.Equal(t, model.KindCreate, ex.got.Kind, "the storm's own request is what is compared")
	require.Equal(t, v.Selection(), ex.got.Key())
	require.Contains(t, screen, "locks: peak 14 of the storm's sessions waiting (9 samples)")
	require.Contains(t, screen, "why 14 ≠ 0: the peak counts the storm's sessions waiting on a lock at one moment")
	require.Contains(t, screen, "\"waited on the unique index\" counts only the requests that queued behind the holder and then found its committed result")
}

// The Storm offers what the create form offers: a create's module (its payload template with
// it), and a summary.
func TestAStormCreatesInTheModuleChosenWithTheFormsFields(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got stormtypes.Spec
	run := func(_ context.Context, spec stormtypes.Spec, _ chan<- stormtypes.Event, _ chan<- stormtypes.LockSample) (stormtypes.Summary, error) {
		mu.Lock()
		got = spec
		mu.Unlock()
		return summaryOf(spec, map[string]int{"EXECUTED": spec.N}, stormtypes.Verdict{Verdict: stormtypes.VerdictAgrees, Text: "agrees"}), nil
	}
	v := views.NewStorm(plainCtx(), views.StormDeps{Run: run})
	v.SetSize(120, 37)
	p := newProgram(t, v)
	p.send(press("e"))
	p.send(tea.KeyMsg{Type: tea.KeyDown})  // Module
	p.send(tea.KeyMsg{Type: tea.KeyRight}) // MEM-001
	p.send(tea.KeyMsg{Type: tea.KeyRight}) // COMMITMENT
	for range 3 {
		p.send(tea.KeyMsg{Type: tea.KeyDown}) // key, title, summary
	}
	for _, r := range "due soon" {
		p.send(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
	}
	p.send(tea.KeyMsg{Type: tea.KeyCtrlS})
	require.Contains(t, v.View(), "fires at create a COMMITMENT record for alice")
	p.send(press("f"))
	p.until(func() bool { return !v.Running() && strings.Contains(v.View(), "verdict") }, "the storm")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, "COMMITMENT", got.Create.Module)
	require.Equal(t, "due soon", *got.Create.Summary)
	require.JSONEq(t, `{"status":"OPEN","due":"2026-12-31"}`, string(got.Create.Payload), "the module's template")
}
