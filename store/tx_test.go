package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/storetest"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// tracedDB opens a second pool on db's database whose round trips are recorded.
// Statements are named by their first three words ("insert into audit_event").
func tracedDB(t *testing.T, db *testdb.DB) (*store.DB, *testdb.Trips) {
	t.Helper()
	tr := &testdb.Trips{Words: 3}
	tdb, err := store.Open(context.Background(), db.DSN, store.Options{MaxConns: 2, Tracer: tr})
	require.NoError(t, err)
	t.Cleanup(tdb.Close)
	tr.Take() // what Open sent
	return tdb, tr
}

func event(id string) model.AuditEvent {
	return model.AuditEvent{ID: id, OwnerID: "alice", ModuleCode: "NOTE", Action: "MARK", At: time.Now()}
}

func TestQueuedWritesTravelWithBeginAndCommitInOneRoundTrip(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tdb, tr := tracedDB(t, db)
	require.NoError(t, tdb.TxBatch(context.Background(), func(_ context.Context, b *store.Batch) error {
		b.InsertAudit("first", event("a"))
		b.InsertAudit("second", event("b"))
		require.Equal(t, 2, b.Len())
		require.Equal(t, []string{"first", "second"}, b.Steps())
		return nil
	}))
	require.Equal(t, []string{"batch[begin; settings; insert into audit_event; insert into audit_event; commit]"}, tr.Take())
	require.Equal(t, 2, storetest.CountWhere(t, db, `SELECT count(*) FROM audit_event WHERE id IN ('a', 'b')`))
}

func TestBeginTravelsWithTheFirstStatementAndTheBatchWithCommit(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tdb, tr := tracedDB(t, db)
	ctx := context.Background()
	require.NoError(t, tdb.TxBatch(ctx, func(ctx context.Context, b *store.Batch) error {
		var one int
		if err := tdb.Q(ctx).QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
			return err
		}
		b.InsertAudit("audit", event("c"))
		return nil
	}))
	require.Equal(t, []string{"batch[begin; settings; select 1]", "batch[insert into audit_event; commit]"}, tr.Take())

	// A statement that reads rows cannot share BEGIN's round trip: BEGIN goes first, alone.
	require.NoError(t, tdb.Tx(ctx, func(ctx context.Context) error {
		rows, err := tdb.Q(ctx).Query(ctx, `SELECT id FROM audit_event`)
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	}))
	require.Equal(t, []string{"batch[begin; settings]", "select id from", "batch[commit]"}, tr.Take())

	// Nothing run and nothing queued: nothing is sent at all.
	require.NoError(t, tdb.TxBatch(ctx, func(context.Context, *store.Batch) error { return nil }))
	require.Empty(t, tr.Take())
}

