package legacy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/store"
)

// Receipts names the receipts a verification counts and a redaction deletes: the rows of
// Operation whose stored response names Policy at PolicyAt. Where a response names its policy is
// the envelope's layout, not the store's: the caller that owns the format hands the path in.
type Receipts struct {
	Operation, Policy string
	// PolicyAt is the JSON path, from the response's root, of the policy's name.
	PolicyAt []string
}

// policy is the SQL text of the policy's name in the key row k's response.
func (r Receipts) policy() string { return store.RefText(r.PolicyAt) }

// Counts is what the verification counts in idempotency_record for a legacy operation and
// policy.
type Counts struct {
	// Receipts are the operation's rows stored under the policy: what a redaction deletes.
	Receipts int
	// OtherOperations are rows under the policy that belong to other operations; Typed are
	// SUCCEEDED rows of the operation under another policy; Processing its reservations still
	// PROCESSING. Each must be 0 for the redaction to touch nothing else.
	OtherOperations, Typed, Processing int
}

// Count counts the receipts r names, and what a redaction of them must not meet. Two
// statements, in ctx's transaction when it carries one.
func Count(ctx context.Context, db *store.DB, r Receipts) (Counts, error) {
	var c Counts
	q := db.Q(ctx)
	if err := q.QueryRow(ctx, `SELECT count(*) FROM idempotency_record k
		WHERE operation = $1 AND `+r.policy()+` = $2`, r.Operation, r.Policy).Scan(&c.Receipts); err != nil {
		return c, fmt.Errorf("count legacy receipts: %w", err)
	}
	if err := q.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE `+r.policy()+` = $2 AND operation <> $1),
			count(*) FILTER (WHERE operation = $1 AND status = 'SUCCEEDED' AND `+r.policy()+` IS DISTINCT FROM $2),
			count(*) FILTER (WHERE operation = $1 AND status = 'PROCESSING')
		FROM idempotency_record k`, r.Operation, r.Policy).Scan(&c.OtherOperations, &c.Typed, &c.Processing); err != nil {
		return c, fmt.Errorf("count legacy receipts: %w", err)
	}
	return c, nil
}

// Delete deletes the receipts r names and returns how many.
func Delete(ctx context.Context, db *store.DB, r Receipts) (int64, error) {
	tag, err := db.Q(ctx).Exec(ctx, `DELETE FROM idempotency_record k WHERE operation = $1 AND `+r.policy()+` = $2`, r.Operation, r.Policy)
	if err != nil {
		return 0, fmt.Errorf("delete legacy receipts: %w", err)
	}
	return tag.RowsAffected(), nil
}

// SetLedgerEntry records a data migration's status (pending, passed, failed) and detail.
func SetLedgerEntry(ctx context.Context, db *store.DB, name, status string, detail json.RawMessage, at time.Time) error {
	// json.RawMessage, never []byte: pgx's exec and simple_protocol modes send a []byte as bytea.
	_, err := db.Q(ctx).Exec(ctx, `INSERT INTO data_migration_ledger (name, status, detail, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (name) DO UPDATE SET status = excluded.status, detail = excluded.detail, updated_at = excluded.updated_at`,
		name, status, detail, at)
	if err != nil {
		return fmt.Errorf("record ledger entry %s: %w", name, err)
	}
	return nil
}

// ShareLedgerEntry reads a ledger entry's status and holds it (FOR SHARE) until ctx's
// transaction ends: a concurrent SetLedgerEntry waits for it. An entry that does not exist is
// "missing".
func ShareLedgerEntry(ctx context.Context, db *store.DB, name string) (string, error) {
	var status string
	err := db.Q(ctx).QueryRow(ctx, `SELECT status FROM data_migration_ledger WHERE name = $1 FOR SHARE`, name).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "missing", nil
	}
	if err != nil {
		return "", fmt.Errorf("read ledger entry %s: %w", name, err)
	}
	return status, nil
}

// Receipt is a SUCCEEDED idempotency row written the way no write path writes one any more
// (a raw-json-v1 response): the demo and the tests seed them for the legacy ledger to find.
type Receipt struct {
	OwnerID, Key, Operation, Fingerprint string
	Response                             json.RawMessage
	CreatedAt, ExpiresAt                 time.Time
}

// InsertReceipt inserts r unless the owner's key has a row already, and reports whether it
// did.
func InsertReceipt(ctx context.Context, db *store.DB, r Receipt) (bool, error) {
	// json.RawMessage, never []byte: pgx's exec and simple_protocol modes send a []byte as bytea.
	tag, err := db.Q(ctx).Exec(ctx, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response,
			created_at, expires_at, updated_at)
		VALUES ($1, $2, $3, $4, 'SUCCEEDED', $5, $6, $7, $6) ON CONFLICT DO NOTHING`,
		r.OwnerID, r.Key, r.Operation, r.Fingerprint, r.Response, r.CreatedAt, r.ExpiresAt)
	if err != nil {
		return false, fmt.Errorf("seed legacy receipts: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}
