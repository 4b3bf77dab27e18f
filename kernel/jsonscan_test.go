package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"idemwork/apperr"
)

// oracleCheckJSONShape is checkJSONShape as it was before the allocation-free fast path: the
// oracle FuzzShapeMatchesTokens holds the new one to.
func oracleCheckJSONShape(field string, raw []byte, maxBytes int) error {
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

func shapeSeeds() []string {
	deep := func(n int) string { return strings.Repeat(`{"a":`, n-1) + `{}` + strings.Repeat(`}`, n-1) }
	return []string{
		`{}`, ` {} `, `{"a":1}`, `{"a":[1,2,{"b":null}]}`, `[]`, `"s"`, `1`, `null`, ``, ` `, `{`, `{} {}`, `{}x`, `{"a":"\u0000"}`,
		`{"\u0000":1}`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `{"a":"\ud83d\ude00"}`, `{"a":"\\ud800"}`, `{"a":1e-16384}`,
		`{"a":1e131072}`, `{"a":0e1073741823}`, `{"a":-0.0e-5}`, deep(16), deep(17), `{"a":[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]}`,
		`{"a":{"b":{"c":[[[[]]]]}}}`, `{"a":"\"\\\/\b\f\n\r\t"}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`,
		`{"a":1E+2,"b":-0,"c":true,"d":false}`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":tru}`, `{"a":"x` + "\n" + `"}`,
		`{"a":"é ü 😀"}`, `{"a":1e9999999999}`, `{"a":` + strings.Repeat("9", 70000) + `}`, `{"a":1}]`, `{"a":1}}`,
		`{"priority":2,"tags":["home","todo"],"text":"call the plumber"}`,
	}
}

// FuzzShapeMatchesTokens: checkJSONShape (fast path, then the token walk) accepts and rejects
// exactly what the token-only implementation did, with the same message, with and without a
// size limit.
func FuzzShapeMatchesTokens(f *testing.F) {
	for _, s := range shapeSeeds() {
		f.Add([]byte(s), uint16(0))
		f.Add([]byte(s), uint16(40))
	}
	f.Fuzz(func(t *testing.T, raw []byte, limit uint16) {
		for _, maxBytes := range []int{0, int(limit), MaxJSONBytes} {
			got, want := checkJSONShape("f", raw, maxBytes), oracleCheckJSONShape("f", raw, maxBytes)
			if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
				t.Fatalf("checkJSONShape(%q, %d) = %v, oracle %v", raw, maxBytes, got, want)
			}
		}
	})
}

func TestShapeMatchesTokensSeeds(t *testing.T) {
	for _, s := range shapeSeeds() {
		for _, maxBytes := range []int{0, 10, MaxJSONBytes} {
			got, want := checkJSONShape("f", []byte(s), maxBytes), oracleCheckJSONShape("f", []byte(s), maxBytes)
			if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
				t.Fatalf("checkJSONShape(%q, %d) = %v, oracle %v", s, maxBytes, got, want)
			}
		}
	}
	if !shapeOK([]byte(`{"priority":2,"tags":["home","todo"],"text":"call the plumber"}`), MaxJSONBytes) {
		t.Fatal("the fast path refuses a plain payload")
	}
}

var refSeeds = []string{
	`{"recordId":"01J0ABC","revision":2}`, ` { "revision" : 0 , "recordId" : "a:b.c_d-e" } `,
	`{"recordId":"01JZ3W9Q8X4T6V2N1M0K7H5G3F","revision":2,"executionId":"01JZ3W9Q8X4T6V2N1M0K7H5G3G"}`,
	`{}`, `{"recordId":"a","recordId":"b"}`, `{"RecordId":"a"}`, `{"recordId":"a\u0062"}`, `{"recordId":1}`,
	`{"revision":"1"}`, `{"revision":01}`, `{"revision":1234567890}`, `{"revision":-1}`, `{"revision":1.5}`,
	`{"x":1}`, `{"recordId":"a"} x`, `{"recordId":"a",}`, `[]`, `null`, ``, `{"recordId":"é"}`, "{\"recordId\":\"\xff\"}",
}

// FuzzRefScan: decodeRecordRef and decodeExecutionRef give exactly what json.Unmarshal (their
// oracle) gave, value and error.
func FuzzRefScan(f *testing.F) {
	for _, s := range refSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkRefScan(t, raw)
	})
}

