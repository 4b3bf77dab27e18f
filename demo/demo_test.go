package demo_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/demo"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/outbox"
	"github.com/idemwork/idemwork/verify"
)

// The guided walk-throughs (SPEC §7): each claim a step makes is asserted here again on the
// rows themselves, with this test's own SQL, right after the step — not read back from the
// step's own checks, which are asserted besides.

// requireChecksHold fails on any check of the step the database did not bear out.
func requireChecksHold(t *testing.T, s model.DemoStep) {
	t.Helper()
	require.NotEmpty(t, s.Step)
	for _, c := range s.Checks {
		require.True(t, c.OK, "%s: %s: %s", s.Step, c.Claim, c.Text)
		require.NotEmpty(t, c.Claim)
	}
}

// messageRow is an outbox_message as this test reads it.
type messageRow struct {
	status, idemID string
	attempts       int
	lastError      *string
	next, updated  time.Time
}

func (b *testBundle) message(t *testing.T, execID string) messageRow {
	t.Helper()
	var m messageRow
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT status, idempotency_id, attempts, last_error, next_attempt_at, updated_at
		FROM outbox_message WHERE execution_id = $1`, execID).Scan(&m.status, &m.idemID, &m.attempts, &m.lastError, &m.next, &m.updated))
	return m
}

func (b *testBundle) execStatus(t *testing.T, execID string) string {
	t.Helper()
	var s string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT status FROM feature_execution WHERE id = $1`, execID).Scan(&s))
	return s
}

func (b *testBundle) auditOf(t *testing.T, key string) []string {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT action FROM audit_event WHERE idempotency_key = $1 ORDER BY at, id`, key)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var a string
		require.NoError(t, rows.Scan(&a))
		out = append(out, a)
	}
	require.NoError(t, rows.Err())
	return out
}

// writers is the distinct xmins of the rows a feature request with key wrote.
func (b *testBundle) writers(t *testing.T, key string) []string {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT DISTINCT x FROM (
		SELECT xmin::text AS x FROM idempotency_record WHERE idempotency_key = $1
		UNION ALL SELECT xmin::text FROM feature_execution WHERE idempotency_key = $1
		UNION ALL SELECT m.xmin::text FROM outbox_message m JOIN feature_execution e ON e.id = m.execution_id WHERE e.idempotency_key = $1
		UNION ALL SELECT xmin::text FROM audit_event WHERE idempotency_key = $1) w`, key)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var x string
		require.NoError(t, rows.Scan(&x))
		out = append(out, x)
	}
	require.NoError(t, rows.Err())
	return out
}