func TestAQueuedWritesArgumentsAreTakenWhenItIsQueued(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	require.NoError(t, db.TxBatch(ctx, func(_ context.Context, b *store.Batch) error {
		rev := 1
		key := "first-key"
		detail := json.RawMessage(`{"n":1}`)
		e := event("args")
		e.Revision, e.IdempotencyKey, e.Detail = &rev, &key, detail
		b.InsertAudit("audit", e)
		// Everything the caller still holds changes before the batch is sent.
		rev, key = 99, "changed"
		copy(detail, `{"n":9}`)
		e.ID = "other"
		return nil
	}))
	var rev int
	var key, detail string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT revision, idempotency_key, detail::text FROM audit_event WHERE id = 'args'`).Scan(&rev, &key, &detail))
	require.Equal(t, 1, rev, "the revision as it was when queued")
	require.Equal(t, "first-key", key)
	require.JSONEq(t, `{"n":1}`, detail)
	require.Zero(t, storetest.CountWhere(t, db, `SELECT count(*) FROM audit_event WHERE id = 'other'`))
}

// The batch keeps its copies in slabs of its own (a few allocations a batch): writes that fill
// and replace the slabs, and a caller that reuses one buffer and one variable for all of them,
// still send each write's arguments as they were when it was queued.
func TestManyQueuedWritesEachKeepTheArgumentsTheyWereQueuedWith(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	const n = 40
	detailOf := func(i int) string {
		return `{"n": ` + strconv.Itoa(i) + `, "pad": "` + strings.Repeat("x", i*37) + `"}`
	}
	require.NoError(t, db.TxBatch(ctx, func(_ context.Context, b *store.Batch) error {
		var buf []byte
		var rev int
		var key, rid string
		for i := range n {
			buf = append(buf[:0], detailOf(i)...)
			rev, key, rid = i, "key-"+strconv.Itoa(i), "rec-"+strconv.Itoa(i)
			e := event("many-" + strconv.Itoa(i))
			e.Revision, e.IdempotencyKey, e.RecordID, e.Detail = &rev, &key, &rid, json.RawMessage(buf)
			b.InsertAudit("audit", e)
			b.Queue(store.BatchWrite{Step: "raw", What: "insert raw", SQL: `INSERT INTO data_migration_ledger (name, status) VALUES ($1, $2)`}, &key, "passed")
		}
		copy(buf, strings.Repeat("!", len(buf)))
		rev, key, rid = -1, "changed", "changed"
		return nil
	}))
	rows, err := db.Pool.Query(ctx, `SELECT id, revision, idempotency_key, record_id, detail::text FROM audit_event WHERE id LIKE 'many-%'`)
	require.NoError(t, err)
	got := map[string][4]string{}
	for rows.Next() {
		var id, key, rid, detail string
		var rev int
		require.NoError(t, rows.Scan(&id, &rev, &key, &rid, &detail))
		got[id] = [4]string{strconv.Itoa(rev), key, rid, detail}
	}
	require.NoError(t, rows.Err())
	require.Len(t, got, n)
	for i := range n {
		g := got["many-"+strconv.Itoa(i)]
		require.Equal(t, [3]string{strconv.Itoa(i), "key-" + strconv.Itoa(i), "rec-" + strconv.Itoa(i)}, [3]string{g[0], g[1], g[2]})
		require.JSONEq(t, detailOf(i), g[3])
		require.Equal(t, 1, storetest.CountWhere(t, db, `SELECT count(*) FROM data_migration_ledger WHERE name = $1`, "key-"+strconv.Itoa(i)))
	}
}

func TestAnArgumentThatCannotBeEncodedFailsItsStepBeforeAnythingIsSent(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tdb, tr := tracedDB(t, db)
	err := tdb.TxBatch(context.Background(), func(_ context.Context, b *store.Batch) error {
		b.InsertAudit("audit", event("fine"))
		b.Queue(store.BatchWrite{Step: "odd", What: "insert odd", SQL: `INSERT INTO audit_event (id) VALUES ($1)`}, []int{1})
		return nil
	})
	var se *idem.StepError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "odd", se.Step)
	require.Contains(t, err.Error(), "[]int cannot be queued")
	require.Empty(t, tr.Take(), "nothing reached the server")
	require.Zero(t, storetest.CountWhere(t, db, `SELECT count(*) FROM audit_event WHERE id = 'fine'`))
}

func TestAWriteTheServerRefusesFailsAsItsOwnStepAndRollsBackTheTransaction(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	err := db.TxBatch(ctx, func(ctx context.Context, b *store.Batch) error {
		// A statement run at once, then two queued writes of which the second duplicates the first.
		if _, err := db.Q(ctx).Exec(ctx, `INSERT INTO data_migration_ledger (name, status) VALUES ('at-once', 'passed')`); err != nil {
			return err
		}
		b.InsertAudit("first", event("dup"))
		b.InsertAudit("second", event("dup"))
		return nil
	})
	var se *idem.StepError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "second", se.Step, "the duplicate's own step fails, not the statement after it")
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23505", pgErr.Code)
	require.True(t, strings.HasPrefix(err.Error(), "insert audit event: "), "the write's own words, as a statement run at once fails: %s", err.Error())
	require.False(t, apperr.Is(err, apperr.CommitUnknown), "the server answered")
	require.Zero(t, storetest.CountWhere(t, db, `SELECT count(*) FROM audit_event WHERE id = 'dup'`))
	require.Zero(t, storetest.CountWhere(t, db, `SELECT count(*) FROM data_migration_ledger WHERE name = 'at-once'`), "what ran at once rolled back too")
}

func TestAGuardedWriteThatFindsNoRowFailsWithItsGuardBeforeTheCommit(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	conflict := apperr.New(apperr.RevisionConflict, "record r1 is no longer at revision 1")
	now := time.Now()
	err := db.TxBatch(ctx, func(_ context.Context, b *store.Batch) error {
		b.InsertAudit("audit", event("before-guard"))
		b.UpdateRecordGuarded("record", model.Record{OwnerID: "alice", ModuleCode: "NOTE", ID: "r1", Revision: 2, Title: "t",
			Payload: json.RawMessage(`{}`), UpdatedAt: now}, 1, conflict)
		return nil
	})
	require.ErrorIs(t, err, conflict)
	var se *idem.StepError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "record", se.Step)
	require.Equal(t, apperr.RevisionConflict, apperr.CodeOf(err))
	require.Zero(t, storetest.CountWhere(t, db, `SELECT count(*) FROM audit_event WHERE id = 'before-guard'`))
}

func TestAnErrorFromTheFunctionSendsNoneOfItsQueuedWrites(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tdb, tr := tracedDB(t, db)
	boom := errors.New("boom")
	err := tdb.TxBatch(context.Background(), func(_ context.Context, b *store.Batch) error {
		b.InsertAudit("audit", event("never"))
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Empty(t, tr.Take(), "no BEGIN, no write, no ROLLBACK: nothing had reached the server")
	require.Zero(t, storetest.CountWhere(t, db, `SELECT count(*) FROM audit_event WHERE id = 'never'`))
}

func TestANestedBatchIsSentWhenItsFunctionReturnsAndCommitsWithTheOuterTransaction(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	tdb, tr := tracedDB(t, db)
	ctx := context.Background()
	boom := errors.New("outer fails")
	err := tdb.Tx(ctx, func(outer context.Context) error {
		if err := tdb.TxBatch(outer, func(_ context.Context, b *store.Batch) error {
			b.InsertAudit("inner", event("nested"))
			return nil
		}); err != nil {
			return err
		}
		// The inner writes are in the transaction once the inner call returned.
		var n int
		if err := tdb.Q(outer).QueryRow(outer, `SELECT count(*) FROM audit_event WHERE id = 'nested'`).Scan(&n); err != nil {
			return err
		}
		require.Equal(t, 1, n)
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, []string{"batch[begin; settings; insert into audit_event]", "select count(*) from", "rollback"}, tr.Take())
	require.Zero(t, storetest.CountWhere(t, db, `SELECT count(*) FROM audit_event WHERE id = 'nested'`), "the outer rollback undid the inner writes")

	// A nested batch's failing write fails the inner call with its step.
	err = tdb.Tx(ctx, func(outer context.Context) error {
		err := tdb.TxBatch(outer, func(_ context.Context, b *store.Batch) error {
			b.Queue(store.BatchWrite{Step: "inner", What: "fail", SQL: `SELECT 1 / 0`})
			return nil
		})
		var se *idem.StepError
		require.ErrorAs(t, err, &se)
		require.Equal(t, "inner", se.Step)
		return err
	})
	require.Error(t, err)
}

func TestAReadOnlySessionRefusesABatchUpFront(t *testing.T) {
	t.Parallel()
	rw := testdb.New(t)
	ro, err := store.Open(context.Background(), rw.DSN, store.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	err = ro.TxBatch(context.Background(), func(_ context.Context, b *store.Batch) error {
		t.Fatal("a write path must not start")
		return nil
	})
	require.True(t, apperr.Is(err, apperr.ReadOnly), "%v", err)
}

func TestABatchThroughATransactionPoolerCarriesTheSchemaOfItsTransaction(t *testing.T) {
	t.Parallel()
	name := testdb.NewDatabase(t)
	db, err := store.Open(context.Background(), testdb.PgBouncer(t, store.PoolerTransaction).PoolerDSN(name), store.Options{MaxConns: 2})
	require.NoError(t, err)
	defer db.Close()
	for i := range 3 {
		id := string(rune('a' + i))
		require.NoError(t, db.TxBatch(context.Background(), func(_ context.Context, b *store.Batch) error {
			b.InsertAudit("audit", event("pooled-"+id))
			return nil
		}))
	}
	conn, err := pgx.Connect(context.Background(), testdb.DSNOf(t, name))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM audit_event WHERE id LIKE 'pooled-%'`).Scan(&n))
	require.Equal(t, 3, n)
}
