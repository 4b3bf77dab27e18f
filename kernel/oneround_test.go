package kernel_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// A create's one round trip (issue 27) keeps SPEC §4.2's order. Its prepare runs on the client
// before the round trip, its writes travel guarded on the reservation, and each test here counts
// what reaches the wire.

// oneTripCreate is what a create's one round trip sends (statements by their first three words).
const oneTripCreate = "batch[begin; settings; select k.operation, k.fingerprint,; with ins as; insert into record; " +
	"insert into record_revision; insert into audit_event; with u as; commit]"

// warmCreate primes k's connection's statement cache with a create, so later round trips carry
// no prepare, and forgets what it sent.
func warmCreate(t *testing.T, k *kernel.Kernel, w *testdb.Trips) {
	t.Helper()
	noShare := false
	_, err := k.Create(context.Background(), model.CreateInput{Owner: "warm", Module: kernel.ModuleNote, Key: "warm", Title: "w",
		ShareInFlight: &noShare})
	require.NoError(t, err)
	w.Take()
}

// rowsOf counts what a write under (owner, key) left: its key row, records, revisions and audit
// events.
func rowsOf(t *testing.T, db *testdb.DB, owner, key string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for name, q := range map[string]string{
		"key":      `SELECT count(*) FROM idempotency_record WHERE owner_id = $1 AND idempotency_key = $2`,
		"record":   `SELECT count(*) FROM record WHERE owner_id = $1 AND $2::text IS NOT NULL`,
		"revision": `SELECT count(*) FROM record_revision WHERE owner_id = $1 AND idempotency_key = $2`,
		"audit":    `SELECT count(*) FROM audit_event WHERE owner_id = $1 AND idempotency_key = $2`,
	} {
		var n int
		require.NoError(t, db.Pool.QueryRow(context.Background(), q, owner, key).Scan(&n))
		out[name] = n
	}
	return out
}

var nothing = map[string]int{"key": 0, "record": 0, "revision": 0, "audit": 0}

// A key another process committed is answered by the same one round trip a fresh key takes:
// the reservation finds it taken, the writes behind it do nothing, and the key read ahead of it
// gives back the first result. Nothing more is written.
func TestACommittedKeyReplaysFromTheCreatesOneRoundTripWritingNothing(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	first, _ := tracedKernel(t, db)
	ctx := context.Background()
	noShare := false
	in := model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "taken", Title: "first", ShareInFlight: &noShare}
	created, err := first.Create(ctx, in)
	require.NoError(t, err)
	before := rowsOf(t, db, "alice", "taken")
	require.Equal(t, map[string]int{"key": 1, "record": 1, "revision": 1, "audit": 1}, before)

	other, w := tracedKernel(t, db)
	warmCreate(t, other, w)
	again, err := other.Create(ctx, in)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	require.False(t, again.Waited)
	require.Equal(t, *created.Record, *again.Record)
	require.Equal(t, string(created.Envelope), string(again.Envelope))
	require.Equal(t, []string{oneTripCreate}, w.Take())
	require.Equal(t, before, rowsOf(t, db, "alice", "taken"))
}

// A leftover PROCESSING row (committed, not expired) is IDEMPOTENCY_IN_PROGRESS, answered from
// the same one round trip, and never executed.
func TestALeftoverProcessingKeyIsInProgressFromTheCreatesOneRoundTrip(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	k, w := tracedKernel(t, db)
	warmCreate(t, k, w)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, created_at,
		expires_at, updated_at) VALUES ('alice', 'stuck', $1, 'x', 'PROCESSING', now(), now() + interval '1 hour', now())`,
		model.OpCreate(kernel.ModuleNote))
	require.NoError(t, err)
	noShare := false
	_, err = k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "stuck", Title: "n", ShareInFlight: &noShare})
	requireCode(t, err, apperr.InProgress)
	require.Equal(t, []string{oneTripCreate}, w.Take())
	require.Equal(t, map[string]int{"key": 1, "record": 0, "revision": 0, "audit": 0}, rowsOf(t, db, "alice", "stuck"))
	var status string
	var response []byte
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status, response FROM idempotency_record WHERE owner_id = 'alice' AND idempotency_key = 'stuck'`).
		Scan(&status, &response))
	require.Equal(t, "PROCESSING", status, "the leftover row is left as it was")
	require.Nil(t, response)
}

