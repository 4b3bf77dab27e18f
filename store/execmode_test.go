package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/storetest"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/demorows"
	"github.com/idemwork/idemwork/store/legacy"
	"github.com/idemwork/idemwork/store/outboxrows"
	"github.com/idemwork/idemwork/store/stormrows"
)

// TestTheOutboxStormAndDemoStatementsWorkInEveryExecMode runs every statement of the outbox
// worker, of a storm's verdict and watch, of the demos and of the legacy redaction in each pgx exec mode, straight to PostgreSQL
// and through pgbouncer in transaction pooling (twice: the second session meets server
// connections the first used). In exec and simple_protocol modes pgx sends a []byte as bytea,
// which a json column refuses; an array, a NULL text and a timestamp must travel too.
func TestTheOutboxStormAndDemoStatementsWorkInEveryExecMode(t *testing.T) {
	t.Parallel()
	type route struct {
		name   string
		pooler store.Pooler
		mode   string
	}
	var routes []route
	for _, m := range store.ExecModes() {
		routes = append(routes, route{"direct/" + m, store.PoolerNone, m})
	}
	for _, m := range []string{"", "exec", "simple_protocol"} {
		routes = append(routes, route{"pgbouncer-transaction/" + m, store.PoolerTransaction, m})
	}
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			name := testdb.NewDatabase(t)
			dsn := testdb.DSNOf(t, name)
			if r.pooler != store.PoolerNone {
				dsn = testdb.PgBouncer(t, r.pooler).DSN(name)
			}
			if r.mode != "" {
				dsn = store.WithDSNParams(dsn, [][2]string{{"default_query_exec_mode", r.mode}})
			}
			sessions := 1
			if r.pooler == store.PoolerTransaction {
				sessions = 2
			}
			for i := range sessions {
				db := openVia(t, dsn, store.Options{Pooler: r.pooler, MaxConns: 2})
				if r.mode != "" {
					require.Equal(t, r.mode, db.Connection().ExecMode)
				}
				exerciseOutboxStormDemo(t, db, []string{"alice", "bob"}[i])
			}
		})
	}
}

