package kernel_test

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

// dbCounters are PostgreSQL's cumulative statistics of one database: per table (n_tup_ins,
// n_tup_upd, n_tup_del, idx_scan) and for the database (tuples written, transactions).
type dbCounters struct {
	tables                             map[string][4]int64
	inserted, updated, deleted         int64
	commits, rollbacks, returned, read int64
}

// readCounters flushes this session's pending statistics and reads the database's. q must be the
// kernel's own single connection: a backend flushes its counters to shared memory on its own
// schedule (at most once a second), except right after pg_stat_force_next_flush(), when it does
// so as the statement ends, before the server reports the session idle, so the read that follows
// sees everything the session did. Every statement here is its own autocommit transaction (the
// statistics snapshot is per transaction).
func readCounters(t *testing.T, ctx context.Context, q store.Querier) dbCounters {
	t.Helper()
	_, err := q.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
	require.NoError(t, err)
	c := dbCounters{tables: map[string][4]int64{}}
	rows, err := q.Query(ctx, `SELECT relname, n_tup_ins, n_tup_upd, n_tup_del, coalesce(idx_scan, 0) FROM pg_stat_user_tables`)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		var v [4]int64
		require.NoError(t, rows.Scan(&name, &v[0], &v[1], &v[2], &v[3]))
		c.tables[name] = v
	}
	require.NoError(t, rows.Err())
	require.NoError(t, q.QueryRow(ctx, `SELECT tup_inserted, tup_updated, tup_deleted, xact_commit, xact_rollback, tup_returned, tup_fetched
		FROM pg_stat_database WHERE datname = current_database()`).
		Scan(&c.inserted, &c.updated, &c.deleted, &c.commits, &c.rollbacks, &c.returned, &c.read))
	return c
}

// A cache hit writes nothing (SPEC §4.2), as PostgreSQL itself counts it: replaying a create, a
// patch and a feature run, five times each, inserts, updates and deletes no row in any table or
// anywhere in the database and rolls nothing back, while the hits did reach the server: the key
// table was read by its index once per hit, and each hit is one read-only transaction that
// committed — whether the runner replaying the keys answered them itself (the key read alone) or
// not (the read travels with BEGIN and a reservation that finds the key taken).
func TestACacheHitWritesNothingByTheServersOwnCounters(t *testing.T) {
	t.Parallel()
	// One connection: every statement of the kernel and of the counters goes through the same
	// backend, whose statistics readCounters flushes.
	b := setupWith(t, testdb.Options{MaxConns: 1})
	ctx := context.Background()
	k := b.k
	noShare := false
	create := model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "hit-create", Title: "note",
		Payload: json.RawMessage(`{"text": "x"}`), ShareInFlight: &noShare}
	created, err := k.Create(ctx, create)
	require.NoError(t, err)
	title := "renamed"
	patch := model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: created.Record.ID, Key: "hit-patch", ExpectRevision: 1,
		Title: &title, ShareInFlight: &noShare}
	_, err = k.Patch(ctx, patch)
	require.NoError(t, err)
	feature := model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: created.Record.ID, FeatureID: "F01", Key: "hit-feature",
		ShareInFlight: &noShare}
	_, err = k.RunFeature(ctx, feature)
	require.NoError(t, err)

	q := b.db.DB.Q(ctx)
	// This kernel's runner answered the three keys: its replays read them alone. A runner that
	// has not (another process's) sends the read with BEGIN and the reservation, which finds the
	// key taken; that transaction writes nothing either, and commits.
	t.Run("by the runner that answered the keys", func(t *testing.T) {
		requireHitsWriteNothing(t, ctx, q, func() *kernel.Kernel { return k }, create, patch, feature)
	})
	t.Run("by a runner that did not", func(t *testing.T) {
		requireHitsWriteNothing(t, ctx, q, func() *kernel.Kernel {
			return kernel.New(b.db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
		}, create, patch, feature)
	})
}

func requireHitsWriteNothing(t *testing.T, ctx context.Context, q store.Querier, kernelFor func() *kernel.Kernel,
	create model.CreateInput, patch model.PatchInput, feature model.FeatureInput) {
	t.Helper()
	before := readCounters(t, ctx, q)
	const rounds = 5
	for range rounds {
		k := kernelFor()
		c, err := k.Create(ctx, create)
		require.NoError(t, err)
		require.Equal(t, idemtype.Replayed, c.Outcome)
		p, err := k.Patch(ctx, patch)
		require.NoError(t, err)
		require.Equal(t, idemtype.Replayed, p.Outcome)
		f, err := k.RunFeature(ctx, feature)
		require.NoError(t, err)
		require.Equal(t, idemtype.Replayed, f.Outcome)
	}
	after := readCounters(t, ctx, q)

	hits := int64(3 * rounds)
	for name, a := range after.tables {
		bt := before.tables[name]
		require.Equal(t, [3]int64{bt[0], bt[1], bt[2]}, [3]int64{a[0], a[1], a[2]}, "%s: rows inserted, updated, deleted by cache hits", name)
	}
	require.Equal(t, [3]int64{before.inserted, before.updated, before.deleted}, [3]int64{after.inserted, after.updated, after.deleted},
		"the database's tuples inserted, updated, deleted")
	require.Equal(t, before.rollbacks, after.rollbacks)
	// The hits were the server's to count: each read the key row by its index, and committed as
	// a transaction of its own (plus the two statements of the first readCounters that were still
	// pending when it flushed, and the flush of the second).
	require.GreaterOrEqual(t, after.tables["idempotency_record"][3]-before.tables["idempotency_record"][3], hits)
	require.GreaterOrEqual(t, after.commits-before.commits, hits)
	require.Greater(t, after.read-before.read, int64(0))
}