// A create whose key another transaction holds waits on the unique index for it; when that
// transaction commits, the create replays its result (waited), executing nothing.
func TestACreateWhoseKeyIsHeldWaitsAndReplaysTheHoldersResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := newGate(t)
	held := b.k.WithFaults(func(_ context.Context, step string) error {
		if step == kernel.StepSucceeded {
			g.Hold()
		}
		return nil
	})
	noShare := false
	in := model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "held", Title: "n", ShareInFlight: &noShare}
	var wg sync.WaitGroup
	var first model.WriteResult
	var firstErr error
	wg.Go(func() { first, firstErr = held.Create(ctx, in) })
	g.AwaitHeld(t)
	// Another process's kernel: its create is the one round trip, whose reservation waits.
	other := kernel.New(b.db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
	var second model.WriteResult
	var secondErr error
	wg.Go(func() { second, secondErr = other.Create(ctx, in) })
	waitForLockWaiters(t, b.db.DB, 1)
	g.Open()
	wg.Wait()
	require.NoError(t, firstErr)
	require.NoError(t, secondErr)
	require.Equal(t, idemtype.Executed, first.Outcome)
	require.Equal(t, idemtype.Replayed, second.Outcome)
	require.True(t, second.Waited)
	require.Equal(t, first.Record.ID, second.Record.ID)
	require.Equal(t, map[string]int{"key": 1, "record": 1, "revision": 1, "audit": 1}, rowsOf(t, b.db, "alice", "held"))
}

// A fresh key whose prepare fails (a title the JSON boundary refuses) wins its reservation,
// fails, and rolls everything back: no key row, record, revision or audit event is left, and
// the key is free for a good request.
func TestAPrepareFailureOnAFreshKeyLeavesNothing(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	k, w := tracedKernel(t, db)
	warmCreate(t, k, w)
	ctx := context.Background()
	noShare := false
	_, err := k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "bad", Title: strings.Repeat("t", 201),
		ShareInFlight: &noShare})
	requireCode(t, err, apperr.ValidationFailed)
	require.Equal(t, nothing, rowsOf(t, db, "alice", "bad"))
	trips := w.Take()
	require.Contains(t, trips[0], "with ins as", "the reservation was taken before the failure was answered")
	res, err := k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "bad", Title: "good", ShareInFlight: &noShare})
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, res.Outcome)
}

// A cache hit runs no module rule's effects: a retry whose body the module's rules now refuse
// (they changed after the first success) still replays the first result — from another process,
// whose runner has not answered the key, so its prepare ran ahead and failed — and writes
// nothing.
func TestARetryWhosePrepareNowFailsStillReplaysTheFirstResult(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	first, _ := tracedKernel(t, db)
	ctx := context.Background()
	noShare := false
	in := model.CreateInput{Owner: "alice", Module: kernel.ModuleMem, Key: "rule", Title: "memo", ShareInFlight: &noShare,
		Payload: raw(map[string]any{"originalContent": "hello world", "currentContent": "hello world"})}
	created, err := first.Create(ctx, in)
	require.NoError(t, err)
	before := rowsOf(t, db, "alice", "rule")

	other, w := tracedKernel(t, db)
	other.Registry.Rules.SetMemMaxContentLength(5)
	_, err = other.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleMem, Key: "rule-new", Title: "memo",
		ShareInFlight: &noShare, Payload: in.Payload})
	requireCode(t, err, apperr.ValidationFailed)
	w.Take()
	again, err := other.Create(ctx, in)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	require.Equal(t, *created.Record, *again.Record)
	require.Equal(t, before, rowsOf(t, db, "alice", "rule"))
	require.Len(t, w.Take(), 2, "the failed prepare's request reserves (and meets the key) in one round trip, then ends")
}

// Through a transaction-pooling pgbouncer, in the exec mode idemwork chooses there, the round
// trips are the same: a fresh key's create one, a create another process committed one (its
// replay), a feature run two.
func TestThroughATransactionPoolerAFreshKeyIsStillOneRoundTripAndAFeatureRunTwo(t *testing.T) {
	t.Parallel()
	name := testdb.NewDatabase(t)
	dsn := testdb.PgBouncer(t, store.PoolerTransaction).DSN(name)
	open := func() (*kernel.Kernel, *testdb.Trips) {
		w := &testdb.Trips{Words: 3}
		db, err := store.Open(context.Background(), dsn, store.Options{Pooler: store.PoolerTransaction, MaxConns: 1, Tracer: w})
		require.NoError(t, err)
		t.Cleanup(db.Close)
		require.Equal(t, "exec", db.Connection().ExecMode)
		return kernel.New(db, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{}), w
	}
	k, w := open()
	warmCreate(t, k, w)
	ctx := context.Background()
	noShare := false
	in := model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "pooled", Title: "n", ShareInFlight: &noShare}
	created, err := k.Create(ctx, in)
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, created.Outcome)
	require.Equal(t, []string{oneTripCreate}, w.Take())

	ran, err := k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: created.Record.ID, FeatureID: "F01",
		Key: "pooled-f", ShareInFlight: &noShare})
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, ran.Outcome)
	require.Len(t, w.Take(), 2)

	other, ow := open()
	warmCreate(t, other, ow)
	again, err := other.Create(ctx, in)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	require.Equal(t, *created.Record, *again.Record)
	require.Equal(t, []string{oneTripCreate}, ow.Take())
}
