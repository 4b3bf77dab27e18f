package outboxrows

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/jackc/pgx/v5"
)

// The outbox worker's statements (SPEC §7). A claim hides a due message behind a lease and
// bumps its attempts; that attempt number is the claim's token, and every settle is fenced by
// it: a worker whose lease ran out (its provider call outlived it, or the clock moved) finds the
// row claimed again or settled by someone else, changes nothing and is told so.

// ClaimParams selects due messages.
type ClaimParams struct {
	// Now is the worker's clock; messages due at or before it are claimed.
	Now time.Time
	// LeaseUntil is when a claimed message becomes due again if its claim is never settled.
	LeaseUntil time.Time
	Limit      int
	// OwnerID, when set, claims only that owner's messages, and IDs (with OwnerID) only those
	// messages: the workbench's delivery pass serves the owner on screen, a demo its own message.
	OwnerID string
	IDs     []string
}

// Claim claims up to Limit due PENDING messages in one short transaction of its own
// (FOR UPDATE SKIP LOCKED: concurrent workers never take the same message) and returns them
// with Attempts already counting this claim.
func Claim(ctx context.Context, db *store.DB, p ClaimParams) ([]model.OutboxMessage, error) {
	if len(p.IDs) > 0 && p.OwnerID == "" {
		return nil, errors.New("claim outbox messages: IDs need their OwnerID")
	}
	scope, args := "", []any{p.Now, p.LeaseUntil, p.Limit}
	if p.OwnerID != "" {
		scope, args = " AND owner_id = $4", append(args, p.OwnerID)
		if len(p.IDs) > 0 {
			scope, args = scope+" AND id = ANY($5)", append(args, p.IDs)
		}
	}
	var out []model.OutboxMessage
	err := db.Tx(ctx, func(ctx context.Context) error {
		rows, err := db.Q(ctx).Query(ctx, `UPDATE outbox_message m SET attempts = m.attempts + 1, next_attempt_at = $2, updated_at = $1
			FROM (SELECT owner_id, id FROM outbox_message WHERE status = 'PENDING' AND next_attempt_at <= $1`+scope+`
			      ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED) due
			WHERE m.owner_id = due.owner_id AND m.id = due.id
			RETURNING m.id, m.owner_id, m.execution_id, m.provider, m.payload_ref, m.idempotency_id, m.status, m.attempts,
				m.next_attempt_at, m.last_error, m.created_at, m.updated_at`, args...)
		if err != nil {
			return fmt.Errorf("claim outbox messages: %w", err)
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (model.OutboxMessage, error) {
			var m model.OutboxMessage
			err := r.Scan(&m.ID, &m.OwnerID, &m.ExecutionID, &m.Provider, &m.PayloadRef, &m.IdempotencyID, &m.Status,
				&m.Attempts, &m.NextAttemptAt, &m.LastError, &m.CreatedAt, &m.UpdatedAt)
			return m, err
		})
		return err
	})
	return out, err
}

// SettleParams records the result of one claim's provider call.
type SettleParams struct {
	OwnerID, ID string
	// ClaimedAttempt is the claim's token: the row's attempts when this worker claimed it.
	ClaimedAttempt int
	// Status is DELIVERED, FAILED, or PENDING for a retry at NextAttemptAt.
	Status        string
	LastError     *string
	NextAttemptAt time.Time
	Now           time.Time
}

// ErrLeaseLost is returned by Settle when the message is no longer PENDING under the
// claimed attempt: another worker claimed it again after the lease ran out, or settled it.
var ErrLeaseLost = errors.New("the outbox claim's lease was lost: the message was claimed again or settled by another worker")

// Settle writes the claim's result, fenced: only a PENDING row still at the claimed
// attempt changes, and anything else is ErrLeaseLost with nothing written.
func Settle(ctx context.Context, db *store.DB, p SettleParams) error {
	tag, err := db.Q(ctx).Exec(ctx, `UPDATE outbox_message SET status = $4, last_error = $5, next_attempt_at = $6, updated_at = $7
		WHERE owner_id = $1 AND id = $2 AND status = 'PENDING' AND attempts = $3`,
		p.OwnerID, p.ID, p.ClaimedAttempt, p.Status, p.LastError, p.NextAttemptAt, p.Now)
	if err != nil {
		return fmt.Errorf("settle outbox message %s: %w", p.ID, err)
	}
	if tag.RowsAffected() != 1 {
		return ErrLeaseLost
	}
	return nil
}

// SettleExecutionParams settles one outbox execution: the owner's execution ID moves to Status
// (DELIVERED or FAILED) at Now.
type SettleExecutionParams struct {
	OwnerID, ID string
	Status      string
	Now         time.Time
}

// SettleExecution moves a PENDING outbox execution to p.Status and returns it as settled. An
// execution that is not PENDING any more is never changed again (ErrNotFound).
func SettleExecution(ctx context.Context, db *store.DB, p SettleExecutionParams) (model.Execution, error) {
	e, err := store.ScanExecution(db.Q(ctx).QueryRow(ctx, `UPDATE feature_execution SET status = $3, updated_at = $4
		WHERE owner_id = $1 AND id = $2 AND status = 'PENDING' RETURNING `+store.ExecutionColumns, p.OwnerID, p.ID, p.Status, p.Now))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return e, fmt.Errorf("settle execution %s: %w", p.ID, err)
	}
	return e, err
}

// CountSettleAudits counts the outbox settle events (FEATURE_<id>_DELIVERED or _FAILED) that
// carry an owner's idempotency key.
func CountSettleAudits(ctx context.Context, db *store.DB, owner, key string) (int, error) {
	var n int
	err := db.Q(ctx).QueryRow(ctx, `SELECT count(*) FROM audit_event WHERE owner_id = $1 AND idempotency_key = $2
		AND action ~ '`+store.SettleActionPattern+`'`, owner, key).Scan(&n)
	return n, err
}
