package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/inspect"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/readmodel"
	"github.com/idemwork/idemwork/verify"
)

// route is one way of reaching a fresh test database: directly or through a real pgbouncer,
// in one of pgx's exec modes ("" lets idemwork choose).
type route struct {
	name   string
	pooler store.Pooler
	mode   string
}

func (r route) dsn(t *testing.T, database string) string {
	t.Helper()
	dsn := testdb.DSNOf(t, database)
	if r.pooler != store.PoolerNone {
		dsn = testdb.PgBouncer(t, r.pooler).DSN(database)
	}
	if r.mode != "" {
		dsn = store.WithDSNParams(dsn, [][2]string{{"default_query_exec_mode", r.mode}})
	}
	return dsn
}

// routes are every exec mode straight to PostgreSQL, and every mode each pooler can carry
// (plus idemwork's own choice there).
func routes() []route {
	var out []route
	for _, m := range store.ExecModes() {
		out = append(out, route{"direct/" + m, store.PoolerNone, m})
	}
	for _, m := range append([]string{""}, store.ExecModes()...) {
		if m != "cache_statement" {
			out = append(out, route{"pgbouncer-transaction/" + m, store.PoolerTransaction, m})
		}
		out = append(out, route{"pgbouncer-session/" + m, store.PoolerSession, m})
	}
	return out
}

func openRoute(t *testing.T, r route, database string, maxConns int32) *kernel.Kernel {
	t.Helper()
	db, err := store.Open(context.Background(), r.dsn(t, database), store.Options{Pooler: r.pooler, MaxConns: maxConns})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	if r.mode != "" {
		require.Equal(t, r.mode, db.Connection().ExecMode)
	}
	return kernel.New(db, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
}

// TestTheKernelsWritesAndReplaysWorkInEveryExecModeAndThroughPoolers runs the write and replay
// paths — create, replay, patch, feature runs (internal and blocked), a review, the legacy
// ledger — and the read models in each pgx exec mode, straight to PostgreSQL and through
// pgbouncer in transaction and session pooling, and checks the rows. In exec and
// simple_protocol modes pgx sends a []byte as bytea: a JSON argument given as []byte fails
// there with "invalid input syntax for type json".
func TestTheKernelsWritesAndReplaysWorkInEveryExecModeAndThroughPoolers(t *testing.T) {
	t.Parallel()
	for _, r := range routes() {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			name := testdb.NewDatabase(t)
			k := openRoute(t, r, name, 4)
			exerciseKernel(t, k)
			// A second session after the first is gone: through a transaction pooler it meets
			// server connections the first one used (where pgx's named statements would clash).
			exerciseKernel(t, openRoute(t, r, name, 4))
		})
	}
}

var exerciseOwners atomic.Int64

