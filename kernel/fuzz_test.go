package kernel_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/model"
)

// FuzzCheckJSONObject: the boundary never panics, rejects only with a field-named
// VALIDATION_FAILED, and whatever it accepts is a JSON object jsonb can hold: valid UTF-8 JSON,
// at most 64 KiB, depth at most 16, and no NUL in any key or string.
func FuzzCheckJSONObject(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"a":1}`, `{"a":[1,2,{"b":null}]}`, `[]`, `"s"`, `1`, `null`, ``, ` `, `{`, `{} {}`, `{}x`, `{"a":"\u0000"}`,
		`{"\u0000":1}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`, `{"a":"\\ud800"}`, `{"a":1e-16384}`,
		`{"a":1e131072}`, `{"a":0e1073741823}`, `{"a":-0.0e-5}`, nested(16), nested(17),
		`{"a":{"b":{"c":[[[[]]]]}}}`, `{"a":"\"\\\/\b\f\n\r\t"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		err := model.CheckJSONObject("payload", raw)
		if err != nil {
			ae := apperr.As(err)
			if ae.Code != apperr.ValidationFailed || !(strings.HasPrefix(ae.Message, "payload: ") || strings.HasPrefix(ae.Message, "payload.") || strings.HasPrefix(ae.Message, "payload[")) {
				t.Fatalf("rejection is not a field-named VALIDATION_FAILED: %v", err)
			}
			return
		}
		if len(raw) > model.MaxJSONBytes || !utf8.Valid(raw) || !json.Valid(raw) {
			t.Fatalf("accepted %q: size %d, utf8 %v, valid %v", raw, len(raw), utf8.Valid(raw), json.Valid(raw))
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("accepted %q but it does not decode: %v", raw, err)
		}
		if _, ok := v.(map[string]any); !ok {
			t.Fatalf("accepted a non-object %q", raw)
		}
		if d := depth(v); d > model.MaxJSONDepth {
			t.Fatalf("accepted depth %d", d)
		}
		if hasNUL(v) {
			t.Fatalf("accepted a NUL: %q", raw)
		}
		// What the boundary accepts round-trips: its canonical form is a fixed point, so the
		// stored value read back fingerprints and renders as the first request did.
		canon, err := model.CanonicalObject("payload", raw)
		if err != nil {
			t.Fatalf("accepted %q but cannot render it: %v", raw, err)
		}
		again, err := model.CanonicalObject("payload", canon)
		if err != nil || !bytes.Equal(canon, again) {
			t.Fatalf("%q: canonical %q renders again as %q, %v", raw, canon, again, err)
		}
		if idem.Fingerprint("op", canon) != idem.Fingerprint("op", again) {
			t.Fatalf("%q: fingerprints differ", raw)
		}
	})
}

func depth(v any) int {
	switch x := v.(type) {
	case map[string]any:
		m := 0
		for _, c := range x {
			m = max(m, depth(c))
		}
		return m + 1
	case []any:
		m := 0
		for _, c := range x {
			m = max(m, depth(c))
		}
		return m + 1
	}
	return 0
}

func hasNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.ContainsRune(x, 0)
	case map[string]any:
		for k, c := range x {
			if strings.ContainsRune(k, 0) || hasNUL(c) {
				return true
			}
		}
	case []any:
		for _, c := range x {
			if hasNUL(c) {
				return true
			}
		}
	}
	return false
}
