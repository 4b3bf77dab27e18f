package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"idemwork/apperr"
	"idemwork/idem"
)

// LegacyLedgerEntry is the ledger row that must be passed before legacy receipts are redacted.
const LegacyLedgerEntry = "0019_identity_legacy_verification"

// VerifyReport is what legacy verify found.
type VerifyReport struct {
	Name     string   `json:"name"`
	Status   string   `json:"status"`
	Receipts int      `json:"receipts"`
	Problems []string `json:"problems"`
}

// VerifyLegacy checks the legacy IDENTITY receipts and records the verdict in the ledger: it
// passes when every raw-json-v1 receipt belongs to identity:create and every identity:create
// receipt is raw-json-v1 (nothing typed would be touched by the redaction). Safe to rerun.
func (k *Kernel) VerifyLegacy(ctx context.Context) (VerifyReport, error) {
	rep := VerifyReport{Name: LegacyLedgerEntry, Problems: []string{}}
	err := k.db.Tx(ctx, func(ctx context.Context) error {
		q := k.db.Q(ctx)
		if err := q.QueryRow(ctx, `SELECT count(*) FROM idempotency_record
			WHERE operation = $1 AND response->>'policy' = $2`, OpLegacyIdentityCreate, idem.LegacyPolicy).Scan(&rep.Receipts); err != nil {
			return err
		}
		var otherLegacy, typedIdentity, processing int
		if err := q.QueryRow(ctx, `SELECT
				count(*) FILTER (WHERE response->>'policy' = $2 AND operation <> $1),
				count(*) FILTER (WHERE operation = $1 AND status = 'SUCCEEDED' AND response->>'policy' IS DISTINCT FROM $2),
				count(*) FILTER (WHERE operation = $1 AND status = 'PROCESSING')
			FROM idempotency_record`, OpLegacyIdentityCreate, idem.LegacyPolicy).Scan(&otherLegacy, &typedIdentity, &processing); err != nil {
			return err
		}
		if otherLegacy > 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%d raw-json-v1 receipt(s) belong to operations other than identity:create", otherLegacy))
		}
		if typedIdentity > 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%d identity:create receipt(s) are not raw-json-v1", typedIdentity))
		}
		if processing > 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%d identity:create reservation(s) are still PROCESSING", processing))
		}
		rep.Status = "passed"
		if len(rep.Problems) > 0 {
			rep.Status = "failed"
		}
		detail, _ := json.Marshal(map[string]any{"receipts": rep.Receipts, "problems": rep.Problems})
		_, err := q.Exec(ctx, `INSERT INTO data_migration_ledger (name, status, detail, updated_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (name) DO UPDATE SET status = excluded.status, detail = excluded.detail, updated_at = excluded.updated_at`,
			LegacyLedgerEntry, rep.Status, json.RawMessage(detail), k.runner.Clock().Now())
		return err
	})
	return rep, err
}

// RedactLegacy deletes exactly the receipts with operation 'identity:create' and policy
// 'raw-json-v1', only when the ledger entry is passed. It returns the count; rerunning deletes 0.
func (k *Kernel) RedactLegacy(ctx context.Context) (int64, error) {
	var deleted int64
	err := k.db.Tx(ctx, func(ctx context.Context) error {
		q := k.db.Q(ctx)
		var status string
		// FOR SHARE: a concurrent verify that flips the entry waits for this redaction.
		err := q.QueryRow(ctx, `SELECT status FROM data_migration_ledger WHERE name = $1 FOR SHARE`, LegacyLedgerEntry).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			status = "missing"
		} else if err != nil {
			return err
		}
		if status != "passed" {
			return apperr.New(apperr.ValidationFailed, "ledger entry %s is %s, not passed: run 'idemwork legacy verify' first (and fix what it reports)", LegacyLedgerEntry, status)
		}
		tag, err := q.Exec(ctx, `DELETE FROM idempotency_record WHERE operation = $1 AND response->>'policy' = $2`,
			OpLegacyIdentityCreate, idem.LegacyPolicy)
		if err != nil {
			return err
		}
		deleted = tag.RowsAffected()
		return nil
	})
	return deleted, err
}
