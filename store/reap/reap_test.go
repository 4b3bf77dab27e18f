package reap_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/store/reap"
)

// plantKeys inserts n idempotency rows of owner expiring at expires (SUCCEEDED, or PROCESSING
// for every third), plus a record, revision, execution and audit event that must survive.
func plantKeys(t *testing.T, db *testdb.DB, owner, prefix string, n int, expires time.Time) {
	t.Helper()
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
		SELECT $1, $2 || i, 'NOTE:record:create', 'fp',
			CASE WHEN i % 3 = 0 THEN 'PROCESSING' ELSE 'SUCCEEDED' END,
			CASE WHEN i % 3 = 0 THEN NULL ELSE '{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"r","revision":1}}'::jsonb END,
			$3::timestamptz - interval '1 day', $3, $3::timestamptz - interval '1 day'
		FROM generate_series(1, $4) i`, owner, prefix, expires, n)
	require.NoError(t, err)
}

func countRows(t *testing.T, db *testdb.DB, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}

func history(t *testing.T, db *testdb.DB) string {
	t.Helper()
	return fmt.Sprint(
		countRows(t, db, `SELECT count(*) FROM record`), countRows(t, db, `SELECT count(*) FROM record_revision`),
		countRows(t, db, `SELECT count(*) FROM feature_execution`), countRows(t, db, `SELECT count(*) FROM audit_event`))
}

func plantHistory(t *testing.T, db *testdb.DB) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	_, err := db.Pool.Exec(ctx, `INSERT INTO record (owner_id, id, module_code, revision, title, payload, created_at, updated_at)
		VALUES ('alice', 'r', 'NOTE', 1, 't', '{}', $1, $1)`, now)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `INSERT INTO record_revision (owner_id, record_id, revision, snapshot, idempotency_key, created_at)
		VALUES ('alice', 'r', 1, '{}', 'old-1', $1)`, now)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `INSERT INTO feature_execution (owner_id, id, module_code, record_id, feature_id, mode, status, record_revision, idempotency_key, created_at, updated_at)
		VALUES ('alice', 'e', 'NOTE', 'r', 'F01', 'internal', 'SUCCEEDED', 1, 'old-2', $1, $1)`, now)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `INSERT INTO audit_event (owner_id, id, module_code, record_id, action, idempotency_key, at)
		VALUES ('alice', 'a', 'NOTE', 'r', 'RECORD_CREATED', 'old-1', $1)`, now)
	require.NoError(t, err)
}

func TestTheReaperDeletesOnlyExpiredKeysInBoundedBatchesAndNeverHistory(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	plantHistory(t, db)
	plantKeys(t, db, "alice", "old-", 250, now.Add(-time.Minute))
	plantKeys(t, db, "bob", "old-", 40, now.Add(-time.Hour))
	plantKeys(t, db, "alice", "edge-", 1, now) // expires exactly now: expired
	plantKeys(t, db, "alice", "valid-", 30, now.Add(time.Microsecond))
	plantKeys(t, db, "bob", "valid-", 30, now.Add(time.Hour))
	before := history(t, db)

	dry, err := reap.ReapExpired(ctx, db.DB, reap.ReapParams{Now: now, Batch: 100, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, reap.ReapResult{Deleted: 291, Batches: 3, TookMs: dry.TookMs, DryRun: true}, dry)
	require.Positive(t, dry.TookMs, "the time it took is reported")
	require.Equal(t, 351, countRows(t, db, `SELECT count(*) FROM idempotency_record`), "a dry run deletes nothing")

	bob, err := reap.ReapExpired(ctx, db.DB, reap.ReapParams{Owner: "bob", Now: now, Batch: 100})
	require.NoError(t, err)
	require.EqualValues(t, 40, bob.Deleted)
	require.Equal(t, 1, bob.Batches)
	require.Equal(t, 251, countRows(t, db, `SELECT count(*) FROM idempotency_record WHERE owner_id = 'alice' AND expires_at <= $1`, now), "--owner reaps only that owner")

	all, err := reap.ReapExpired(ctx, db.DB, reap.ReapParams{Now: now, Batch: 100})
	require.NoError(t, err)
	require.EqualValues(t, 251, all.Deleted)
	require.Equal(t, 3, all.Batches, "100 + 100 + 51")
	require.Positive(t, all.TookMs)
	require.Zero(t, countRows(t, db, `SELECT count(*) FROM idempotency_record WHERE expires_at <= $1`, now))
	require.Equal(t, 60, countRows(t, db, `SELECT count(*) FROM idempotency_record WHERE expires_at > $1`, now), "never a valid row")
	require.Equal(t, before, history(t, db), "records, revisions, executions and audit events are never reaped")

	again, err := reap.ReapExpired(ctx, db.DB, reap.ReapParams{Now: now})
	require.NoError(t, err)
	require.Zero(t, again.Deleted)
	require.Zero(t, again.Batches)
}

func TestAReapBatchReadsOneBatchThroughTheExpiryIndexNotTheTable(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	for i := range 20 { // 20,000 keys, half of them expired
		plantKeys(t, db, fmt.Sprintf("owner-%02d", i), "k-", 1000, now.Add(time.Duration(i-10)*time.Hour+time.Minute))
	}
	_, err := db.Pool.Exec(ctx, `ANALYZE idempotency_record`)
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		sql  string
		args []any
	}{
		"every owner": {reap.ReapAllSQL, []any{now, 100}},
		"one owner":   {reap.ReapOwnerSQL, []any{now, 100, "owner-03"}},
	} {
		// Generic plans, as the pool's statement cache keeps them; EXPLAIN ANALYZE runs the batch.
		rows, seqScans := testdb.PlanRows(t, db, tc.sql, tc.args, true)
		require.Empty(t, seqScans, name)
		require.LessOrEqual(t, rows, 250.0, "%s: one batch of 100 reads about 100 index entries and 100 rows, not the 10,000 expired keys", name)
	}
	require.Equal(t, 9800, countRows(t, db, `SELECT count(*) FROM idempotency_record WHERE expires_at <= $1`, now), "each batch deleted 100")
}