func TestTheBlockedExternalWalkThroughsClaimsHoldOnTheRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d := demo.NewBlocked(b.k, "alice", "demo-test")

	create, err := d.Next(ctx)
	require.NoError(t, err)
	requireChecksHold(t, create)
	require.Equal(t, 1, b.currentRevision(t, "alice", create.Record.ID))

	publish, err := d.Next(ctx)
	require.NoError(t, err)
	requireChecksHold(t, publish)
	require.Len(t, publish.Checks, 5)
	e := publish.Execution
	var mode, status string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT mode, status FROM feature_execution WHERE id = $1`, e.ID).Scan(&mode, &status))
	require.Equal(t, []string{"blocked_external", "BLOCKED"}, []string{mode, status}, "a direct_external feature fails closed to BLOCKED")
	require.Equal(t, 1, b.currentRevision(t, "alice", create.Record.ID), "the record keeps its pre-request revision")
	require.Equal(t, []string{"FEATURE_F02_BLOCKED"}, b.auditOf(t, d.PublishKey()))
	require.Zero(t, b.Count(t, `SELECT count(*) FROM outbox_message`), "nothing is queued for a provider")
	require.Equal(t, "BLOCKED (outcome EXECUTED)", publish.Result, "a BLOCKED run says BLOCKED")
	require.Contains(t, publish.Notes[0], "BLOCKED (outcome EXECUTED)")

	before := b.Counts(t)
	replay, err := d.Next(ctx)
	require.NoError(t, err)
	requireChecksHold(t, replay)
	require.Equal(t, idemtype.Replayed, replay.Outcome)
	require.Equal(t, e.ID, replay.Execution.ID)
	require.Equal(t, "BLOCKED (outcome REPLAYED)", replay.Result)
	require.Equal(t, before, b.Counts(t), "the replay wrote nothing")
	require.True(t, d.Done())
	_, err = d.Next(ctx)
	require.Error(t, err)
}

func TestABlockedWalkThroughReportsAClaimTheRowsDoNotBearOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d := demo.NewBlocked(b.k, "alice", "demo-tampered")
	for range 2 {
		_, err := d.Next(ctx)
		require.NoError(t, err)
	}
	// Someone turns the fail-closed fact into a success behind the demo's back.
	b.Exec(t, `UPDATE feature_execution SET status = 'SUCCEEDED' WHERE idempotency_key = 'demo-tampered:publish'`)
	replay, err := d.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, replay.Failed(), "the execution no longer matches its digest: the replay fails closed, and the checks say so: %+v", replay.Checks)
	require.Equal(t, "fails closed: SNAPSHOT_INTEGRITY_VIOLATION", replay.Result)
	require.True(t, replay.Checks[2].OK, "the replay wrote nothing")
}

// outboxSettings are the workbench defaults.
var outboxSettings = outbox.Options{MaxAttempts: 5, BaseBackoff: 500 * time.Millisecond, MaxBackoff: 5 * time.Minute, Lease: 30 * time.Second}

func TestTheOutboxWalkThroughsClaimsHoldOnTheRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// Another owner's message is due all along: the demo's worker must never touch it.
	bobs := b.CreateCommitment(t, "bob", "bob-c")
	bobRun, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: "bob", Module: kernel.ModuleCommitment, RecordID: bobs.Record.ID, FeatureID: "F02", Key: "bob-n"})
	require.NoError(t, err)

	d, err := demo.NewOutbox(b.k, "alice", "demo-test", outboxSettings)
	require.NoError(t, err)
	p := d.Provider()
	next := func() model.DemoStep {
		t.Helper()
		s, err := d.Next(ctx)
		require.NoError(t, err)
		requireChecksHold(t, s)
		return s
	}

	// 1. The record, with its key.
	rec := next()
	require.Equal(t, idemtype.Executed, rec.Outcome)
	require.Empty(t, d.Reused(), "a first run reuses nothing")
	require.Equal(t, 1, b.Count(t, `SELECT count(*) FROM record WHERE owner_id = 'alice' AND module_code = 'COMMITMENT'`))
	require.Equal(t, 1, b.Count(t, `SELECT count(*) FROM idempotency_record WHERE idempotency_key = 'demo-test:record' AND status = 'SUCCEEDED'`))

	// 2. PENDING execution + outbox message, in the request's transaction.
	queued := next()
	e1 := queued.Execution.ID
	require.Equal(t, "PENDING (outcome EXECUTED)", queued.Result)
	require.Equal(t, "PENDING", b.execStatus(t, e1))
	m1 := b.message(t, e1)
	require.Equal(t, "PENDING", m1.status)
	require.Zero(t, m1.attempts)
	require.Equal(t, e1, m1.idemID, "the message carries the execution's id as the provider's idempotency id")
	require.Len(t, b.writers(t, d.NotifyKey(1)), 1, "key row, execution, message and audit event share one transaction")
	require.Equal(t, []string{"FEATURE_F02_QUEUED"}, b.auditOf(t, d.NotifyKey(1)))
	require.Equal(t, 1, b.currentRevision(t, "alice", rec.Record.ID))
	require.Zero(t, p.Calls(e1), "no provider call inside the transaction")

	// 3. The replay writes nothing.
	before, xmins := b.Counts(t), b.writers(t, d.NotifyKey(1))
	replay := next()
	require.Equal(t, idemtype.Replayed, replay.Outcome)
	require.Equal(t, e1, replay.Execution.ID)
	require.Equal(t, before, b.Counts(t))
	require.Equal(t, xmins, b.writers(t, d.NotifyKey(1)))

	// 4. Delivered with the message's idempotency id, settled in a transaction of its own.
	next()
	m1 = b.message(t, e1)
	require.Equal(t, "DELIVERED", m1.status)
	require.Equal(t, 1, m1.attempts)
	require.Nil(t, m1.lastError)
	require.Equal(t, "DELIVERED", b.execStatus(t, e1))
	require.Equal(t, []string{"FEATURE_F02_QUEUED", "FEATURE_F02_DELIVERED"}, b.auditOf(t, d.NotifyKey(1)))
	require.Len(t, b.writers(t, d.NotifyKey(1)), 2, "the request's transaction, then the settle's")
	require.True(t, p.HasDelivered(e1))
	require.Equal(t, 1, p.Calls(e1))

	// 5. A failed call: PENDING again, the error kept, a retry after the first backoff.
	failed := next()
	e2 := failed.Execution.ID
	m2 := b.message(t, e2)
	require.Equal(t, "PENDING", m2.status)
	require.Equal(t, 1, m2.attempts)
	require.NotNil(t, m2.lastError)
	require.Equal(t, outbox.ErrSimulatedFailure.Error(), *m2.lastError)
	delay := m2.next.Sub(m2.updated)
	require.GreaterOrEqual(t, delay, 400*time.Millisecond, "0.5 s ±20 %%")
	require.LessOrEqual(t, delay, 600*time.Millisecond)
	require.Equal(t, "PENDING", b.execStatus(t, e2))
	require.Equal(t, []string{"FEATURE_F02_QUEUED"}, b.auditOf(t, d.NotifyKey(2)))
	require.False(t, p.HasDelivered(e2))

	// 6. A crash between the call and the settle: the provider did the work, the rows do not
	// know; the lease hides the message.
	next()
	m2 = b.message(t, e2)
	require.Equal(t, "PENDING", m2.status)
	require.Equal(t, 2, m2.attempts)
	require.Equal(t, 30*time.Second, m2.next.Sub(m2.updated), "hidden for the lease")
	require.Equal(t, "PENDING", b.execStatus(t, e2))
	require.Equal(t, []string{"FEATURE_F02_QUEUED"}, b.auditOf(t, d.NotifyKey(2)))
	require.True(t, p.HasDelivered(e2), "the provider has the effect")
	require.Equal(t, 2, p.Calls(e2))

	// 7. Redelivered under the same idempotency id after the lease: one effect.
	next()
	m2 = b.message(t, e2)
	require.Equal(t, "DELIVERED", m2.status)
	require.Equal(t, 3, m2.attempts)
	require.Equal(t, e2, m2.idemID)
	require.Equal(t, "DELIVERED", b.execStatus(t, e2))
	require.Equal(t, []string{"FEATURE_F02_QUEUED", "FEATURE_F02_DELIVERED"}, b.auditOf(t, d.NotifyKey(2)))
	require.Equal(t, 3, p.Calls(e2), "called again after the crash")
	require.Equal(t, 2, p.Delivered(), "one effect for notify-2 (and one for notify-1): the redelivery was deduplicated")

	// 8. Every attempt fails: FAILED after the fifth.
	exhausted := next()
	e3 := exhausted.Execution.ID
	m3 := b.message(t, e3)
	require.Equal(t, "FAILED", m3.status)
	require.Equal(t, 5, m3.attempts)
	require.NotNil(t, m3.lastError)
	require.Equal(t, "FAILED", b.execStatus(t, e3))
	require.Equal(t, []string{"FEATURE_F02_QUEUED", "FEATURE_F02_FAILED"}, b.auditOf(t, d.NotifyKey(3)))
	require.Equal(t, 5, p.Calls(e3))
	require.False(t, p.HasDelivered(e3))
	require.Zero(t, p.PendingFailures())

	// 9. Everything settled; a replay returns the settled execution.
	last := next()
	require.True(t, d.Done())
	require.Equal(t, idemtype.Replayed, last.Outcome)
	require.Equal(t, e1, last.Execution.ID)
	require.Equal(t, "DELIVERED (outcome REPLAYED)", last.Result)
	require.Zero(t, b.Count(t, `SELECT count(*) FROM outbox_message WHERE owner_id = 'alice' AND status = 'PENDING'`))
	require.Equal(t, 1, b.currentRevision(t, "alice", rec.Record.ID), "the outbox never wrote the record")
	require.Greater(t, d.ClockMoved(), 30*time.Second, "the clock moved past the lease and the backoffs")

	bob := b.message(t, bobRun.Execution.ID)
	require.Equal(t, "PENDING", bob.status, "bob's message was never claimed by the demo's worker")
	require.Zero(t, bob.attempts)

	rep, err := verify.Invariants(ctx, b.k, model.VerifyOptions{})
	require.NoError(t, err)
	require.True(t, rep.OK, "the walk-through leaves rows idemwork verify accepts: %+v", rep.Failed())
}

func TestASecondOutboxWalkThroughReusesTheRecordAndSaysSo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first, reused, err := demo.RunOutbox(ctx, b.k, "alice", "demo-again", outboxSettings)
	require.NoError(t, err)
	require.Empty(t, reused)
	second, reused, err := demo.RunOutbox(ctx, b.k, "alice", "demo-again", outboxSettings)
	require.NoError(t, err)
	require.Len(t, second, len(model.OutboxSteps))
	for _, s := range append(first, second...) {
		requireChecksHold(t, s)
	}
	require.Len(t, reused, 1)
	require.Contains(t, reused[0], first[0].Record.ID)
	require.Equal(t, second[0].Reused, reused[0])
	require.Equal(t, idemtype.Replayed, second[0].Outcome)
	require.Equal(t, first[0].Record.ID, second[0].Record.ID)
	require.Equal(t, 1, b.Count(t, `SELECT count(*) FROM record WHERE module_code = 'COMMITMENT'`), "one record for both runs")
	require.Equal(t, 6, b.Count(t, `SELECT count(*) FROM feature_execution`), "each run notifies anew")
	require.NotEqual(t, first[1].Execution.ID, second[1].Execution.ID)
}

func TestAnOutboxWalkThroughReportsAClaimTheRowsDoNotBearOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	d, err := demo.NewOutbox(b.k, "alice", "demo-raced", outboxSettings)
	require.NoError(t, err)
	for range 3 {
		_, err := d.Next(ctx)
		require.NoError(t, err)
	}
	// Another worker (the Outbox view's d, say) delivers the message before the demo's does.
	other := outbox.NewWorker(b.db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": outbox.NewMemoryProvider()}, Clock: b.clock})
	rep, err := other.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Delivered)
	deliver, err := d.Next(ctx)
	require.NoError(t, err)
	require.Positive(t, deliver.Failed(), "the demo's provider never saw the message, and the step says so: %+v", deliver.Checks)
}

func TestTheOutboxWalkThroughNeedsARetryToShow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := demo.NewOutbox(b.k, "alice", "demo-x", outbox.Options{MaxAttempts: 1})
	requireCode(t, err, apperr.ValidationFailed)
}

func TestTheComparisonSetsBothModesSideBySideFromTheirRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	blocked := demo.NewBlocked(b.k, "alice", "cmp-blocked")
	for !blocked.Done() {
		_, err := blocked.Next(ctx)
		require.NoError(t, err)
	}
	d, err := demo.NewOutbox(b.k, "alice", "cmp-outbox", outboxSettings)
	require.NoError(t, err)
	var queued model.DemoStep
	for range 2 {
		queued, err = d.Next(ctx)
		require.NoError(t, err)
	}
	c, err := demo.CompareModes(ctx, b.k, "alice", blocked.PublishKey(), d.NotifyKey(1))
	require.NoError(t, err)
	require.Equal(t, "blocked_external", c.Blocked.Mode)
	require.Equal(t, "outbox", c.Outbox.Mode)
	require.Contains(t, c.Blocked.Client, "BLOCKED (outcome EXECUTED)")
	require.Contains(t, c.Outbox.Client, "PENDING (outcome EXECUTED)")
	require.Contains(t, c.Blocked.Committed, "no outbox message")
	require.Contains(t, c.Blocked.Committed, "audit_event FEATURE_F02_BLOCKED")
	require.Contains(t, c.Outbox.Committed, "audit_event FEATURE_F02_QUEUED")
	require.Contains(t, c.Blocked.Provider, "nothing, ever")
	require.Contains(t, c.Outbox.Provider, "will get idempotency id")
	require.Contains(t, c.Outbox.Replay, "still PENDING")

	// Delivered since: the same request now replays as DELIVERED, and the comparison reads it.
	for range 2 {
		_, err := d.Next(ctx)
		require.NoError(t, err)
	}
	c, err = demo.CompareModes(ctx, b.k, "alice", blocked.PublishKey(), d.NotifyKey(1))
	require.NoError(t, err)
	require.Contains(t, c.Outbox.Replay, "now DELIVERED")
	require.Contains(t, c.Outbox.Committed[0], "status PENDING, now DELIVERED", "what committed, and what it became")
	require.Contains(t, c.Outbox.Provider, "DELIVERED after 1 attempt")
	require.Contains(t, c.Blocked.Replay, "still BLOCKED")

	// The text follows the rows, not a script: a tampered execution shows as it is.
	b.Exec(t, `UPDATE outbox_message SET attempts = 4 WHERE owner_id = 'alice' AND execution_id = $1`, queued.Execution.ID)
	c, err = demo.CompareModes(ctx, b.k, "alice", blocked.PublishKey(), d.NotifyKey(1))
	require.NoError(t, err)
	require.Contains(t, c.Outbox.Provider, "after 4 attempt(s)")

	_, err = demo.CompareModes(ctx, b.k, "alice", "cmp-blocked:create", d.NotifyKey(1))
	requireCode(t, err, apperr.ValidationFailed)
}

func TestABlockedRunReadsBlockedAndTheFeaturePickerNamesModes(t *testing.T) {
	t.Parallel()
	require.Equal(t, "BLOCKED (outcome EXECUTED)", model.OutcomeText(idemtype.Executed, &model.Execution{Status: "BLOCKED"}))
	require.Equal(t, "BLOCKED (outcome JOINED)", model.OutcomeText(idemtype.Joined, &model.Execution{Status: "BLOCKED"}))
	require.Equal(t, "EXECUTED", model.OutcomeText(idemtype.Executed, &model.Execution{Status: "SUCCEEDED"}))
	require.Equal(t, "REPLAYED", model.OutcomeText(idemtype.Replayed, nil))
	reg := kernel.NewRegistry(kernel.NewRules(10))
	mem, err := reg.Module(kernel.ModuleMem)
	require.NoError(t, err)
	f, _ := mem.Feature("F02")
	require.Equal(t, "F02 publish · direct_external → blocked", f.Label())
	f, _ = mem.Feature("F01")
	require.Equal(t, "F01 rewrite · internal", f.Label())
	c, err := reg.Module(kernel.ModuleCommitment)
	require.NoError(t, err)
	f, _ = c.Feature("F02")
	require.Equal(t, "F02 notify · outbox → queued for the worker", f.Label())
}