func checkRefScan(t *testing.T, raw []byte) {
	t.Helper()
	var r1, r2 recordRef
	e1, e2 := decodeRecordRef(raw, &r1), json.Unmarshal(raw, &r2)
	if r1 != r2 || (e1 == nil) != (e2 == nil) || e1 != nil && e1.Error() != e2.Error() {
		t.Fatalf("decodeRecordRef(%q) = %+v, %v; json %+v, %v", raw, r1, e1, r2, e2)
	}
	var x1, x2 executionRef
	e1, e2 = decodeExecutionRef(raw, &x1), json.Unmarshal(raw, &x2)
	if x1 != x2 || (e1 == nil) != (e2 == nil) || e1 != nil && e1.Error() != e2.Error() {
		t.Fatalf("decodeExecutionRef(%q) = %+v, %v; json %+v, %v", raw, x1, e1, x2, e2)
	}
}

func TestRefScanSeeds(t *testing.T) {
	for _, s := range refSeeds {
		checkRefScan(t, []byte(s))
	}
}

// oracleBodyJSON is bodyJSON as it was: the oracle createBody and featureBody are held to.
func oracleBodyJSON(fields map[string]any) ([]byte, error) {
	for k, v := range fields {
		if raw, ok := v.(json.RawMessage); ok {
			if raw == nil {
				delete(fields, k)
				continue
			}
			if !json.Valid(raw) {
				return nil, apperr.New(apperr.ValidationFailed, "%s: not valid JSON", k)
			}
		}
		if p, ok := v.(*string); ok && p == nil {
			delete(fields, k)
		}
	}
	return json.Marshal(fields)
}

var bodySeeds = []struct{ title, summary, payload string }{
	{"bench note", "", `{"priority":2,"tags":["home","todo"],"text":"call the plumber"}`},
	{"a <b> & c", "s\"q\\", ` { "a" : [ 1 , 2 ] } `}, {"é\u2028", "\x00\x7f", `{"a":"<&>"}`}, {"", "", ``},
	{"x", "y", `{"a":"\u2029"}`}, {"\xff", "z", `{"a":"\xff"}`}, {"t", "", `{} x`}, {"t", "", `[1,2]`}, {"t", "", `"s"`},
	// Already as json.Marshal writes them, or one byte away from it.
	{"t", "", `{"a":"x\"y","b":[1,{"c":null}],"d":-0.5e3}`}, {"t", "", "{\"a\":\"\u2028\"}"}, {"t", "", `{"a":"<"}`},
	{"t", "", `{"a":"\\"}`}, {"t", "", `{"a":1,}`}, {"t", "", `{"a":"\u00e9"}`}, {"t", "", "{\"a\":1}\n"},
}

func checkBodies(t *testing.T, title, summary string, hasSummary bool, payload []byte, hasPayload bool) {
	t.Helper()
	var sp *string
	if hasSummary {
		sp = &summary
	}
	var p json.RawMessage
	if hasPayload {
		p = append(json.RawMessage{}, payload...)
	}
	got, err := createBody(title, sp, p)
	want, werr := oracleBodyJSON(map[string]any{"title": title, "summary": sp, "payload": p})
	if !bytes.Equal(got, want) || (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
		t.Fatalf("createBody(%q, %v, %q) = %q, %v; oracle %q, %v", title, sp, p, got, err, want, werr)
	}
	for _, detail := range []map[string]any{{"operation": title}, {"operation": summary, "x": 1}, {"other": title}} {
		got, err = marshalDetail(detail)
		want, werr = json.Marshal(detail)
		if !bytes.Equal(got, want) || (err == nil) != (werr == nil) {
			t.Fatalf("marshalDetail(%v) = %q, %v; json %q, %v", detail, got, err, want, werr)
		}
	}
	got, err = featureBody(p)
	want, werr = oracleBodyJSON(map[string]any{"input": p})
	if !bytes.Equal(got, want) || (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
		t.Fatalf("featureBody(%q) = %q, %v; oracle %q, %v", p, got, err, want, werr)
	}
}

func TestBodiesMatchOracle(t *testing.T) {
	for _, s := range bodySeeds {
		for _, hs := range []bool{false, true} {
			for _, hp := range []bool{false, true} {
				checkBodies(t, s.title, s.summary, hs, []byte(s.payload), hp)
			}
		}
	}
}

// FuzzCreateBody: createBody, featureBody and marshalDetail give exactly what bodyJSON over a map (the oracle)
// gave, bytes and error.
func FuzzCreateBody(f *testing.F) {
	for _, s := range bodySeeds {
		f.Add(s.title, s.summary, true, []byte(s.payload), true)
		f.Add(s.title, s.summary, false, []byte(s.payload), false)
	}
	f.Fuzz(checkBodiesFuzz)
}

func checkBodiesFuzz(t *testing.T, title, summary string, hasSummary bool, payload []byte, hasPayload bool) {
	checkBodies(t, title, summary, hasSummary, payload, hasPayload)
}
