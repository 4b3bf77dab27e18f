package outboxrows_test

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
	"github.com/idemwork/idemwork/store/outboxrows"
	"github.com/idemwork/idemwork/store/verifyrows"
)

func claim(t *testing.T, db *store.DB, now time.Time, scope ...string) []model.OutboxMessage {
	t.Helper()
	p := outboxrows.ClaimParams{Now: now, LeaseUntil: now.Add(30 * time.Second), Limit: 10}
	if len(scope) > 0 {
		p.OwnerID, p.IDs = scope[0], scope[1:]
	}
	msgs, err := outboxrows.Claim(context.Background(), db, p)
	require.NoError(t, err)
	return msgs
}

func ids(msgs []model.OutboxMessage) []string {
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, m.ID)
	}
	return out
}

func TestAClaimHidesAMessageUntilItsLeaseRunsOutAndEachClaimIsTheNextAttempt(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	q := storetest.QueueRun(t, db.DB, "alice", "k1", storetest.T0)

	require.Empty(t, claim(t, db.DB, storetest.T0.Add(-time.Second)), "a message is not due before its next attempt")
	first := claim(t, db.DB, storetest.T0)
	require.Equal(t, []string{q.Msg.ID}, ids(first))
	require.Equal(t, 1, first[0].Attempts, "the claim counts itself")
	require.True(t, first[0].NextAttemptAt.Equal(storetest.T0.Add(30*time.Second)), "the lease is the next attempt: %s", first[0].NextAttemptAt)

	require.Empty(t, claim(t, db.DB, storetest.T0.Add(29*time.Second)), "the lease hides the message")
	again := claim(t, db.DB, storetest.T0.Add(30*time.Second))
	require.Equal(t, []string{q.Msg.ID}, ids(again), "a lease that ran out makes the message due again")
	require.Equal(t, 2, again[0].Attempts)
}

func TestAMessageAnotherTransactionHoldsIsSkippedNotWaitedFor(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	held := storetest.QueueRun(t, db.DB, "alice", "k1", storetest.T0)
	free := storetest.QueueRun(t, db.DB, "alice", "k2", storetest.T0)

	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT 1 FROM outbox_message WHERE owner_id = 'alice' AND id = $1 FOR UPDATE`, held.Msg.ID)
	require.NoError(t, err)

	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msgs, err := outboxrows.Claim(cctx, db.DB, outboxrows.ClaimParams{Now: storetest.T0, LeaseUntil: storetest.T0.Add(time.Minute), Limit: 10})
	require.NoError(t, err, "the claim does not wait for the held row")
	require.Equal(t, []string{free.Msg.ID}, ids(msgs))
}

func TestAClaimCanBeScopedToAnOwnerAndToSomeOfItsMessages(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	a1 := storetest.QueueRun(t, db.DB, "alice", "k1", storetest.T0)
	a2 := storetest.QueueRun(t, db.DB, "alice", "k2", storetest.T0)
	b1 := storetest.QueueRun(t, db.DB, "bob", "k1", storetest.T0)

	require.Equal(t, []string{a2.Msg.ID}, ids(claim(t, db.DB, storetest.T0, "alice", a2.Msg.ID, b1.Msg.ID)), "an id of another owner is not claimed")
	require.Equal(t, []string{a1.Msg.ID}, ids(claim(t, db.DB, storetest.T0, "alice")))
	require.Equal(t, []string{b1.Msg.ID}, ids(claim(t, db.DB, storetest.T0)))

	_, err := outboxrows.Claim(context.Background(), db.DB, outboxrows.ClaimParams{Now: storetest.T0, LeaseUntil: storetest.T0, Limit: 1, IDs: []string{a1.Msg.ID}})
	require.ErrorContains(t, err, "IDs need their OwnerID")
}

type messageRow struct {
	Status    string
	Attempts  int
	LastError *string
	Next      time.Time
}

func readMessage(t *testing.T, db *testdb.DB, m model.OutboxMessage) messageRow {
	t.Helper()
	var r messageRow
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT status, attempts, last_error, next_attempt_at FROM outbox_message
		WHERE owner_id = $1 AND id = $2`, m.OwnerID, m.ID).Scan(&r.Status, &r.Attempts, &r.LastError, &r.Next))
	r.Next = r.Next.UTC()
	return r
}

