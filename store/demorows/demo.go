package demorows

import (
	"context"
	"fmt"
	"time"

	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// SeedState says whether the demo seed ran before (a revision carries owner's key: the seed's
// first write) and whether that key is still live at now (its row has not expired): once it has
// expired, a replay of the seed would execute again.
func SeedState(ctx context.Context, db *store.DB, owner, key string, now time.Time) (seeded, keyLive bool, err error) {
	err = db.Q(ctx).QueryRow(ctx, `SELECT
			EXISTS (SELECT 1 FROM record_revision WHERE owner_id = $1 AND idempotency_key = $2),
			EXISTS (SELECT 1 FROM idempotency_record WHERE owner_id = $1 AND idempotency_key = $2 AND expires_at > $3)`,
		owner, key, now).Scan(&seeded, &keyLive)
	if err != nil {
		return false, false, fmt.Errorf("read the demo seed's state: %w", err)
	}
	return seeded, keyLive, nil
}

// Reads the guided demos check their claims with (demo.Blocked and demo.Outbox):
// each claim a demo makes is a fact of these rows, never of the demo's own bookkeeping.

// ExecutionsForKey lists the feature executions an owner's idempotency key wrote, oldest first
// (at most 100).
func ExecutionsForKey(ctx context.Context, db *store.DB, owner, key string) ([]model.Execution, error) {
	var rows []model.Execution
	err := db.X.SelectContext(ctx, &rows, `SELECT `+store.ExecutionColumns+` FROM feature_execution
		WHERE owner_id = $1 AND idempotency_key = $2 ORDER BY created_at, id LIMIT 100`, owner, key)
	if err != nil {
		return nil, fmt.Errorf("read executions of key: %w", err)
	}
	return rows, nil
}

// OutboxForExecution lists the outbox messages of an execution, oldest first (at most 100;
// SPEC §7 and idemwork verify expect exactly one).
func OutboxForExecution(ctx context.Context, db *store.DB, owner, executionID string) ([]model.OutboxMessage, error) {
	var rows []model.OutboxMessage
	err := db.X.SelectContext(ctx, &rows, `SELECT id, owner_id, execution_id, provider, payload_ref, idempotency_id, status, attempts,
			next_attempt_at, last_error, created_at, updated_at
		FROM outbox_message WHERE owner_id = $1 AND execution_id = $2 ORDER BY created_at, id LIMIT 100`, owner, executionID)
	if err != nil {
		return nil, fmt.Errorf("read outbox messages of execution: %w", err)
	}
	return rows, nil
}

// RowWriter is one row and the transaction that last wrote it (its xmin): rows that share it
// were committed by one transaction, together or not at all.
type RowWriter struct {
	Table string `json:"table"`
	// What names the row: an execution or message id, an audit action.
	What string `json:"what"`
	Xmin string `json:"xmin"`
}

// KeyWriters reads, for an owner's idempotency key, which transaction last wrote each row the
// key's request committed: the key row, its revisions, its executions, their outbox messages and
// its audit events (in that order). A fresh request's rows all share one xmin; a worker's settle later
// rewrites the message and the execution in a transaction of its own.
func KeyWriters(ctx context.Context, db *store.DB, owner, key string) ([]RowWriter, error) {
	var rows []RowWriter
	err := db.X.SelectContext(ctx, &rows, `SELECT "table", what, xmin FROM (
		SELECT 'idempotency_record' AS "table", k.status AS what, k.xmin::text AS xmin, 1 AS part, k.created_at AS at
			FROM idempotency_record k WHERE k.owner_id = $1 AND k.idempotency_key = $2
		UNION ALL
		SELECT 'record_revision', r.record_id || '@' || r.revision, r.xmin::text, 2, r.created_at
			FROM record_revision r WHERE r.owner_id = $1 AND r.idempotency_key = $2
		UNION ALL
		SELECT 'feature_execution', e.id, e.xmin::text, 3, e.created_at
			FROM feature_execution e WHERE e.owner_id = $1 AND e.idempotency_key = $2
		UNION ALL
		SELECT 'outbox_message', m.id, m.xmin::text, 4, m.created_at
			FROM outbox_message m JOIN feature_execution e ON e.owner_id = m.owner_id AND e.id = m.execution_id
			WHERE e.owner_id = $1 AND e.idempotency_key = $2
		UNION ALL
		SELECT 'audit_event', a.action, a.xmin::text, 5, a.at
			FROM audit_event a WHERE a.owner_id = $1 AND a.idempotency_key = $2
		) w ORDER BY part, at LIMIT 400`, owner, key)
	if err != nil {
		return nil, fmt.Errorf("read the writers of key: %w", err)
	}
	return rows, nil
}
