package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"unicode/utf8"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/jsonb"
)

// FuzzDecodeBody: whatever a client sends, decoding a body either fills the request struct from
// exactly one JSON object within the cap — valid UTF-8, no duplicate name — or fails with 400
// BAD_REQUEST, 413 PAYLOAD_TOO_LARGE or (a duplicate name, invalid UTF-8, a NUL) 422
// VALIDATION_FAILED — never a panic, never another code.
func FuzzDecodeBody(f *testing.F) {
	for _, s := range []string{`{"title":"t"}`, `{"title":"t","payload":{"a":[1,2]}}`, `{"expectRevision":1}`, ``, `{`, `[]`,
		`{"title":"t"} {}`, `{"owner":"x"}`, `null`, `{"title":1}`, "{\"title\":\"\u0000\"}", `{"title":"t"}` + string(bytes.Repeat([]byte(" "), 300)),
		`{"title":"a","title":"b"}`, `{"payload":{"a":1,"a":2}}`, "{\"title\":\"\xff\"}", `{"summary":null,"title":"t"}`} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	a := &API{opts: Options{MaxBodyBytes: 256}}
	f.Fuzz(func(t *testing.T, body []byte, patch bool) {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		var err error
		if patch {
			var b PatchBody
			err = a.decodeBody(r, false, &b)
		} else {
			var b CreateBody
			err = a.decodeBody(r, false, &b)
		}
		if err == nil {
			if len(body) > 256 {
				t.Fatalf("accepted %d bytes over a 256-byte cap", len(body))
			}
			var m map[string]json.RawMessage
			if json.Unmarshal(body, &m) != nil || m == nil || !utf8.Valid(body) {
				t.Fatalf("accepted a body that is not one JSON object: %q", body)
			}
			if _, err := jsonb.Canonical(body, jsonb.Limits{}); err != nil {
				var je *jsonb.Error
				// A number outside numeric's range and a NUL inside the payload are the kernel's
				// refusals of the payload (422), not the body's.
				if !errors.As(err, &je) || (je.Kind != jsonb.Number && je.Kind != jsonb.NUL) {
					t.Fatalf("accepted a body the boundary refuses: %q: %v", body, err)
				}
			}
			return
		}
		switch c := apperr.CodeOf(err); c {
		case apperr.BadRequest, apperr.PayloadTooLarge, apperr.ValidationFailed:
		default:
			t.Fatalf("code %s for %q: %v", c, body, err)
		}
	})
}

// FuzzAuthenticate: only an exact configured token (or, in dev mode from loopback, a valid
// X-Owner-Id agreeing with it) names an owner; anything else is 401.
func FuzzAuthenticate(f *testing.F) {
	const token = "token-alice-0001"
	for _, s := range []string{"Bearer " + token, "bearer " + token, "Bearer  " + token + " ", "Bearer", "Basic x", "",
		"Bearer token-alice-000", "Bearer " + token + "x"} {
		f.Add(s, "", false)
		f.Add(s, "alice", true)
		f.Add(s, "bob", true)
	}
	// authenticate only reads the API's tokens and options: one API per mode serves every input
	// (building one per input — its mux and metrics — was most of this target's time).
	apis := map[bool]*API{}
	for _, dev := range []bool{false, true} {
		apis[dev] = New(nil, Options{Tokens: map[string]string{token: "alice"}, DevAuth: dev})
	}
	f.Fuzz(func(t *testing.T, authz, devOwner string, dev bool) {
		a := apis[dev]
		r := httptest.NewRequest(http.MethodGet, "/", nil) // RemoteAddr 192.0.2.1: not loopback
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		if devOwner != "" {
			r.Header.Set(HeaderDevOwner, devOwner)
		}
		owner, err := a.authenticate(r)
		if err != nil {
			if c := apperr.CodeOf(err); c != apperr.Unauthorized {
				t.Fatalf("code %s", c)
			}
			return
		}
		if owner != "alice" || devOwner != "" {
			t.Fatalf("authenticated %q with Authorization %q and X-Owner-Id %q from a non-loopback address", owner, authz, devOwner)
		}
	})
}
