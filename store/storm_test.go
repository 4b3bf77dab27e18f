package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// keyRow writes an owner's SUCCEEDED idempotency row for key, reserved at.
func keyRow(t *testing.T, db *testdb.DB, owner, key, operation string, at time.Time) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response,
			created_at, expires_at, updated_at)
		VALUES ($1, $2, $3, 'f', 'SUCCEEDED', '{"schemaVersion":1}', $4::timestamptz, $4::timestamptz + interval '1 day', $4::timestamptz + interval '1 second')`, owner, key, operation, at)
	require.NoError(t, err)
}

// stormAudit writes an audit event of key at, naming operation in its detail ("" names none, as
// the outbox worker's settle events do).
func stormAudit(t *testing.T, db *store.DB, owner, id, key, operation string, at time.Time) {
	t.Helper()
	detail := json.RawMessage(`{}`)
	if operation != "" {
		detail = json.RawMessage(`{"operation":"` + operation + `"}`)
	}
	require.NoError(t, db.InsertAudit(context.Background(), model.AuditEvent{ID: id, OwnerID: owner, ModuleCode: "COMMITMENT",
		Action: "MARK", IdempotencyKey: &key, Detail: detail, At: at}))
}

func TestAStormReadsTheKeysRowAndNoRowIsNotAnError(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	absent, err := db.ReadKeyState(ctx, "alice", "k")
	require.NoError(t, err)
	require.Equal(t, store.KeyState{}, absent)

	keyRow(t, db, "alice", "k", "feature:COMMITMENT:F02", t0)
	got, err := db.ReadKeyState(ctx, "alice", "k")
	require.NoError(t, err)
	require.True(t, got.Found)
	require.Equal(t, "SUCCEEDED", got.Status)
	require.Equal(t, "feature:COMMITMENT:F02", got.Operation)
	require.JSONEq(t, `{"schemaVersion":1}`, string(got.Response))
	require.True(t, got.CreatedAt.Equal(t0))
	require.True(t, got.UpdatedAt.Equal(t0.Add(time.Second)))
	other, err := db.ReadKeyState(ctx, "bob", "k")
	require.NoError(t, err)
	require.False(t, other.Found, "keys are per owner")
}

// TestAStormCountsOnlyTheKeysCurrentLifeAndItsOperation plants an earlier lifetime of the key
// (rows written before its current row was reserved), the current one, a settle event of the
// outbox worker (no operation in its detail) and bob's rows under the same key.
func TestAStormCountsOnlyTheKeysCurrentLifeAndItsOperation(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	const op = "feature:COMMITMENT:F02"
	since := t0.Add(time.Hour)
	earlier := queueRun(t, db.DB, "alice", "k", t0) // revision, execution, QUEUED event of op
	current := queueRun(t, db.DB, "alice", "k", since)
	queueRun(t, db.DB, "bob", "k", since)
	stormAudit(t, db.DB, "alice", "settle", "k", "", since.Add(time.Minute))
	stormAudit(t, db.DB, "alice", "other-op", "k", "create:NOTE", since.Add(time.Minute))

	n, err := db.CountKeyRows(ctx, store.KeyOperation{Owner: "alice", Key: "k", Operation: op})
	require.NoError(t, err)
	require.Equal(t, 6, n, "both lifetimes' revisions, executions and events of the operation")

	revs, err := db.KeyRevisionsSince(ctx, "alice", "k", since)
	require.NoError(t, err)
	require.Equal(t, []store.KeyRevision{{RecordID: current.exec.RecordID, Revision: 1}}, revs)
	execs, err := db.KeyExecutionsSince(ctx, "alice", "k", since)
	require.NoError(t, err)
	require.Equal(t, []store.KeyExecution{{ID: current.exec.ID, Mode: "outbox", Status: "PENDING", RecordID: current.exec.RecordID, RecordRevision: 1}}, execs)

	audit, older, err := db.KeyAuditSince(ctx, store.KeyOperation{Owner: "alice", Key: "k", Operation: op}, since)
	require.NoError(t, err)
	require.Equal(t, 1, audit, "the current life's event of the operation, not the settle's nor another operation's")
	require.Equal(t, 3, older, "the earlier life's revision, execution and event")

	all, err := db.KeyRevisionsSince(ctx, "alice", "k", time.Time{})
	require.NoError(t, err)
	require.ElementsMatch(t, []store.KeyRevision{{RecordID: earlier.exec.RecordID, Revision: 1}, {RecordID: current.exec.RecordID, Revision: 1}}, all,
		"without a key row every row counts")
}

// TestAStormSeesItsOwnSessionsWaitAndWhomTheyWaitOn holds a key row in a session of another
// application, lets a session of the storm's prefix wait on it, and reads what a storm reads:
// the counts, the blocker, the cancel that wakes the waiter, and no transaction left open.
func TestAStormSeesItsOwnSessionsWaitAndWhomTheyWaitOn(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	const prefix = "idemwork-storm-t1-"
	keyRow(t, db, "alice", "k", "create:NOTE", t0)
	connect := func(app string) *pgx.Conn {
		c, err := pgx.Connect(ctx, testdb.WithParam(db.DSN, "application_name", app))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	holder, waiter := connect("psql-by-hand"), connect(prefix+"w0")
	hold, err := holder.Begin(ctx)
	require.NoError(t, err)
	_, err = hold.Exec(ctx, `UPDATE idempotency_record SET updated_at = now() WHERE owner_id = 'alice' AND idempotency_key = 'k'`)
	require.NoError(t, err)

	waited := make(chan error, 1)
	go func() {
		_, err := waiter.Exec(ctx, `UPDATE idempotency_record SET updated_at = now() WHERE owner_id = 'alice' AND idempotency_key = 'k'`)
		waited <- err
	}()
	var c store.AppSessionCounts
	require.Eventually(t, func() bool {
		c, err = db.AppSessions(ctx, prefix)
		require.NoError(t, err)
		return c.Waiting == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, store.AppSessionCounts{Waiting: 1, InXact: 1, Sessions: 1}, c, "only the prefix's sessions count")

	blockers, err := db.AppBlockers(ctx, prefix, 3)
	require.NoError(t, err)
	require.Len(t, blockers, 1)
	b := blockers[0]
	require.Equal(t, int(holder.PgConn().PID()), b.PID)
	require.Equal(t, [4]any{1, "transactionid", "psql-by-hand", "idle in transaction"}, [4]any{b.Waiters, b.LockType, b.Application, b.State})
	require.Positive(t, b.XactMs)
	require.Contains(t, b.Query, "UPDATE idempotency_record SET updated_at")

	open, err := db.AppOpenTransactions(ctx, prefix)
	require.NoError(t, err)
	require.Equal(t, 1, open)
	require.NoError(t, db.CancelAppStatements(ctx, prefix))
	select {
	case err := <-waited:
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "57014", pgErr.Code, "the waiter's statement was cancelled")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not cancelled")
	}
	require.Eventually(t, func() bool {
		open, err = db.AppOpenTransactions(ctx, prefix)
		require.NoError(t, err)
		return open == 0
	}, 10*time.Second, 10*time.Millisecond, "an autocommit statement that was cancelled leaves no transaction")
	require.NoError(t, hold.Rollback(ctx))
}