func exerciseKernel(t *testing.T, k *kernel.Kernel) {
	t.Helper()
	ctx := context.Background()
	db := k.DB()
	// An owner of its own per call: a kernel's address may be reused once the previous one is
	// garbage, and the same owner would then replay the previous call's keys.
	owner := fmt.Sprintf("o-%d", exerciseOwners.Add(1))
	payload := json.RawMessage(`{"text":"hello","tags":["a","b"],"n":1.5}`)
	created, err := k.Create(ctx, model.CreateInput{Owner: owner, Module: kernel.ModuleNote, Key: "create-1", Title: "t", Summary: str("s"), Payload: payload})
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, created.Outcome)
	again, err := k.Create(ctx, model.CreateInput{Owner: owner, Module: kernel.ModuleNote, Key: "create-1", Title: "t", Summary: str("s"), Payload: payload})
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	require.Equal(t, created.Record.ID, again.Record.ID)

	patched, err := k.Patch(ctx, model.PatchInput{Owner: owner, Module: kernel.ModuleNote, RecordID: created.Record.ID, Key: "patch-1",
		ExpectRevision: 1, Title: str("t2"), Payload: json.RawMessage(`{"text":"second"}`)})
	require.NoError(t, err)
	require.Equal(t, 2, patched.Record.Revision)
	replayPatch, err := k.Patch(ctx, model.PatchInput{Owner: owner, Module: kernel.ModuleNote, RecordID: created.Record.ID, Key: "patch-1",
		ExpectRevision: 1, Title: str("t2"), Payload: json.RawMessage(`{"text":"second"}`)})
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, replayPatch.Outcome)
	require.Equal(t, 2, replayPatch.Record.Revision)

	mem, err := k.Create(ctx, model.CreateInput{Owner: owner, Module: kernel.ModuleMem, Key: "mem-1", Title: "memo",
		Payload: json.RawMessage(`{"originalContent":"a  b","currentContent":"  a   b  "}`)})
	require.NoError(t, err)
	run, err := k.RunFeature(ctx, model.FeatureInput{Owner: owner, Module: kernel.ModuleMem, RecordID: mem.Record.ID, FeatureID: "F01", Key: "run-1"})
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, run.Outcome)
	require.NotNil(t, run.Execution)
	replayRun, err := k.RunFeature(ctx, model.FeatureInput{Owner: owner, Module: kernel.ModuleMem, RecordID: mem.Record.ID, FeatureID: "F01", Key: "run-1"})
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, replayRun.Outcome)
	require.Equal(t, run.Execution.ID, replayRun.Execution.ID)
	blocked, err := k.RunFeature(ctx, model.FeatureInput{Owner: owner, Module: kernel.ModuleMem, RecordID: mem.Record.ID, FeatureID: "F02", Key: "run-2"})
	require.NoError(t, err)
	require.Equal(t, "BLOCKED", blocked.Execution.Status)

	promise, err := k.Create(ctx, model.CreateInput{Owner: owner, Module: kernel.ModuleCommitment, Key: "c-1", Title: "promise",
		Payload: json.RawMessage(`{"status":"OPEN"}`)})
	require.NoError(t, err)
	review, err := k.CreateReview(ctx, kernel.ReviewInput{Owner: owner, RecordID: promise.Record.ID, Key: "review-1", Verdict: "kept", Comment: "c"})
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, review.Outcome)
	_, err = k.VerifyLegacy(ctx)
	require.NoError(t, err)
	// Verify reads these rows whole-table (one streamed statement a pass) and, with --since,
	// in keyset pages: both in one read-only transaction, whatever the route, and both clean.
	// What it set for its statements (work_mem, plan_cache_mode) ended with that transaction.
	for _, since := range []time.Time{{}, time.Unix(0, 0)} {
		rep, err := verify.Invariants(ctx, k, model.VerifyOptions{Owner: owner, Since: since})
		require.NoError(t, err)
		require.True(t, rep.OK, "since %v: %+v", since, rep.Failed())
		require.EqualValues(t, 3, rep.Checked["records"], "since %v", since)
		require.EqualValues(t, 7, rep.Checked["keys"], "since %v", since)
	}
	var workMem, planCache string
	require.NoError(t, db.Q(ctx).QueryRow(ctx, `SELECT current_setting('work_mem'), current_setting('plan_cache_mode')`).Scan(&workMem, &planCache))
	require.Equal(t, []string{"4MB", "auto"}, []string{workMem, planCache}, "no setting of verify's outlives its transaction")

	// The rows are what was sent, JSON typed as JSON.
	var snapshot, stored json.RawMessage
	var revisions int
	require.NoError(t, db.Q(ctx).QueryRow(ctx, `SELECT (SELECT count(*) FROM record_revision WHERE owner_id = $1 AND record_id = $2),
			(SELECT snapshot->'payload' FROM record_revision WHERE owner_id = $1 AND record_id = $2 AND revision = 1),
			(SELECT payload FROM record WHERE owner_id = $1 AND id = $2)`, owner, created.Record.ID).Scan(&revisions, &snapshot, &stored))
	require.Equal(t, 2, revisions)
	require.JSONEq(t, string(payload), string(snapshot))
	require.JSONEq(t, `{"text":"second"}`, string(stored))

	// The read models.
	detail, err := readmodel.GetRecordDetail(ctx, db, store.RecordRef{Owner: owner, Module: kernel.ModuleNote, ID: created.Record.ID})
	require.NoError(t, err)
	require.Len(t, detail.Revisions, 2)
	keys, _, err := readmodel.KeyPage(ctx, db, owner, 50, "")
	require.NoError(t, err)
	require.Len(t, keys, 7)
	events, _, err := readmodel.History(ctx, db, owner, 100, "", false)
	require.NoError(t, err)
	require.NotEmpty(t, events)
	view, err := inspect.Key(ctx, k, owner, "patch-1")
	require.NoError(t, err)
	require.Equal(t, 2, view.Restored.Record.Revision)
}

// TestOneKeyExecutesOnceUnderConcurrencyInEveryExecModeAndThroughPoolers fires 60 same-key
// creates at once (no in-process sharing: every request reaches PostgreSQL and losers wait on
// the unique index) on a pool larger than pgbouncer's server pool: exactly one executes, every
// other request replays, none fails.
func TestOneKeyExecutesOnceUnderConcurrencyInEveryExecModeAndThroughPoolers(t *testing.T) {
	t.Parallel()
	for _, r := range routes() {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			ctx := testdb.Context(t)
			name := testdb.NewDatabase(t)
			k := openRoute(t, r, name, testdb.BouncerPoolSize+10)
			const n = 60
			var wg sync.WaitGroup
			var mu sync.Mutex
			outcomes := map[string]int{}
			ids := map[string]bool{}
			start := make(chan struct{})
			for range n {
				wg.Go(func() {
					<-start
					res, err := k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "same",
						Title: "t", Payload: json.RawMessage(`{"text":"x"}`), ShareInFlight: boolp(false)})
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						outcomes[string(apperr.CodeOf(err))+": "+err.Error()]++
						return
					}
					outcomes[string(res.Outcome)]++
					ids[res.Record.ID] = true
				})
			}
			close(start)
			wg.Wait()
			require.Equal(t, map[string]int{"EXECUTED": 1, "REPLAYED": n - 1}, outcomes)
			require.Len(t, ids, 1)
			var records, revisions int
			require.NoError(t, k.DB().Q(ctx).QueryRow(ctx, `SELECT (SELECT count(*) FROM record WHERE owner_id = 'alice'),
				(SELECT count(*) FROM record_revision WHERE owner_id = 'alice')`).Scan(&records, &revisions))
			require.Equal(t, 1, records)
			require.Equal(t, 1, revisions)
		})
	}
}
