package bench

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// tracedTarget is a target over a fresh database whose pools (the store's and raw's) tr traces,
// with the limit side's statements learned from the runner.
func tracedTarget(t *testing.T) (*target, *rtTracer) {
	t.Helper()
	db := testdb.New(t)
	ctx := context.Background()
	tr := &rtTracer{}
	sdb, err := store.Open(ctx, db.DSN, store.Options{MaxConns: 1, Tracer: tr})
	require.NoError(t, err)
	t.Cleanup(sdb.Close)
	pool, err := rawPool(ctx, db.DSN, 1, tr)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	tg, err := newTarget(sdb, pool, newFixtures(), DefaultMemMaxContentLength)
	require.NoError(t, err)
	require.NoError(t, tg.learnPlans(ctx, tr))
	for _, s := range allSides {
		require.NoError(t, tg.fx.records(s).ensure(ctx, pool, 10))
	}
	return tg, tr
}

// traceOp runs o once and returns the round trips it made (a prepare included, if any).
func traceOp(t *testing.T, tr *rtTracer, o op) []span {
	t.Helper()
	tr.take()
	require.NoError(t, o(context.Background(), &worker{clients: 1}))
	return tr.take()
}

// The limit side of each workload sends exactly the runner's statements — the same texts in the
// same order, each with arguments of the same Go types — in as few round trips as the write
// allows, and the runner takes no more: a create one (its prepare reads nothing), a feature run
// two (read, then write: its new revision is computed from the record it reads), a replay one
// (the key row and the rows its envelope points at). The runner's path is traced again here, so a
// change to it (a statement more or less, another argument, another round trip) fails this test
// until the limit side is taught the new path.
func TestTheLimitSendsTheRunnersStatementsInAsFewRoundTripsAsTheWriteAllows(t *testing.T) {
	t.Parallel()
	tg, tr := tracedTarget(t)
	require.NoError(t, tg.provisionReplayKeys(context.Background(), 4, 1))
	trips := map[string]int{FreshKey: 1, FeatureRun: 2, ReplayHit: 1}
	for _, wl := range workloads(tg) {
		if _, known := writePaths[wl.name]; !known {
			continue
		}
		traceOp(t, tr, wl.limit) // warm the connection's statement cache
		traceOp(t, tr, wl.runner)
		runner, limit := traceOp(t, tr, wl.runner), traceOp(t, tr, wl.limit)
		require.NoError(t, sameStatements(wl.name, flatten(runner), flatten(limit)), wl.name)
		require.Len(t, limit, trips[wl.name], "%s: the limit's round trips: %v", wl.name, limit)
		require.Len(t, runner, trips[wl.name], "%s: the runner's round trips: %v", wl.name, runner)
		stmts := flatten(limit)
		require.Equal(t, roleBegin, classify(stmts[0].sql), wl.name)
		require.Equal(t, roleSettings, classify(stmts[1].sql), wl.name)
		require.Equal(t, "commit", stmts[len(stmts)-1].sql, wl.name)
	}
}

