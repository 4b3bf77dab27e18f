package kernel

import (
	"encoding/json"
	"strings"
	"unicode"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/model"
)

// marshalValue is a JSON text of v (a feature's payload or output) on its way to the canonical
// form: json v2's, written as the same JSON value as encoding/json's json.Marshal (a nil slice
// or map is null, a json.Number is the number, invalid UTF-8 becomes U+FFFD).
func marshalValue(v any) ([]byte, error) {
	return jsonv2.Marshal(v, marshalLikeV1)
}

var marshalLikeV1 = jsonv2.JoinOptions(jsonv2.FormatNilSliceAsNull(true), jsonv2.FormatNilMapAsNull(true), jsontext.AllowInvalidUTF8(true),
	jsonv2.WithMarshalers(jsonv2.MarshalToFunc(func(enc *jsontext.Encoder, n json.Number) error {
		if n == "" {
			n = "0" // as encoding/json writes an empty json.Number
		}
		return enc.WriteValue(jsontext.Value(n))
	})))

// CheckTitle enforces a title: 1-200 characters of one line, no control character at all.
func CheckTitle(s string) error {
	if err := model.CheckText("title", s, 1, model.MaxTitleChars); err != nil {
		return err
	}
	return checkControls("title", s, "")
}

// CheckSummary enforces a summary: at most 2000 characters, no control character but newline
// and tab.
func CheckSummary(s string) error {
	if err := model.CheckText("summary", s, 0, model.MaxSummaryChar); err != nil {
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
