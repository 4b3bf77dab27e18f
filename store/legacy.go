package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The statements of the legacy receipts' verification and redaction (kernel's VerifyLegacy and
// RedactLegacy) and of the data-migration ledger that gates the redaction.

// LegacyCounts is what the verification counts in idempotency_record for a legacy operation
// and policy.
type LegacyCounts struct {
	// Receipts are the operation's rows stored under the policy: what a redaction deletes.
	Receipts int
	// OtherOperations are rows under the policy that belong to other operations; Typed are
	// SUCCEEDED rows of the operation under another policy; Processing its reservations still
	// PROCESSING. Each must be 0 for the redaction to touch nothing else.
	OtherOperations, Typed, Processing int
}

// CountLegacy counts the receipts of operation stored under policy, and what a redaction of them
// must not meet. Two statements, in ctx's transaction when it carries one.
func (db *DB) CountLegacy(ctx context.Context, operation, policy string) (LegacyCounts, error) {
	var c LegacyCounts
	q := db.Q(ctx)
	if err := q.QueryRow(ctx, `SELECT count(*) FROM idempotency_record
		WHERE operation = $1 AND response->>'policy' = $2`, operation, policy).Scan(&c.Receipts); err != nil {
		return c, fmt.Errorf("count legacy receipts: %w", err)
	}
	if err := q.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE response->>'policy' = $2 AND operation <> $1),
			count(*) FILTER (WHERE operation = $1 AND status = 'SUCCEEDED' AND response->>'policy' IS DISTINCT FROM $2),
			count(*) FILTER (WHERE operation = $1 AND status = 'PROCESSING')
		FROM idempotency_record`, operation, policy).Scan(&c.OtherOperations, &c.Typed, &c.Processing); err != nil {
		return c, fmt.Errorf("count legacy receipts: %w", err)
	}
	return c, nil
}

// SetLedgerEntry records a data migration's status (pending, passed, failed) and detail.
func (db *DB) SetLedgerEntry(ctx context.Context, name, status string, detail json.RawMessage, at time.Time) error {
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
func (db *DB) ShareLedgerEntry(ctx context.Context, name string) (string, error) {
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

// DeleteLegacy deletes the receipts of operation stored under policy and returns how many.
func (db *DB) DeleteLegacy(ctx context.Context, operation, policy string) (int64, error) {
	tag, err := db.Q(ctx).Exec(ctx, `DELETE FROM idempotency_record WHERE operation = $1 AND response->>'policy' = $2`, operation, policy)
	if err != nil {
		return 0, fmt.Errorf("delete legacy receipts: %w", err)
	}
	return tag.RowsAffected(), nil
}
