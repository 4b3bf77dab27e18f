package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/verifyrows"
)

// t0 is the fixtures' clock: every row is written relative to it.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// queued is what a feature run through the outbox commits: a record at revision 1, its
// execution (PENDING, mode outbox), its message (due at the run) and its QUEUED audit event.
type queued struct {
	exec model.Execution
	msg  model.OutboxMessage
}

// queueRun writes a queued run of feature F02 for owner under key, at.
func queueRun(t *testing.T, db *store.DB, owner, key string, at time.Time) queued {
	t.Helper()
	ctx := context.Background()
	n := fmt.Sprintf("%s-%s-%d", owner, key, at.UnixNano())
	rec := model.Record{ID: "rec-" + n, OwnerID: owner, ModuleCode: "COMMITMENT", Revision: 1, Title: "t", Payload: json.RawMessage(`{}`),
		CreatedAt: at, UpdatedAt: at}
	q := queued{
		exec: model.Execution{ID: "exe-" + n, OwnerID: owner, ModuleCode: rec.ModuleCode, RecordID: rec.ID, FeatureID: "F02", Mode: "outbox",
			Status: "PENDING", RecordRevision: 1, Input: json.RawMessage(`{}`), Output: json.RawMessage(`{}`), IdempotencyKey: &key,
			CreatedAt: at, UpdatedAt: at},
	}
	q.msg = model.OutboxMessage{ID: "msg-" + n, OwnerID: owner, ExecutionID: q.exec.ID, Provider: "notify",
		PayloadRef: json.RawMessage(`{"executionId":"` + q.exec.ID + `"}`), IdempotencyID: q.exec.ID, Status: "PENDING", NextAttemptAt: at, CreatedAt: at}
	rev := 1
	require.NoError(t, db.TxBatch(ctx, func(_ context.Context, b *store.Batch) error {
		b.InsertRecord("record", rec)
		b.InsertRevision("revision", rec, &key)
		b.InsertExecution("execution", q.exec)
		b.InsertOutbox("execution", q.msg)
		b.InsertAudit("audit", model.AuditEvent{ID: "aud-" + n, OwnerID: owner, ModuleCode: rec.ModuleCode, RecordID: &rec.ID,
			Action: store.FeatureAction("F02", store.FeatureQueued), Revision: &rev, ExecutionID: &q.exec.ID, IdempotencyKey: &key,
			Detail: json.RawMessage(`{"operation":"feature:COMMITMENT:F02"}`), At: at})
		return nil
	}))
	return q
}

func claim(t *testing.T, db *store.DB, now time.Time, scope ...string) []model.OutboxMessage {
	t.Helper()
	p := store.ClaimOutboxParams{Now: now, LeaseUntil: now.Add(30 * time.Second), Limit: 10}
	if len(scope) > 0 {
		p.OwnerID, p.IDs = scope[0], scope[1:]
	}
	msgs, err := db.ClaimOutbox(context.Background(), p)
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
	q := queueRun(t, db.DB, "alice", "k1", t0)

	require.Empty(t, claim(t, db.DB, t0.Add(-time.Second)), "a message is not due before its next attempt")
	first := claim(t, db.DB, t0)
	require.Equal(t, []string{q.msg.ID}, ids(first))
	require.Equal(t, 1, first[0].Attempts, "the claim counts itself")
	require.True(t, first[0].NextAttemptAt.Equal(t0.Add(30*time.Second)), "the lease is the next attempt: %s", first[0].NextAttemptAt)

	require.Empty(t, claim(t, db.DB, t0.Add(29*time.Second)), "the lease hides the message")
	again := claim(t, db.DB, t0.Add(30*time.Second))
	require.Equal(t, []string{q.msg.ID}, ids(again), "a lease that ran out makes the message due again")
	require.Equal(t, 2, again[0].Attempts)
}

