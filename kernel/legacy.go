package kernel

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/store/legacy"
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

// legacyReceipts are the rows the verification counts and the redaction deletes: identity:create
// receipts stored under raw-json-v1, which an envelope names at its root member "policy"
// (idemtype.Envelope): the path is the format's, handed to the store.
var legacyReceipts = legacy.Receipts{Operation: OpLegacyIdentityCreate, Policy: idemtype.LegacyPolicy, PolicyAt: []string{"policy"}}

// VerifyLegacy checks the legacy IDENTITY receipts and records the verdict in the ledger: it
// passes when every raw-json-v1 receipt belongs to identity:create and every identity:create
// receipt is raw-json-v1 (nothing typed would be touched by the redaction). Safe to rerun.
func (k *Kernel) VerifyLegacy(ctx context.Context) (VerifyReport, error) {
	rep := VerifyReport{Name: LegacyLedgerEntry, Problems: []string{}}
	err := k.db.Tx(ctx, func(ctx context.Context) error {
		c, err := legacy.Count(ctx, k.db, legacyReceipts)
		if err != nil {
			return err
		}
		rep.Receipts = c.Receipts
		if c.OtherOperations > 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%d raw-json-v1 receipt(s) belong to operations other than identity:create", c.OtherOperations))
		}
		if c.Typed > 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%d identity:create receipt(s) are not raw-json-v1", c.Typed))
		}
		if c.Processing > 0 {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%d identity:create reservation(s) are still PROCESSING", c.Processing))
		}
		rep.Status = "passed"
		if len(rep.Problems) > 0 {
			rep.Status = "failed"
		}
		detail, _ := json.Marshal(map[string]any{"receipts": rep.Receipts, "problems": rep.Problems})
		return legacy.SetLedgerEntry(ctx, k.db, LegacyLedgerEntry, rep.Status, json.RawMessage(detail), k.runner.Clock().Now())
	})
	return rep, err
}

// RedactLegacy deletes exactly the receipts with operation 'identity:create' and policy
// 'raw-json-v1', only when the ledger entry is passed. It returns the count; rerunning deletes 0.
func (k *Kernel) RedactLegacy(ctx context.Context) (int64, error) {
	var deleted int64
	err := k.db.Tx(ctx, func(ctx context.Context) error {
		// FOR SHARE: a concurrent verify that flips the entry waits for this redaction.
		status, err := legacy.ShareLedgerEntry(ctx, k.db, LegacyLedgerEntry)
		if err != nil {
			return err
		}
		if status != "passed" {
			return apperr.New(apperr.ValidationFailed, "ledger entry %s is %s, not passed: run 'idemwork legacy verify' first (and fix what it reports)", LegacyLedgerEntry, status)
		}
		deleted, err = legacy.Delete(ctx, k.db, legacyReceipts)
		return err
	})
	return deleted, err
}
