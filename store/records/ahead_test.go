package records_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/records"
)

// The record read a keyed write sends ahead with its reservation reads and locks the record
// only in the transaction that holds the key it was queued for: there it returns the record and
// holds its row lock (another session's NOWAIT lock fails); in a transaction that holds no such
// key (its reservation found the key taken) it returns nothing and locks nothing, and its plan
// never even looks the record up — also as a generic plan, as a connection's cached statement
// runs. Get then reads at once.
func TestARecordReadAheadReadsAndLocksOnlyForTheKeysHolder(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	k := kernel.New(db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
	note, err := k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "taken", Title: "t"})
	require.NoError(t, err)
	id := note.Record.ID

	lockedElsewhere := func() bool {
		_, err := db.Pool.Exec(ctx, `SELECT 1 FROM record WHERE id = $1 FOR NO KEY UPDATE NOWAIT`, id)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55P03" {
			return true
		}
		require.NoError(t, err)
		return false
	}
	readAhead := func(reserveSQL, key string) (*records.RecordAhead, pgx.Tx) {
		tx, err := db.Pool.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = tx.Rollback(ctx) })
		ahead := records.ReadAhead(db.DB, store.RecordRef{Owner: "alice", Module: kernel.ModuleNote, ID: id}, true)
		var b pgx.Batch
		b.Queue(reserveSQL, key)
		ahead.QueueHeld(&b, "alice", key)
		br := tx.SendBatch(ctx, &b)
		tag, err := br.Exec()
		require.NoError(t, err)
		require.NoError(t, ahead.TakeHeld(br, tag.RowsAffected() == 1))
		require.NoError(t, br.Close())
		return ahead, tx
	}
	reserve := `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, created_at, expires_at, updated_at)
		VALUES ('alice', $1, 'NOTE:record:x:feature:F01', 'fp', 'PROCESSING', now(), now() + interval '1 day', now())
		ON CONFLICT DO NOTHING`

	held, tx := readAhead(reserve, "fresh")
	rec, err := held.Get(ctx)
	require.NoError(t, err)
	require.Equal(t, id, rec.ID)
	require.True(t, lockedElsewhere(), "the holder's read locks the record")
	require.NoError(t, tx.Rollback(ctx))
	require.False(t, lockedElsewhere())

	lost, tx := readAhead(reserve, "taken")
	require.False(t, lockedElsewhere(), "behind a reservation that lost, the read locked the record")
	require.NoError(t, tx.Rollback(ctx))
	// Get reads at once (here outside any transaction: the record as it is).
	rec, err = lost.Get(ctx)
	require.NoError(t, err)
	require.Equal(t, id, rec.ID)

	conn, err := db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `PREPARE ahead_probe(text, text, text, text, text) AS `+records.RecordHeldSQL+` FOR NO KEY UPDATE`)
	require.NoError(t, err)
	rows, err := conn.Query(ctx, `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) EXECUTE ahead_probe('alice', 'NOTE', '`+id+`', 'taken', 'alice')`)
	require.NoError(t, err)
	var lines []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		lines = append(lines, line)
	}
	require.NoError(t, rows.Err())
	plan := strings.Join(lines, "\n")
	require.Contains(t, plan, "One-Time Filter", plan)
	require.Regexp(t, `Index Scan using \S+ on record \(never executed\)`, plan)
}
