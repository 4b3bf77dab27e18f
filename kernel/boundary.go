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
// 64 KiB encoded, nesting depth at most 16, valid UTF-8, and nothing jsonb refuses — no NUL
// character (\u0000), no lone UTF-16 surrogate escape, no number outside numeric's range — which
// would otherwise surface as a raw database error.
func CheckJSONObject(field string, raw []byte) error {
	if len(raw) > MaxJSONBytes {
		return apperr.New(apperr.ValidationFailed, "%s: %d bytes exceeds the %d-byte limit", field, len(raw), MaxJSONBytes)
	}
	return checkJSONShape(field, raw, MaxJSONBytes)
}

// checkJSONShape is the JSON boundary; maxBytes > 0 also limits the size of the value as
// PostgreSQL stores and prints it, where numbers are written out in full (9 bytes of 1e131071
// print as 131072 digits: a small request must not become a record too large to read back).
//
// A stored snapshot is checked with maxBytes 0: the size limit measured the request, and jsonb's
// rendering of the same value is larger (a space after every comma and colon), so measuring the
// rendering would fail closed on revisions the boundary itself accepted.
func checkJSONShape(field string, raw []byte, maxBytes int) error {
	if shapeOK(raw, maxBytes) {
		return nil
	}
	return checkJSONShapeTokens(field, raw, maxBytes)
}

// checkJSONShapeTokens is the reference implementation of checkJSONShape: it decides every
// input shapeOK does not accept outright, and words every rejection.
func checkJSONShapeTokens(field string, raw []byte, maxBytes int) error {
	if !utf8.Valid(raw) {
		return apperr.New(apperr.ValidationFailed, "%s: not valid UTF-8", field)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	depth, maxDepth := 0, 0
	first := true
	stored := len(raw) // the size with every number as PostgreSQL prints it
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
		case json.Number:
			printed, ok := jsonbNumber(string(t))
			if !ok {
				return apperr.New(apperr.ValidationFailed, "%s: the number %.32s is outside what PostgreSQL jsonb can store (at most %d digits before the decimal point and %d after)",
					field, string(t), maxNumericIntDigits, maxNumericScale)
			}
			if stored += printed - len(t); maxBytes > 0 && stored > maxBytes {
				return apperr.New(apperr.ValidationFailed, "%s: with its numbers written out as PostgreSQL stores them (%.32s prints as %d characters) it exceeds the %d-byte limit",
					field, string(t), printed, maxBytes)
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
			if hasLoneSurrogate(raw) {
				return apperr.New(apperr.ValidationFailed, "%s: contains a lone UTF-16 surrogate escape (\\uD800-\\uDFFF without its pair), which PostgreSQL jsonb cannot store", field)
			}
			return nil
		}
	}
	if first {
		return apperr.New(apperr.ValidationFailed, "%s: must be a JSON object", field)
	}
	return apperr.New(apperr.ValidationFailed, "%s: unexpected end of JSON", field)
}

// Limits of PostgreSQL's numeric, which jsonb stores numbers in: 32767 base-10000 digits before
// the decimal point, a display scale of 16383, and an exponent below INT_MAX/2 as written.
const (
	maxNumericIntDigits = 131072
	maxNumericScale     = 16383
	maxNumericExponent  = 1<<30 - 1
)

// jsonbNumber reports whether PostgreSQL accepts a JSON number literal (already valid JSON
// syntax) into jsonb, and how many characters it prints it as (numeric_out writes no exponent).
// Go decodes 1e-20000 or 1e200000 happily; numeric_in refuses them with "value overflows numeric
// format", which would otherwise surface as a raw database error.
func jsonbNumber(lit string) (printed int, ok bool) {
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mantissa, expPart := lit, ""
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		mantissa, expPart = lit[:i], lit[i+1:]
	}
	intPart, fracPart := mantissa, ""
	if i := strings.IndexByte(mantissa, '.'); i >= 0 {
		intPart, fracPart = mantissa[:i], mantissa[i+1:]
	}
	exp := int64(0)
	if expPart != "" {
		negExp := strings.HasPrefix(expPart, "-")
		digits := strings.TrimLeft(strings.TrimLeft(expPart, "+-"), "0")
		if len(digits) > 10 {
			return 0, false
		}
		for i := 0; i < len(digits); i++ {
			exp = exp*10 + int64(digits[i]-'0')
		}
		if negExp {
			exp = -exp
		}
		if exp >= maxNumericExponent || exp <= -maxNumericExponent {
			return 0, false
		}
	}
	scale := max(int64(len(fracPart))-exp, 0)
	if scale > maxNumericScale {
		return 0, false
	}
	intDigits := int64(1) // numeric_out prints at least "0" before the point
	if lead := strings.IndexFunc(intPart+fracPart, func(r rune) bool { return r != '0' }); lead >= 0 {
		if w := int64(len(intPart)-lead) + exp; w > maxNumericIntDigits {
			return 0, false
		} else if w > 1 {
			intDigits = w
		}
		if neg {
			intDigits++ // there is no negative zero
		}
	}
	n := intDigits
	if scale > 0 {
		n += 1 + scale
	}
	return int(n), true
}

// hasLoneSurrogate reports whether a string of raw (valid JSON) holds a \u escape of a UTF-16
// surrogate that is not a high one immediately followed by a low one. Go decodes it to U+FFFD;
// jsonb rejects it.
func hasLoneSurrogate(raw []byte) bool {
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if !inString {
			inString = c == '"'
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+5 >= len(raw) || raw[i+1] != 'u' {
				i++ // a one-character escape
				continue
			}
			r := hex4(raw[i+2 : i+6])
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return true
			case r >= 0xD800 && r <= 0xDBFF:
				if i+11 >= len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' {
					return true
				}
				if low := hex4(raw[i+8 : i+12]); low < 0xDC00 || low > 0xDFFF {
					return true
				}
				i += 11
			default:
				i += 5
			}
		}
	}
	return false
}

// hex4 decodes four hex digits (-1 if they are not).
func hex4(b []byte) int {
	n := 0
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			n = n*16 + int(c-'0')
		case c >= 'a' && c <= 'f':
			n = n*16 + int(c-'a') + 10
		case c >= 'A' && c <= 'F':
			n = n*16 + int(c-'A') + 10
		default:
			return -1
		}
	}
	return n
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
