package kernel

import (
	"encoding/json"

	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// The kernel's requests, results, key views, reports and demo steps are plain data of package
// model (the views use them without the database); these names are the same types.
type (
	CreateInput     = model.CreateInput
	PatchInput      = model.PatchInput
	FeatureInput    = model.FeatureInput
	WriteResult     = model.WriteResult
	KeyView         = model.KeyView
	KeyLife         = model.KeyLife
	RestoredView    = model.RestoredView
	LatestView      = model.LatestView
	ErrorView       = model.ErrorView
	VerifyOptions   = model.VerifyOptions
	Violation       = model.Violation
	Invariant       = model.Invariant
	InvariantReport = model.InvariantReport
	DemoCheck       = model.DemoCheck
	DemoStep        = model.DemoStep
	ModeComparison  = model.ModeComparison
	ModeSide        = model.ModeSide
)

// Limits of the JSON boundary (SPEC §6).
const (
	MaxJSONBytes   = model.MaxJSONBytes
	MaxJSONDepth   = model.MaxJSONDepth
	MaxTitleChars  = model.MaxTitleChars
	MaxSummaryChar = model.MaxSummaryChar
	MaxCommentChar = model.MaxCommentChar
)

// Key states, as the next request with the key would meet them (KeyView.State).
const (
	KeySucceeded   = model.KeySucceeded
	KeyFailsClosed = model.KeyFailsClosed
	KeyProcessing  = model.KeyProcessing
	KeyExpired     = model.KeyExpired
	KeyLegacy      = model.KeyLegacy
)

// BlockedExternalSteps names the steps of the blocked_external walk-through, in order.
var BlockedExternalSteps = model.BlockedExternalSteps

// OutboxSteps names the steps of the outbox walk-through, in order.
var OutboxSteps = model.OutboxSteps

// CanonicalObject passes a payload or input through the JSON boundary (model.CanonicalObject).
func CanonicalObject(field string, raw []byte) (json.RawMessage, error) {
	return model.CanonicalObject(field, raw)
}

// CheckJSONObject reports whether raw passes the JSON boundary as a payload or input.
func CheckJSONObject(field string, raw []byte) error { return model.CheckJSONObject(field, raw) }

// CheckText enforces a text field's length in characters, UTF-8 and no NUL.
func CheckText(field, s string, minChars, maxChars int) error {
	return model.CheckText(field, s, minChars, maxChars)
}

// OutcomeText is a write's outcome as a person should read it (model.OutcomeText).
func OutcomeText(o idemtype.Outcome, e *store.Execution) string { return model.OutcomeText(o, e) }

// OpCreate is the operation of creating a record of module.
func OpCreate(module string) string { return model.OpCreate(module) }

// OpPatch is the operation of patching a record.
func OpPatch(module, recordID string) string { return model.OpPatch(module, recordID) }

// OpFeature is the operation of running a feature on a record.
func OpFeature(module, recordID, featureID string) string {
	return model.OpFeature(module, recordID, featureID)
}
