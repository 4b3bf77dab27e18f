// Package storetest holds the rows and counts the store's job packages' tests share: a queued
// feature run through the outbox, a planted key row, a count read behind the store's back, and
// the fixtures' clock. internal/testdb is the database; this is what the tests write in it.
package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/stretchr/testify/require"
)

// T0 is the fixtures' clock: every row is written relative to it.
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Queued is what a feature run through the outbox commits: a record at revision 1, its
// execution (PENDING, mode outbox), its message (due at the run) and its QUEUED audit event.
type Queued struct {
	Exec model.Execution
	Msg  model.OutboxMessage
}

// QueueRun writes a queued run of feature F02 for owner under key, at.
func QueueRun(t *testing.T, db *store.DB, owner, key string, at time.Time) Queued {
	t.Helper()
	ctx := context.Background()
	n := fmt.Sprintf("%s-%s-%d", owner, key, at.UnixNano())
	rec := model.Record{ID: "rec-" + n, OwnerID: owner, ModuleCode: "COMMITMENT", Revision: 1, Title: "t", Payload: json.RawMessage(`{}`),
		CreatedAt: at, UpdatedAt: at}
	q := Queued{
		Exec: model.Execution{ID: "exe-" + n, OwnerID: owner, ModuleCode: rec.ModuleCode, RecordID: rec.ID, FeatureID: "F02", Mode: "outbox",
			Status: "PENDING", RecordRevision: 1, Input: json.RawMessage(`{}`), Output: json.RawMessage(`{}`), IdempotencyKey: &key,
			CreatedAt: at, UpdatedAt: at},
	}
	q.Msg = model.OutboxMessage{ID: "msg-" + n, OwnerID: owner, ExecutionID: q.Exec.ID, Provider: "notify",
		PayloadRef: json.RawMessage(`{"executionId":"` + q.Exec.ID + `"}`), IdempotencyID: q.Exec.ID, Status: "PENDING", NextAttemptAt: at, CreatedAt: at}
	rev := 1
	require.NoError(t, db.TxBatch(ctx, func(_ context.Context, b *store.Batch) error {
		b.InsertRecord("record", rec)
		b.InsertRevision("revision", rec, &key)
		b.InsertExecution("execution", q.Exec)
		b.InsertOutbox("execution", q.Msg)
		b.InsertAudit("audit", model.AuditEvent{ID: "aud-" + n, OwnerID: owner, ModuleCode: rec.ModuleCode, RecordID: &rec.ID,
			Action: store.FeatureAction("F02", store.FeatureQueued), Revision: &rev, ExecutionID: &q.Exec.ID, IdempotencyKey: &key,
			Detail: json.RawMessage(`{"operation":"feature:COMMITMENT:F02"}`), At: at})
		return nil
	}))
	return q
}

// KeyRow writes an owner's SUCCEEDED idempotency row for key, reserved at.
func KeyRow(t *testing.T, db *testdb.DB, owner, key, operation string, at time.Time) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response,
			created_at, expires_at, updated_at)
		VALUES ($1, $2, $3, 'f', 'SUCCEEDED', '{"schemaVersion":1}', $4::timestamptz, $4::timestamptz + interval '1 day', $4::timestamptz + interval '1 second')`, owner, key, operation, at)
	require.NoError(t, err)
}

// CountWhere is the count(*) sql reads, behind the store's back.
func CountWhere(t *testing.T, db *testdb.DB, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}
