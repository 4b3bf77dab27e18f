package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"idemwork/apperr"
)

// oracleFingerprint is Fingerprint as it was before fastFingerprint. Stored rows depend on the
// value, so the fast path must give exactly this for every input.
func oracleFingerprint(operation string, body []byte) (string, error) {
	var parsed any
	if len(bytes.TrimSpace(body)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&parsed); err != nil {
			return "", apperr.Wrap(apperr.ValidationFailed, err, "body: not valid JSON: %v", err)
		}
		if dec.More() {
			return "", apperr.New(apperr.ValidationFailed, "body: more than one JSON value")
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{"operation": operation, "body": parsed}); err != nil {
		return "", fmt.Errorf("fingerprint: %w", err)
	}
	sum := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return hex.EncodeToString(sum[:]), nil
}

var fingerprintSeeds = []string{
	`{"payload":{"priority":2,"tags":["home","todo"],"text":"call the plumber about the kitchen tap"},"title":"bench note"}`,
	`{"title":"x","payload":{}}`, ` { "b" : [ 1 , 2.5e3 , -0 , true , false , null ] , "a" : "" } `, `{"a":1,"a":2}`,
	`{"a":{"a":1,"a":{"b":2}}}`, `[]`, `[{}]`, `"s"`, `1`, `-1.0E+5`, `null`, ``, "  \n", "\u00a0", "\u00a0{}", `{} }`,
	`{} ]`, `{} x`, `{}{`, `{"a":"<&>"}`, `{"a":"é😀"}`, "{\"a\":\"\u2028\"}", `{"a":"\u2028"}`, `{"a":"\n"}`,
	"{\"a\":\"\xff\"}", `{"a":01}`, `{"a":1.}`, `{"a":tru}`, `{"a":1,}`, `{"z":1,"Z":2,"é":3,"e":4,"":5}`,
	`{" ":0,"0":0,"":0}`, `{"a":1,"a b":2,"a!":3,"a\"":4}`, strings.Repeat("[", 40) + strings.Repeat("]", 40), `{"a":1e99999}`, `{"a":-}`,
}

func TestFingerprintFastPathMatchesOracle(t *testing.T) {
	for _, body := range fingerprintSeeds {
		for _, op := range []string{"NOTE:record:create", "op \"q\" <&> \u2028 é", ""} {
			got, err := Fingerprint(op, []byte(body))
			want, werr := oracleFingerprint(op, []byte(body))
			if got != want || errText(err) != errText(werr) {
				t.Fatalf("Fingerprint(%q, %q) = %s, %v; oracle %s, %v", op, body, got, err, want, werr)
			}
		}
	}
	if _, ok := fastFingerprint("NOTE:record:create", []byte(fingerprintSeeds[0])); !ok {
		t.Fatal("the fast path refuses a plain body")
	}
}

// FuzzFingerprintFastPath: Fingerprint gives exactly the oracle's value (or error) for every
// operation and body.
func FuzzFingerprintFastPath(f *testing.F) {
	for _, s := range fingerprintSeeds {
		f.Add("NOTE:record:create", []byte(s))
	}
	f.Add("op \"q\" <&>", []byte(`{}`))
	f.Fuzz(func(t *testing.T, op string, body []byte) {
		got, err := Fingerprint(op, body)
		want, werr := oracleFingerprint(op, body)
		if got != want || errText(err) != errText(werr) {
			t.Fatalf("Fingerprint(%q, %q) = %s, %v; oracle %s, %v", op, body, got, err, want, werr)
		}
	})
}