func exerciseOutboxStormDemo(t *testing.T, db *store.DB, owner string) {
	t.Helper()
	ctx := context.Background()
	const op = "feature:COMMITMENT:F02"
	q := storetest.QueueRun(t, db, owner, "k", storetest.T0)

	// The demo seed and its legacy receipt (a JSON argument).
	ok, err := legacy.InsertReceipt(ctx, db, legacy.Receipt{OwnerID: owner, Key: "k", Operation: op, Fingerprint: "f",
		Response: json.RawMessage(`{"policy":"raw-json-v1","body":{}}`), CreatedAt: storetest.T0, ExpiresAt: storetest.T0.Add(time.Hour)})
	require.NoError(t, err)
	require.True(t, ok)
	seeded, live, err := demorows.SeedState(ctx, db, owner, "k", storetest.T0)
	require.NoError(t, err)
	require.Equal(t, [2]bool{true, true}, [2]bool{seeded, live})

	// The outbox worker: a scoped claim (an array argument), a fenced retry (a text argument), the
	// delivered settle with its execution and audit event in one transaction.
	msgs, err := outboxrows.Claim(ctx, db, outboxrows.ClaimParams{Now: storetest.T0, LeaseUntil: storetest.T0.Add(time.Minute), Limit: 5, OwnerID: owner, IDs: []string{q.Msg.ID}})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, q.Msg.ID, msgs[0].ID)
	boom := "provider down"
	require.NoError(t, outboxrows.Settle(ctx, db, outboxrows.SettleParams{OwnerID: owner, ID: q.Msg.ID, ClaimedAttempt: 1, Status: "PENDING",
		LastError: &boom, NextAttemptAt: storetest.T0, Now: storetest.T0}))
	msgs, err = outboxrows.Claim(ctx, db, outboxrows.ClaimParams{Now: storetest.T0, LeaseUntil: storetest.T0.Add(time.Minute), Limit: 5})
	require.NoError(t, err)
	require.Equal(t, 2, msgs[0].Attempts)
	require.NoError(t, db.Tx(ctx, func(ctx context.Context) error {
		if err := outboxrows.Settle(ctx, db, outboxrows.SettleParams{OwnerID: owner, ID: q.Msg.ID, ClaimedAttempt: 2, Status: "DELIVERED",
			NextAttemptAt: storetest.T0, Now: storetest.T0}); err != nil {
			return err
		}
		e, err := outboxrows.SettleExecution(ctx, db, outboxrows.SettleExecutionParams{OwnerID: owner, ID: q.Exec.ID, Status: "DELIVERED", Now: storetest.T0})
		if err != nil {
			return err
		}
		rev := e.RecordRevision
		return db.InsertAudit(ctx, model.AuditEvent{ID: "settle-" + owner, OwnerID: owner, ModuleCode: e.ModuleCode, RecordID: &e.RecordID,
			Action: store.FeatureAction(e.FeatureID, store.FeatureDelivered), Revision: &rev, ExecutionID: &e.ID, IdempotencyKey: e.IdempotencyKey,
			Detail: json.RawMessage(`{"attempts":2}`), At: storetest.T0})
	}))
	require.ErrorIs(t, outboxrows.Settle(ctx, db, outboxrows.SettleParams{OwnerID: owner, ID: q.Msg.ID, ClaimedAttempt: 1, Status: "FAILED", Now: storetest.T0}),
		outboxrows.ErrLeaseLost)
	n, err := outboxrows.CountSettleAudits(ctx, db, owner, "k")
	require.NoError(t, err)
	require.Equal(t, 1, n)

	// A storm's verdict.
	k, err := stormrows.ReadKeyState(ctx, db, owner, "k")
	require.NoError(t, err)
	require.True(t, k.Found)
	rows, err := stormrows.CountKeyRows(ctx, db, stormrows.KeyOperation{Owner: owner, Key: "k", Operation: op})
	require.NoError(t, err)
	require.Equal(t, 3, rows)
	revs, err := stormrows.KeyRevisionsSince(ctx, db, owner, "k", k.CreatedAt)
	require.NoError(t, err)
	require.Len(t, revs, 1)
	execs, err := stormrows.KeyExecutionsSince(ctx, db, owner, "k", k.CreatedAt)
	require.NoError(t, err)
	require.Equal(t, "DELIVERED", execs[0].Status)
	audit, earlier, err := stormrows.KeyAuditSince(ctx, db, stormrows.KeyOperation{Owner: owner, Key: "k", Operation: op}, k.CreatedAt)
	require.NoError(t, err)
	require.Equal(t, [2]int{1, 0}, [2]int{audit, earlier})

	// A storm's watch over its own sessions (this prefix has none).
	counts, err := stormrows.AppSessions(ctx, db, "no-such-storm-")
	require.NoError(t, err)
	require.Zero(t, counts.Sessions)
	blockers, err := stormrows.AppBlockers(ctx, db, "no-such-storm-", 3)
	require.NoError(t, err)
	require.Empty(t, blockers)
	require.NoError(t, stormrows.CancelAppStatements(ctx, db, "no-such-storm-"))
	open, err := stormrows.AppOpenTransactions(ctx, db, "no-such-storm-")
	require.NoError(t, err)
	require.Zero(t, open)

	// The demos' reads.
	all, err := demorows.ExecutionsForKey(ctx, db, owner, "k")
	require.NoError(t, err)
	require.Len(t, all, 1)
	out, err := demorows.OutboxForExecution(ctx, db, owner, q.Exec.ID)
	require.NoError(t, err)
	require.Equal(t, "DELIVERED", out[0].Status)
	writers, err := demorows.KeyWriters(ctx, db, owner, "k")
	require.NoError(t, err)
	require.Len(t, writers, 6, "key row, revision, execution, message, QUEUED and DELIVERED events")

	// The legacy receipts' verification and redaction.
	require.NoError(t, db.Tx(ctx, func(ctx context.Context) error {
		c, err := legacy.Count(ctx, db, legacy.Receipts{Operation: op, Policy: "raw-json-v1", PolicyAt: []string{"policy"}})
		if err != nil {
			return err
		}
		require.Equal(t, 1, c.Receipts)
		return legacy.SetLedgerEntry(ctx, db, owner+"-ledger", "passed", json.RawMessage(`{"receipts":1,"problems":[]}`), storetest.T0)
	}))
	var deleted int64
	require.NoError(t, db.Tx(ctx, func(ctx context.Context) error {
		status, err := legacy.ShareLedgerEntry(ctx, db, owner+"-ledger")
		if err != nil {
			return err
		}
		require.Equal(t, "passed", status)
		deleted, err = legacy.Delete(ctx, db, legacy.Receipts{Operation: op, Policy: "raw-json-v1", PolicyAt: []string{"policy"}})
		return err
	}))
	require.EqualValues(t, 1, deleted)
}
