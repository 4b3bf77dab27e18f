package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"

	"idemwork/apperr"
)

// Limits of the JSON boundary (SPEC §6).
const (
	MaxJSONBytes   = 64 << 10
	MaxJSONDepth   = 16
	MaxTitleChars  = 200
	MaxSummaryChar = 2000
	MaxCommentChar = 2000
)

// CheckJSONObject enforces the JSON boundary on a payload or input: a JSON object, at most
// 64 KiB encoded, nesting depth at most 16, valid UTF-8, and no NUL character anywhere (jsonb
// rejects \u0000, which would otherwise surface as a raw database error).
func CheckJSONObject(field string, raw []byte) error {
	if len(raw) > MaxJSONBytes {
		return apperr.New(apperr.ValidationFailed, "%s: %d bytes exceeds the %d-byte limit", field, len(raw), MaxJSONBytes)
	}
	if !utf8.Valid(raw) {
		return apperr.New(apperr.ValidationFailed, "%s: not valid UTF-8", field)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	depth, maxDepth := 0, 0
	first := true
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return apperr.New(apperr.ValidationFailed, "%s: not valid JSON: %v", field, err)
		}
		if first {
			if d, ok := tok.(json.Delim); !ok || d != '{' {
				return apperr.New(apperr.ValidationFailed, "%s: must be a JSON object", field)
			}
			first = false
		}
		switch t := tok.(type) {
		case json.Delim:
			if t == '{' || t == '[' {
				depth++
				if depth > maxDepth {
					maxDepth = depth
				}
				if maxDepth > MaxJSONDepth {
					return apperr.New(apperr.ValidationFailed, "%s: nested deeper than %d levels", field, MaxJSONDepth)
				}
			} else {
				depth--
			}
		case string:
			if strings.ContainsRune(t, 0) {
				return apperr.New(apperr.ValidationFailed, "%s: contains a NUL character (\\u0000), which PostgreSQL jsonb cannot store", field)
			}
		}
		if depth == 0 && !first {
			// The object closed: anything after it is a second value.
			if dec.More() {
				return apperr.New(apperr.ValidationFailed, "%s: more than one JSON value", field)
			}
			if _, err := dec.Token(); !errors.Is(err, io.EOF) {
				return apperr.New(apperr.ValidationFailed, "%s: trailing data after the JSON object", field)
			}
			return nil
		}
	}
	if first {
		return apperr.New(apperr.ValidationFailed, "%s: must be a JSON object", field)
	}
	return apperr.New(apperr.ValidationFailed, "%s: unexpected end of JSON", field)
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