func TestAMessageAnotherTransactionHoldsIsSkippedNotWaitedFor(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	held := queueRun(t, db.DB, "alice", "k1", t0)
	free := queueRun(t, db.DB, "alice", "k2", t0)

	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT 1 FROM outbox_message WHERE owner_id = 'alice' AND id = $1 FOR UPDATE`, held.msg.ID)
	require.NoError(t, err)

	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	msgs, err := db.ClaimOutbox(cctx, store.ClaimOutboxParams{Now: t0, LeaseUntil: t0.Add(time.Minute), Limit: 10})
	require.NoError(t, err, "the claim does not wait for the held row")
	require.Equal(t, []string{free.msg.ID}, ids(msgs))
}

func TestAClaimCanBeScopedToAnOwnerAndToSomeOfItsMessages(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	a1 := queueRun(t, db.DB, "alice", "k1", t0)
	a2 := queueRun(t, db.DB, "alice", "k2", t0)
	b1 := queueRun(t, db.DB, "bob", "k1", t0)

	require.Equal(t, []string{a2.msg.ID}, ids(claim(t, db.DB, t0, "alice", a2.msg.ID, b1.msg.ID)), "an id of another owner is not claimed")
	require.Equal(t, []string{a1.msg.ID}, ids(claim(t, db.DB, t0, "alice")))
	require.Equal(t, []string{b1.msg.ID}, ids(claim(t, db.DB, t0)))

	_, err := db.ClaimOutbox(context.Background(), store.ClaimOutboxParams{Now: t0, LeaseUntil: t0, Limit: 1, IDs: []string{a1.msg.ID}})
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
	q := queueRun(t, db.DB, "alice", "k1", t0)
	stale := claim(t, db.DB, t0)[0]
	current := claim(t, db.DB, t0.Add(time.Minute))[0] // the first lease ran out: claimed again
	require.Equal(t, 2, current.Attempts)

	boom := "provider down"
	settle := func(m model.OutboxMessage, status string) error {
		return db.SettleOutbox(ctx, store.SettleOutboxParams{OwnerID: m.OwnerID, ID: m.ID, ClaimedAttempt: m.Attempts, Status: status,
			LastError: &boom, NextAttemptAt: t0.Add(time.Hour), Now: t0.Add(2 * time.Minute)})
	}
	before := readMessage(t, db, q.msg)
	require.ErrorIs(t, settle(stale, "FAILED"), store.ErrLeaseLost, "the claim of attempt 1 lost its lease")
	require.Equal(t, before, readMessage(t, db, q.msg), "a lost lease writes nothing")

	require.NoError(t, settle(current, "PENDING"), "the current claim settles a retry")
	require.Equal(t, messageRow{Status: "PENDING", Attempts: 2, LastError: &boom, Next: t0.Add(time.Hour)}, readMessage(t, db, q.msg))
	require.ErrorIs(t, settle(stale, "DELIVERED"), store.ErrLeaseLost, "the claim of attempt 1 still loses after the retry")

	third := claim(t, db.DB, t0.Add(time.Hour))[0]
	require.NoError(t, settle(third, "DELIVERED"))
	require.ErrorIs(t, settle(third, "FAILED"), store.ErrLeaseLost, "a DELIVERED message is never settled again")
	require.Equal(t, "DELIVERED", readMessage(t, db, q.msg).Status)
}

func TestOnlyAPendingExecutionIsSettledAndOnlyOnce(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	q := queueRun(t, db.DB, "alice", "k1", t0)

	e, err := db.SettleExecution(ctx, store.SettleExecutionParams{OwnerID: "alice", ID: q.exec.ID, Status: "DELIVERED", Now: t0.Add(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, "DELIVERED", e.Status)
	require.Equal(t, q.exec.FeatureID, e.FeatureID)
	require.True(t, e.UpdatedAt.Equal(t0.Add(time.Minute)))

	_, err = db.SettleExecution(ctx, store.SettleExecutionParams{OwnerID: "alice", ID: q.exec.ID, Status: "FAILED", Now: t0.Add(2 * time.Minute)})
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = db.SettleExecution(ctx, store.SettleExecutionParams{OwnerID: "bob", ID: q.exec.ID, Status: "FAILED", Now: t0.Add(2 * time.Minute)})
	require.ErrorIs(t, err, store.ErrNotFound, "another owner's execution is not found")
	require.Equal(t, 1, countWhere(t, db, `SELECT count(*) FROM feature_execution WHERE id = $1 AND status = 'DELIVERED'`, q.exec.ID))
}

// settleAudit writes the audit event the outbox worker writes for a settled run of q.
func settleAudit(t *testing.T, db *store.DB, q queued, id, action string) {
	t.Helper()
	rev := 1
	require.NoError(t, db.InsertAudit(context.Background(), model.AuditEvent{ID: id, OwnerID: q.exec.OwnerID, ModuleCode: q.exec.ModuleCode,
		RecordID: &q.exec.RecordID, Action: action, Revision: &rev, ExecutionID: &q.exec.ID, IdempotencyKey: q.exec.IdempotencyKey,
		Detail: json.RawMessage(`{"outboxMessageId":"` + q.msg.ID + `"}`), At: t0.Add(time.Minute)}))
}

func TestTheFeatureActionNamesWhatTheSettleCountAndVerifyFind(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	require.Equal(t, "FEATURE_F02_DELIVERED", store.FeatureAction("F02", store.FeatureDelivered))

	delivered := queueRun(t, db.DB, "alice", "k1", t0)
	failed := queueRun(t, db.DB, "alice", "k2", t0)
	settleAudit(t, db.DB, delivered, "a1", store.FeatureAction("F02", store.FeatureDelivered))
	settleAudit(t, db.DB, failed, "a2", store.FeatureAction("F02", store.FeatureFailed))
	// Names that are not a settle of this execution's feature.
	settleAudit(t, db.DB, failed, "a3", store.FeatureAction("F01", store.FeatureFailed))
	settleAudit(t, db.DB, failed, "a4", store.FeatureAction("F02", store.FeatureFailed)+"_LATER")

	for key, want := range map[string]int{"k1": 1, "k2": 2} {
		n, err := db.CountSettleAudits(ctx, "alice", key)
		require.NoError(t, err)
		require.Equal(t, want, n, "settle events of %s (any feature's, never a QUEUED one)", key)
	}

	rows, err := verifyrows.Executions(ctx, db.DB, verifyrows.Page{Limit: 10})
	require.NoError(t, err)
	got := map[string]verifyrows.ExecutionRow{}
	for _, r := range rows {
		got[r.ID] = r
	}
	require.Equal(t, 1, got[delivered.exec.ID].RunAudits, "the QUEUED event is its run's")
	require.Equal(t, 1, got[delivered.exec.ID].SettleAudits)
	require.Equal(t, "FEATURE_F02_DELIVERED", got[delivered.exec.ID].SettledAs)
	require.Equal(t, 1, got[failed.exec.ID].SettleAudits, "only FEATURE_F02_DELIVERED/FAILED settle an F02 execution")
	require.Equal(t, "FEATURE_F02_FAILED", got[failed.exec.ID].SettledAs)
}
