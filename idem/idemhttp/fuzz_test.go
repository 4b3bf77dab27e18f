package idemhttp_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemhttp"
	"github.com/idemwork/idemwork/idem/idemtype"
)

// FuzzParseKey: the header parser never panics; it accepts exactly one header that is
// a bare run of visible ASCII or a well-formed RFC 8941 sf-string (with parameters, ignored), the
// two spellings of a key name the same key, and everything else is 400 BAD_REQUEST.
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"k", `"k"`, `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "8e03978e-40d5-43e8-bc93-6894a57f9324", ``, ` `, "\t",
		`""`, `"a\"b"`, `"a\\b"`, `"a\b"`, `"unterminated`, `"k";p=1`, `"k";P=1`, `"k";a;b=?1;c="d"`, `"k";x=`, `"k" `, ` k `, "a b", "é", `"é"`, `"a b"`, "\x00"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, v string, twice bool) {
		h := http.Header{}
		h.Add(idemtype.HeaderIdempotencyKey, v)
		if twice {
			h.Add(idemtype.HeaderIdempotencyKey, v)
		}
		key, present, err := idemhttp.ParseKey(h)
		if !present {
			t.Fatal("a sent header is present")
		}
		if err != nil {
			if c := apperr.CodeOf(err); c != apperr.BadRequest {
				t.Fatalf("code %s for %q", c, v)
			}
			return
		}
		if twice {
			t.Fatalf("accepted a repeated header %q", v)
		}
		if key == "" || strings.TrimSpace(key) != key && !strings.HasPrefix(strings.TrimSpace(v), `"`) {
			t.Fatalf("accepted %q as key %q", v, key)
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x20 || key[i] > 0x7e {
				t.Fatalf("key %q of %q holds byte 0x%02x", key, v, key[i])
			}
		}
		// The quoted spelling of a key names the same key as the bare one.
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		q := http.Header{}
		q.Set(idemtype.HeaderIdempotencyKey, quoted)
		again, _, err := idemhttp.ParseKey(q)
		if err != nil || again != key {
			t.Fatalf("%q: key %q, quoted %s gives %q, %v", v, key, quoted, again, err)
		}
	})
}