// What the limit side writes is a finished request in every respect the runner checks: its key
// replays through the kernel (operation, fingerprint, envelope, the snapshot's integrity and, for
// a feature, the execution), giving back the record the limit wrote.
func TestWhatTheLimitWritesReplaysThroughTheRunner(t *testing.T) {
	t.Parallel()
	tg, _ := tracedTarget(t)
	ctx := context.Background()

	require.NoError(t, tg.limitCreate(ctx, "limit-create-1"))
	res, err := tg.k.Create(ctx, model.CreateInput{Owner: Owner, Module: kernel.ModuleNote, Key: "limit-create-1",
		Title: noteTitle, Payload: notePayload})
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, res.Outcome)
	require.Equal(t, 1, res.Record.Revision)
	require.Equal(t, noteTitle, res.Record.Title)
	require.JSONEq(t, string(notePayload), string(res.Record.Payload))

	recordID := tg.fx.limitRecords.take()
	require.NoError(t, tg.limitFeature(ctx, recordID, "limit-feature-1"))
	res, err = tg.k.RunFeature(ctx, model.FeatureInput{Owner: Owner, Module: kernel.ModuleMem, RecordID: recordID, FeatureID: "F01",
		Key: "limit-feature-1"})
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, res.Outcome)
	require.Equal(t, 2, res.Record.Revision)
	require.Equal(t, "SUCCEEDED", res.Execution.Status)

	// And it is what the runner itself writes for the same request on a record in the same state.
	runnerRecord := tg.fx.runnerRecords.take()
	ran, err := tg.k.RunFeature(ctx, model.FeatureInput{Owner: Owner, Module: kernel.ModuleMem, RecordID: runnerRecord, FeatureID: "F01",
		Key: "runner-feature-1"})
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, ran.Outcome)
	require.Equal(t, string(ran.Record.Payload), string(res.Record.Payload))
	require.Equal(t, string(ran.Execution.Output), string(res.Execution.Output))
	require.Equal(t, ran.Record.CreatedAt.UTC(), res.Record.CreatedAt.UTC())
	var want, got map[string]any
	require.NoError(t, json.Unmarshal(ran.Envelope, &want))
	require.NoError(t, json.Unmarshal(res.Envelope, &got))
	require.Equal(t, want["policy"], got["policy"])
	require.Equal(t, want["schemaVersion"], got["schemaVersion"])
}

// A runner path the limit side does not know (a statement added, dropped or moved) is refused
// when the plan is learned, naming both paths; a statement with other argument types is refused
// when the two sides' traces are compared.
func TestADriftedRunnerPathIsRefused(t *testing.T) {
	t.Parallel()
	tg, tr := tracedTarget(t)
	runner := flatten(traceOp(t, tr, tg.runnerFeatureRun))
	_, err := newLimitPlan(FeatureRun, runner)
	require.NoError(t, err)

	withoutLock := append(append([]tracedStmt{}, runner[:4]...), runner[5:]...)
	_, err = newLimitPlan(FeatureRun, withoutLock)
	require.ErrorContains(t, err, "teach it the new path")
	require.ErrorContains(t, err, "[begin, settings, read key, reserve key, update record")

	extra := append(append([]tracedStmt{}, runner[:5]...), append([]tracedStmt{{sql: "SELECT pg_sleep(0)"}}, runner[5:]...)...)
	_, err = newLimitPlan(FeatureRun, extra)
	require.ErrorContains(t, err, "(SELECT pg_sleep(0))")

	limit := flatten(traceOp(t, tr, tg.limitFeatureRun))
	require.NoError(t, sameStatements(FeatureRun, runner, limit))
	changed := append([]tracedStmt{}, limit...)
	changed[4] = tracedStmt{sql: changed[4].sql, argTypes: append([]string{"[]uint8"}, changed[4].argTypes[1:]...)}
	require.ErrorContains(t, sameStatements(FeatureRun, runner, changed), "has arguments")
	require.ErrorContains(t, sameStatements(FeatureRun, runner, limit[:len(limit)-1]), "sent 10 statements, the runner 11")
}

// The replay limit is what a replay must read — the key row with the revision and execution its
// envelope points at, by the runner's own statement — in one round trip.
func TestTheReplayLimitReadsTheKeyAndItsRowsInOneRoundTrip(t *testing.T) {
	t.Parallel()
	tg, tr := tracedTarget(t)
	require.NoError(t, tg.provisionReplayKeys(context.Background(), 4, 1))
	traceOp(t, tr, tg.limitReplayHit)
	spans := traceOp(t, tr, tg.limitReplayHit)
	require.Len(t, spans, 1)
	stmts := flatten(spans)
	require.Len(t, stmts, 4)
	read := stmts[2]
	require.Equal(t, roleReadKey, classify(read.sql))
	require.Contains(t, read.sql, "feature_execution", "the replay reads the execution its envelope points at")
	require.Contains(t, read.sql, "record_revision", "the replay reads the revision its envelope points at")
	require.Equal(t, []string{"string", "string", "string"}, read.argTypes)
}
