package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"idemwork/apperr"
	"idemwork/idem"
	"idemwork/store"
)

// KeyView is one idempotency key seen side by side (SPEC §10.2 `key`): the raw envelope, the
// exact result a replay restores, and the latest record, so drift is visible.
type KeyView struct {
	Key         string          `json:"key"`
	Operation   string          `json:"operation"`
	Status      string          `json:"status"`
	Fingerprint string          `json:"fingerprint"`
	CreatedAt   time.Time       `json:"createdAt"`
	ExpiresAt   time.Time       `json:"expiresAt"`
	Envelope    json.RawMessage `json:"envelope"`
	Legacy      bool            `json:"legacy"`
	Restored    RestoredView    `json:"restored"`
	Latest      LatestView      `json:"latest"`
	// RestoreError says why a replay of this key would fail closed (absent when it restores).
	RestoreError *ErrorView `json:"restoreError,omitempty"`
	// Audit lists the audit events this key's request wrote (not part of the CLI shape).
	Audit []store.AuditEvent `json:"-"`
}

// RestoredView is what a replay returns.
type RestoredView struct {
	Record    *store.Record    `json:"record"`
	Execution *store.Execution `json:"execution"`
	Review    *store.Review    `json:"review,omitempty"`
}

// LatestView is the record as it is now.
type LatestView struct {
	Record *store.Record `json:"record"`
}

// ErrorView is a coded error as JSON.
type ErrorView struct {
	Code    apperr.Code `json:"code"`
	Status  int         `json:"status"`
	Message string      `json:"message"`
}

// InspectKey reads a key with its restored result and the latest record. Restoring here runs
// the same policy a replay would, read-only.
func (k *Kernel) InspectKey(ctx context.Context, owner, key string) (KeyView, error) {
	if err := idem.ValidateOwner(owner); err != nil {
		return KeyView{}, err
	}
	if err := idem.ValidateKey(key); err != nil {
		return KeyView{}, err
	}
	row, err := k.db.GetKey(ctx, owner, key)
	if err != nil {
		return KeyView{}, err
	}
	v := KeyView{Key: row.Key, Operation: row.Operation, Status: row.Status, Fingerprint: row.Fingerprint,
		CreatedAt: row.CreatedAt, ExpiresAt: row.ExpiresAt, Envelope: row.Response}
	if v.Audit, err = k.db.AuditForKey(ctx, owner, key); err != nil {
		return KeyView{}, err
	}
	if row.Response == nil {
		return v, nil // PROCESSING: nothing to restore
	}
	env, err := idem.ParseEnvelope(row.Response)
	if err == nil && env.Legacy {
		v.Legacy = true
		return v, nil
	}
	op, opErr := ParseOperation(row.Operation)
	if err == nil {
		v.Restored.Record, v.Restored.Execution, v.Restored.Review, err = k.RestoreKey(ctx, owner, row.Operation, row.Response)
	}
	if err != nil {
		ae := apperr.As(err)
		v.RestoreError = &ErrorView{Code: ae.Code, Status: ae.Status(), Message: ae.Message}
	}
	recordID := op.RecordID
	if opErr == nil && recordID == "" && err == nil && v.Restored.Record != nil {
		recordID = v.Restored.Record.ID
	}
	if opErr == nil && recordID == "" && env.Result != nil {
		var ref struct {
			RecordID string `json:"recordId"`
		}
		_ = json.Unmarshal(env.Result, &ref)
		recordID = ref.RecordID
	}
	if opErr == nil && recordID != "" {
		latest, err := k.db.LatestRecord(ctx, owner, op.Module, recordID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return KeyView{}, err
		}
		if err == nil {
			v.Latest.Record = &latest
		}
	}
	return v, nil
}
