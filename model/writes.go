package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/jsonb"
)

// Limits of the JSON boundary (SPEC §6).
const (
	MaxJSONBytes   = 64 << 10
	MaxJSONDepth   = 16
	MaxTitleChars  = 200
	MaxSummaryChar = 2000
	MaxCommentChar = 2000
)

// objectLimits bound a payload or input: nesting and the size of its canonical text, which is
// what is stored, fingerprinted and returned (and what reading a revision back measures, so a
// stored snapshot passes the same boundary it was written through).
var objectLimits = jsonb.Limits{MaxDepth: MaxJSONDepth, MaxBytes: MaxJSONBytes}

// CanonicalObject passes a payload or input through the JSON boundary (SPEC §6) and returns its
// canonical text (package jsonb: exactly what jsonb stores and prints): a JSON object, at most
// 64 KiB in that form, nested at most 16 deep, valid UTF-8, no duplicate names, and nothing jsonb
// refuses — no NUL character (\u0000), no lone UTF-16 surrogate escape, no number outside
// numeric's range — which would otherwise surface as a raw database error. A violation is
// VALIDATION_FAILED naming the member (payload.a.b[2]).
func CanonicalObject(field string, raw []byte) (json.RawMessage, error) {
	out, err := jsonb.Canonical(raw, objectLimits)
	if err != nil {
		return nil, boundaryError(field, err)
	}
	if out[0] != '{' {
		return nil, apperr.New(apperr.ValidationFailed, "%s: must be a JSON object", field)
	}
	return out, nil
}

// CheckJSONObject reports whether raw passes the JSON boundary as a payload or input.
func CheckJSONObject(field string, raw []byte) error {
	if err := jsonb.Check(raw, objectLimits); err != nil {
		return boundaryError(field, err)
	}
	if i := bytes.IndexFunc(raw, func(r rune) bool { return !unicode.IsSpace(r) }); i < 0 || raw[i] != '{' {
		return apperr.New(apperr.ValidationFailed, "%s: must be a JSON object", field)
	}
	return nil
}

// boundaryError is the VALIDATION_FAILED of a value the boundary refused, naming the member.
func boundaryError(field string, err error) error {
	var je *jsonb.Error
	if errors.As(err, &je) {
		return apperr.New(apperr.ValidationFailed, "%s: %s", je.Path(field), je.Detail)
	}
	return apperr.New(apperr.ValidationFailed, "%s: not valid JSON", field)
}

// CheckText enforces a text field's length in characters, UTF-8 and no NUL.
func CheckText(field, s string, minChars, maxChars int) error {
	if !utf8.ValidString(s) {
		return apperr.New(apperr.ValidationFailed, "%s: not valid UTF-8", field)
	}
	if strings.ContainsRune(s, 0) {
		return apperr.New(apperr.ValidationFailed, "%s: contains a NUL character", field)
	}
	n := utf8.RuneCountInString(s)
	if n < minChars || n > maxChars {
		if minChars > 0 {
			return apperr.New(apperr.ValidationFailed, "%s: must be %d-%d characters, got %d", field, minChars, maxChars, n)
		}
		return apperr.New(apperr.ValidationFailed, "%s: must be at most %d characters, got %d", field, maxChars, n)
	}
	return nil
}

// CreateInput is a create request.
type CreateInput struct {
	Owner         string
	Module        string
	Key           string
	Title         string
	Summary       *string
	Payload       json.RawMessage // nil: {}
	ShareInFlight *bool
}

// PatchInput is a patch request; nil fields stay as they are.
type PatchInput struct {
	Owner          string
	Module         string
	RecordID       string
	Key            string
	ExpectRevision int
	Title          *string
	Summary        *string
	Payload        json.RawMessage
	ShareInFlight  *bool
}

// FeatureInput is a feature run request.
type FeatureInput struct {
	Owner         string
	Module        string
	RecordID      string
	FeatureID     string
	Key           string
	Input         json.RawMessage // nil: {}
	ShareInFlight *bool
}

// WriteResult is what create, patch and action return (SPEC §10.2). For a replay, Record is
// the restored revision, not the latest.
type WriteResult struct {
	Outcome   idemtype.Outcome `json:"outcome"`
	Waited    bool             `json:"waited"`
	Key       *string          `json:"key"`
	Operation string           `json:"operation"`
	Record    *Record          `json:"record"`
	Execution *Execution       `json:"execution"`
	Envelope  json.RawMessage  `json:"envelope"`
}

// OutcomeText is a write's outcome as a person should read it. A run whose execution did not
// simply succeed leads with the execution's status — "BLOCKED (outcome EXECUTED)" — so a run
// that failed closed, or is only queued, never reads as a success of the real action.
func OutcomeText(o idemtype.Outcome, e *Execution) string {
	if e == nil || e.Status == "SUCCEEDED" || e.Status == "" {
		return string(o)
	}
	return e.Status + " (outcome " + string(o) + ")"
}
