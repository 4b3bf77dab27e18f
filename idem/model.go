package idem

import "github.com/idemwork/idemwork/model"

// Outcome is what one call did (SPEC §4.4); an Envelope is a stored key's response. Both are
// plain data of package model, shared with the views without the database.
type (
	Outcome  = model.Outcome
	Envelope = model.Envelope
)

// The outcomes of a successful call.
const (
	Executed = model.Executed
	Replayed = model.Replayed
	Joined   = model.Joined
)

// SchemaVersion is the only envelope version this runner writes.
const SchemaVersion = model.SchemaVersion

// LegacyPolicy names pre-envelope receipts: readable for display, never written, never restored.
const LegacyPolicy = model.LegacyPolicy

// ParseEnvelope reads a stored envelope strictly (model.ParseEnvelope).
func ParseEnvelope(raw []byte) (Envelope, error) { return model.ParseEnvelope(raw) }

// ValidateKey checks an Idempotency-Key (model.ValidateKey).
func ValidateKey(key string) error { return model.ValidateKey(key) }

// ValidateOwner checks an owner id (model.ValidateOwner).
func ValidateOwner(owner string) error { return model.ValidateOwner(owner) }
