package stormrows_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/storetest"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/stormrows"
)

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
	absent, err := stormrows.ReadKeyState(ctx, db.DB, "alice", "k")
	require.NoError(t, err)
	require.Equal(t, stormrows.KeyState{}, absent)

	storetest.KeyRow(t, db, "alice", "k", "feature:COMMITMENT:F02", storetest.T0)
	got, err := stormrows.ReadKeyState(ctx, db.DB, "alice", "k")
	require.NoError(t, err)
	require.True(t, got.Found)
	require.Equal(t, "SUCCEEDED", got.Status)
	require.Equal(t, "feature:COMMITMENT:F02", got.Operation)
	require.JSONEq(t, `{"schemaVersion":1}`, string(got.Response))
	require.True(t, got.CreatedAt.Equal(storetest.T0))
	require.True(t, got.UpdatedAt.Equal(storetest.T0.Add(time.Second)))
	other, err := stormrows.ReadKeyState(ctx, db.DB, "bob", "k")
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
	since := storetest.T0.Add(time.Hour)
	earlier := storetest.QueueRun(t, db.DB, "alice", "k", storetest.T0) // revision, execution, QUEUED event of op
	current := storetest.QueueRun(t, db.DB, "alice", "k", since)
	storetest.QueueRun(t, db.DB, "bob", "k", since)
	stormAudit(t, db.DB, "alice", "settle", "k", "", since.Add(time.Minute))
	stormAudit(t, db.DB, "alice", "other-op", "k", "create:NOTE", since.Add(time.Minute))

	n, err := stormrows.CountKeyRows(ctx, db.DB, stormrows.KeyOperation{Owner: "alice", Key: "k", Operation: op})
	require.NoError(t, err)
	require.Equal(t, 6, n, "both lifetimes' revisions, executions and events of the operation")

	revs, err := stormrows.KeyRevisionsSince(ctx, db.DB, "alice", "k", since)
	require.NoError(t, err)
	require.Equal(t, []stormrows.KeyRevision{{RecordID: current.Exec.RecordID, Revision: 1}}, revs)
	execs, err := stormrows.KeyExecutionsSince(ctx, db.DB, "alice", "k", since)
	require.NoError(t, err)
	require.Equal(t, []stormrows.KeyExecution{{ID: current.Exec.ID, Mode: "outbox", Status: "PENDING", RecordID: current.Exec.RecordID, RecordRevision: 1}}, execs)

	audit, older, err := stormrows.KeyAuditSince(ctx, db.DB, stormrows.KeyOperation{Owner: "alice", Key: "k", Operation: op}, since)
	require.NoError(t, err)
	require.Equal(t, 1, audit, "the current life's event of the operation, not the settle's nor another operation's")
	require.Equal(t, 3, older, "the earlier life's revision, execution and event")

	all, err := stormrows.KeyRevisionsSince(ctx, db.DB, "alice", "k", time.Time{})
	require.NoError(t, err)
	require.ElementsMatch(t, []stormrows.KeyRevision{{RecordID: earlier.Exec.RecordID, Revision: 1}, {RecordID: current.Exec.RecordID, Revision: 1}}, all,
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
	storetest.KeyRow(t, db, "alice", "k", "create:NOTE", storetest.T0)
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
	var c stormrows.AppSessionCounts
	require.Eventually(t, func() bool {
		c, err = stormrows.AppSessions(ctx, db.DB, prefix)
		require.NoError(t, err)
		return c.Waiting == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, stormrows.AppSessionCounts{Waiting: 1, InXact: 1, Sessions: 1}, c, "only the prefix's sessions count")

	blockers, err := stormrows.AppBlockers(ctx, db.DB, prefix, 3)
	require.NoError(t, err)
	require.Len(t, blockers, 1)
	b := blockers[0]
	require.Equal(t, int(holder.PgConn().PID()), b.PID)
	require.Equal(t, [4]any{1, "transactionid", "psql-by-hand", "idle in transaction"}, [4]any{b.Waiters, b.LockType, b.Application, b.State})
	require.Positive(t, b.XactMs)
	require.Contains(t, b.Query, "UPDATE idempotency_record SET updated_at")

	open, err := stormrows.AppOpenTransactions(ctx, db.DB, prefix)
	require.NoError(t, err)
	require.Equal(t, 1, open)
	require.NoError(t, stormrows.CancelAppStatements(ctx, db.DB, prefix))
	select {
	case err := <-waited:
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "57014", pgErr.Code, "the waiter's statement was cancelled")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not cancelled")
	}
	require.Eventually(t, func() bool {
		open, err = stormrows.AppOpenTransactions(ctx, db.DB, prefix)
		require.NoError(t, err)
		return open == 0
	}, 10*time.Second, 10*time.Millisecond, "an autocommit statement that was cancelled leaves no transaction")
	require.NoError(t, hold.Rollback(ctx))
}