func TestASettleIsFencedByTheAttemptItsClaimCounted(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	q := storetest.QueueRun(t, db.DB, "alice", "k1", storetest.T0)
	stale := claim(t, db.DB, storetest.T0)[0]
	current := claim(t, db.DB, storetest.T0.Add(time.Minute))[0] // the first lease ran out: claimed again
	require.Equal(t, 2, current.Attempts)

	boom := "provider down"
	settle := func(m model.OutboxMessage, status string) error {
		return outboxrows.Settle(ctx, db.DB, outboxrows.SettleParams{OwnerID: m.OwnerID, ID: m.ID, ClaimedAttempt: m.Attempts, Status: status,
			LastError: &boom, NextAttemptAt: storetest.T0.Add(time.Hour), Now: storetest.T0.Add(2 * time.Minute)})
	}
	before := readMessage(t, db, q.Msg)
	require.ErrorIs(t, settle(stale, "FAILED"), outboxrows.ErrLeaseLost, "the claim of attempt 1 lost its lease")
	require.Equal(t, before, readMessage(t, db, q.Msg), "a lost lease writes nothing")

	require.NoError(t, settle(current, "PENDING"), "the current claim settles a retry")
	require.Equal(t, messageRow{Status: "PENDING", Attempts: 2, LastError: &boom, Next: storetest.T0.Add(time.Hour)}, readMessage(t, db, q.Msg))
	require.ErrorIs(t, settle(stale, "DELIVERED"), outboxrows.ErrLeaseLost, "the claim of attempt 1 still loses after the retry")

	third := claim(t, db.DB, storetest.T0.Add(time.Hour))[0]
	require.NoError(t, settle(third, "DELIVERED"))
	require.ErrorIs(t, settle(third, "FAILED"), outboxrows.ErrLeaseLost, "a DELIVERED message is never settled again")
	require.Equal(t, "DELIVERED", readMessage(t, db, q.Msg).Status)
}

func TestOnlyAPendingExecutionIsSettledAndOnlyOnce(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	q := storetest.QueueRun(t, db.DB, "alice", "k1", storetest.T0)

	e, err := outboxrows.SettleExecution(ctx, db.DB, outboxrows.SettleExecutionParams{OwnerID: "alice", ID: q.Exec.ID, Status: "DELIVERED", Now: storetest.T0.Add(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, "DELIVERED", e.Status)
	require.Equal(t, q.Exec.FeatureID, e.FeatureID)
	require.True(t, e.UpdatedAt.Equal(storetest.T0.Add(time.Minute)))

	_, err = outboxrows.SettleExecution(ctx, db.DB, outboxrows.SettleExecutionParams{OwnerID: "alice", ID: q.Exec.ID, Status: "FAILED", Now: storetest.T0.Add(2 * time.Minute)})
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = outboxrows.SettleExecution(ctx, db.DB, outboxrows.SettleExecutionParams{OwnerID: "bob", ID: q.Exec.ID, Status: "FAILED", Now: storetest.T0.Add(2 * time.Minute)})
	require.ErrorIs(t, err, store.ErrNotFound, "another owner's execution is not found")
	require.Equal(t, 1, storetest.CountWhere(t, db, `SELECT count(*) FROM feature_execution WHERE id = $1 AND status = 'DELIVERED'`, q.Exec.ID))
}

// settleAudit writes the audit event the outbox worker writes for a settled run of q.
func settleAudit(t *testing.T, db *store.DB, q storetest.Queued, id, action string) {
	t.Helper()
	rev := 1
	require.NoError(t, db.InsertAudit(context.Background(), model.AuditEvent{ID: id, OwnerID: q.Exec.OwnerID, ModuleCode: q.Exec.ModuleCode,
		RecordID: &q.Exec.RecordID, Action: action, Revision: &rev, ExecutionID: &q.Exec.ID, IdempotencyKey: q.Exec.IdempotencyKey,
		Detail: json.RawMessage(`{"outboxMessageId":"` + q.Msg.ID + `"}`), At: storetest.T0.Add(time.Minute)}))
}

func TestTheFeatureActionNamesWhatTheSettleCountAndVerifyFind(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	require.Equal(t, "FEATURE_F02_DELIVERED", store.FeatureAction("F02", store.FeatureDelivered))

	delivered := storetest.QueueRun(t, db.DB, "alice", "k1", storetest.T0)
	failed := storetest.QueueRun(t, db.DB, "alice", "k2", storetest.T0)
	settleAudit(t, db.DB, delivered, "a1", store.FeatureAction("F02", store.FeatureDelivered))
	settleAudit(t, db.DB, failed, "a2", store.FeatureAction("F02", store.FeatureFailed))
	// Names that are not a settle of this execution's feature.
	settleAudit(t, db.DB, failed, "a3", store.FeatureAction("F01", store.FeatureFailed))
	settleAudit(t, db.DB, failed, "a4", store.FeatureAction("F02", store.FeatureFailed)+"_LATER")

	for key, want := range map[string]int{"k1": 1, "k2": 2} {
		n, err := outboxrows.CountSettleAudits(ctx, db.DB, "alice", key)
		require.NoError(t, err)
		require.Equal(t, want, n, "settle events of %s (any feature's, never a QUEUED one)", key)
	}

	rows, err := verifyrows.Executions(ctx, db.DB, verifyrows.Page{Limit: 10})
	require.NoError(t, err)
	got := map[string]verifyrows.ExecutionRow{}
	for _, r := range rows {
		got[r.ID] = r
	}
	require.Equal(t, 1, got[delivered.Exec.ID].RunAudits, "the QUEUED event is its run's")
	require.Equal(t, 1, got[delivered.Exec.ID].SettleAudits)
	require.Equal(t, "FEATURE_F02_DELIVERED", got[delivered.Exec.ID].SettledAs)
	require.Equal(t, 1, got[failed.Exec.ID].SettleAudits, "only FEATURE_F02_DELIVERED/FAILED settle an F02 execution")
	require.Equal(t, "FEATURE_F02_FAILED", got[failed.Exec.ID].SettledAs)
}
