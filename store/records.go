package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/model"
)

// Repositories route every statement to the ambient transaction when ctx carries one. The
// writes of the commit unit are queued in a Batch (see TxBatch), each under its step.

const (
	insertRecordSQL = `INSERT INTO record (owner_id, id, module_code, revision, title, summary, payload, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	updateRecordGuardedSQL = `WITH u AS (
			UPDATE record SET revision = $4, title = $5, summary = $6, payload = $7, updated_at = $8
			WHERE owner_id = $1 AND module_code = $2 AND id = $3 AND revision = $9 RETURNING 1)
		SELECT 1 / count(*) FROM u`
)

// The INSERTs of the rows a keyed request writes are in attest.go, with the digests they compute.

// InsertRecord queues a new record row.
func (b *Batch) InsertRecord(step string, r model.Record) {
	b.queue(step, "insert record", nil, insertRecordSQL,
		[]any{r.OwnerID, r.ID, r.ModuleCode, r.Revision, r.Title, r.Summary, r.Payload, r.CreatedAt, r.UpdatedAt})
}

// UpdateRecordGuarded queues r as the next revision of its record if the stored revision is
// still fromRevision (optimistic lock); the transaction fails with conflict otherwise. The
// statement fails on the server itself when no row matched, so the COMMIT behind it never runs.
func (b *Batch) UpdateRecordGuarded(step string, r model.Record, fromRevision int, conflict error) {
	b.queue(step, "update record", conflict, updateRecordGuardedSQL,
		[]any{r.OwnerID, r.ModuleCode, r.ID, r.Revision, r.Title, r.Summary, r.Payload, r.UpdatedAt, fromRevision})
}

// InsertRevision queues an immutable revision whose snapshot is r as it is now.
func (b *Batch) InsertRevision(step string, r model.Record, key *string) {
	snap, err := AppendSnapshot(make([]byte, 0, snapshotSize(r)), r)
	if err != nil {
		if b.err == nil {
			b.err = &idem.StepError{Step: step, Err: fmt.Errorf("insert revision: %w", err)}
		}
		return
	}
	// json.RawMessage, not []byte: pgx's exec and simple_protocol modes send a []byte as bytea.
	b.queue(step, "insert revision", nil, insertRevisionSQL, []any{r.OwnerID, r.ID, r.Revision, json.RawMessage(snap), key, r.UpdatedAt})
}

// snapshotSize is about the length of r's snapshot: the room to write it in at once.
func snapshotSize(r model.Record) int {
	return 192 + len(r.ID) + len(r.OwnerID) + len(r.ModuleCode) + len(r.Title) + len(r.Summary) + len(r.Payload)
}

// InsertExecution queues a feature execution.
func (b *Batch) InsertExecution(step string, e model.Execution) {
	b.queue(step, "insert execution", nil, insertExecutionSQL,
		[]any{e.OwnerID, e.ID, e.ModuleCode, e.RecordID, e.FeatureID, e.Mode, e.Status, e.RecordRevision, e.Input, e.Output,
			e.IdempotencyKey, e.CreatedAt, e.UpdatedAt})
}

// InsertAudit queues an audit event.
func (b *Batch) InsertAudit(step string, a model.AuditEvent) {
	b.queue(step, "insert audit event", nil, insertAuditSQL, auditArgs(a))
}

// InsertAudit writes an audit event at once (in ctx's transaction when it carries one).
func (db *DB) InsertAudit(ctx context.Context, a model.AuditEvent) error {
	_, err := db.Q(ctx).Exec(ctx, insertAuditSQL, auditArgs(a)...)
	return stmtError("insert audit event", nil, err)
}

func auditArgs(a model.AuditEvent) []any {
	detail := a.Detail
	if detail == nil {
		detail = json.RawMessage(`{}`)
	}
	return []any{a.OwnerID, a.ID, a.ModuleCode, a.RecordID, a.Action, a.Revision, a.ExecutionID, a.IdempotencyKey, detail, a.At}
}

// InsertReview queues an immutable commitment review.
func (b *Batch) InsertReview(step string, r model.Review) {
	b.queue(step, "insert review", nil, insertReviewSQL,
		[]any{r.OwnerID, r.ID, r.ModuleCode, r.RecordID, r.RecordRevision, r.Verdict, r.Comment, r.IdempotencyKey, r.CreatedAt})
}

// InsertOutbox queues a message for the delivery worker.
func (b *Batch) InsertOutbox(step string, m model.OutboxMessage) {
	b.queue(step, "insert outbox message", nil, insertOutboxSQL,
		[]any{m.OwnerID, m.ID, m.ExecutionID, m.Provider, m.PayloadRef, m.IdempotencyID, m.Status, m.NextAttemptAt, m.CreatedAt, m.IdempotencyKey})
}
