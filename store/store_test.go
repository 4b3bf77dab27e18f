package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/store"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func txid(t *testing.T, ctx context.Context, db *store.DB) int64 {
	t.Helper()
	var id int64
	require.NoError(t, db.Q(ctx).QueryRow(ctx, "SELECT txid_current()").Scan(&id))
	return id
}

func TestNestedTransactionsJoinTheAmbientOne(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	require.False(t, store.InTx(ctx))
	err := db.Tx(ctx, func(outer context.Context) error {
		require.True(t, store.InTx(outer))
		outerID := txid(t, outer, db.DB)
		return db.Tx(outer, func(inner context.Context) error {
			require.Equal(t, outerID, txid(t, inner, db.DB), "a nested Tx joins: same transaction id")
			return nil
		})
	})
	require.NoError(t, err)
}

func TestOuterRollbackUndoesInnerWrites(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	boom := errors.New("boom")
	err := db.Tx(ctx, func(outer context.Context) error {
		if err := db.Tx(outer, func(inner context.Context) error {
			_, err := db.Q(inner).Exec(inner, `INSERT INTO data_migration_ledger (name, status) VALUES ('inner', 'passed')`)
			return err
		}); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM data_migration_ledger WHERE name = 'inner'`).Scan(&n))
	require.Zero(t, n, "the inner write rolled back with the outer transaction")
}

func TestInTxIsPerContextChain(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	parent := context.Background()
	require.NoError(t, db.Tx(parent, func(txCtx context.Context) error {
		require.True(t, store.InTx(txCtx))
		type other struct{}
		require.True(t, store.InTx(context.WithValue(txCtx, other{}, 1)), "derived contexts carry it")
		require.False(t, store.InTx(parent), "the parent and its siblings do not")
		// A statement on a sibling context goes to the pool, not the transaction.
		outer := txid(t, txCtx, db.DB)
		require.NotEqual(t, outer, txid(t, parent, db.DB))
		return nil
	}))
}

func TestReadOnlySessionsRefuseWritesInTheDatabase(t *testing.T) {
	t.Parallel()
	rw := testdb.New(t)
	ro, err := store.Open(context.Background(), rw.DSN, store.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	ctx := context.Background()

	err = ro.Tx(ctx, func(context.Context) error { t.Fatal("a write path must not start"); return nil })
	require.True(t, apperr.Is(err, apperr.ReadOnly))

	// Even a statement that bypasses Tx is refused by the server, inside its read-only transaction.
	_, err = ro.Q(ctx).Exec(ctx, `INSERT INTO data_migration_ledger (name, status) VALUES ('x', 'passed')`)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "25006", pgErr.Code)
	require.True(t, apperr.Is(err, apperr.ReadOnly))

	var n int
	require.NoError(t, ro.Q(ctx).QueryRow(ctx, `SELECT count(*) FROM data_migration_ledger WHERE name = 'x'`).Scan(&n), "reads still work")
	require.Zero(t, n)
}

func TestSavepointRollsBackOnlyItsStep(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	require.NoError(t, db.Tx(ctx, func(ctx context.Context) error {
		if _, err := db.Q(ctx).Exec(ctx, `INSERT INTO data_migration_ledger (name, status) VALUES ('kept', 'passed')`); err != nil {
			return err
		}
		err := db.Savepoint(ctx, "step", func(ctx context.Context) error {
			_, err := db.Q(ctx).Exec(ctx, `INSERT INTO data_migration_ledger (name, status) VALUES ('kept', 'passed')`)
			return err // duplicate key
		})
		require.Error(t, err)
		return nil
	}))
	var n int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM data_migration_ledger WHERE name = 'kept'`).Scan(&n))
	require.Equal(t, 1, n)
}

func TestSchemaRejectsARevisionWhoseOwnerDiffersFromItsRecord(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `INSERT INTO record (owner_id, id, module_code, revision, title, payload, created_at, updated_at)
		VALUES ('alice', 'r1', 'NOTE', 1, 't', '{}', now(), now())`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `INSERT INTO record_revision (owner_id, record_id, revision, snapshot, created_at)
		VALUES ('mallory', 'r1', 1, '{}', now())`)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23503", pgErr.Code, "foreign_key_violation")
	require.Equal(t, "record_revision_record_fkey", pgErr.ConstraintName)

	// The execution FK also binds the module: a NOTE record cannot carry a MEM-001 execution.
	_, err = db.Pool.Exec(ctx, `INSERT INTO feature_execution (owner_id, id, module_code, record_id, feature_id, mode, status, record_revision, created_at, updated_at)
		VALUES ('alice', 'e1', 'MEM-001', 'r1', 'F01', 'internal', 'SUCCEEDED', 1, now(), now())`)
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "feature_execution_record_fkey", pgErr.ConstraintName)
}
