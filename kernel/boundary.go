package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"

	"idemwork/apperr"
	"idemwork/jsonb"
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

// canonicalJSON renders a value the kernel itself built (a feature's output) canonically.
func canonicalJSON(v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonb.Canonical(b, jsonb.Limits{})
}

// CheckTitle enforces a title: 1-200 characters of one line, no control character at all.
func CheckTitle(s string) error {
	if err := CheckText("title", s, 1, MaxTitleChars); err != nil {
		return err
	}
	return checkControls("title", s, "")
}

// CheckSummary enforces a summary: at most 2000 characters, no control character but newline
// and tab.
func CheckSummary(s string) error {
	if err := CheckText("summary", s, 0, MaxSummaryChar); err != nil {
		return err
	}
	return checkControls("summary", s, "\n\t")
}

// checkControls refuses a control character (Unicode Cc: U+0000-U+001F, U+007F-U+009F) other
// than those in allowed: such text breaks a terminal's screen (an ESC starts a sequence that
// clears it) and a one-line field's layout.
func checkControls(field, s, allowed string) error {
	n := 0
	for _, r := range s {
		n++
		if unicode.IsControl(r) && !strings.ContainsRune(allowed, r) {
			what := "no control character"
			if allowed != "" {
				what = "no control character but newline and tab"
			}
			return apperr.New(apperr.ValidationFailed, "%s: holds the control character U+%04X (character %d); a %s holds %s", field, r, n, field, what)
		}
	}
	return nil
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

// CheckRecordID validates a record id from outside (a ULID in practice).
func CheckRecordID(id string) error {
	if id == "" || len(id) > 64 {
		return apperr.New(apperr.ValidationFailed, "record: an id of 1-64 characters is required")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '-' || c == '_') {
			return apperr.New(apperr.ValidationFailed, "record: id %q has a character outside A-Z a-z 0-9 - _", id)
		}
	}
	return nil
}
