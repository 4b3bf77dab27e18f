package kernel

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/jsonb"
	"github.com/idemwork/idemwork/model"
)

// decodeObjectV2 is decodeObject as it was: json v2's Unmarshal, numbers as json.Number.
func decodeObjectV2(raw []byte) (map[string]any, error) {
	var m map[string]any
	err := jsonv2.Unmarshal(raw, &m, jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, v *any) error {
		if dec.PeekKind() != '0' {
			return errors.ErrUnsupported
		}
		n, err := dec.ReadValue()
		if err != nil {
			return err
		}
		*v = json.Number(n)
		return nil
	})))
	return m, err
}

// decodeObjectInputs are JSON texts a payload or input could be, and what the boundary refuses.
var decodeObjectInputs = []string{
	`{}`, ` {} `, `null`, `{"a":null}`, `[1]`, `"x"`, `1`, `true`, ``, ` `, `{`, `{"a"}`, `{"a":1,}`, `{"a":1}x`, `{"a":1} {"b":2}`,
	`{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `{"a\u0062":1,"ab":2}`, `{"\ud800":1}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", "{\"\xff\":1}",
	`{"a":"\u0000"}`, `{"t":true,"f":false,"n":null,"s":"","z":0,"neg":-0,"big":12345678901234567890123,"f2":1.50,"e":1e400,"tiny":1e-400}`,
	`{"arr":[],"obj":{},"deep":[[[{"x":[{}]}]]],"mixed":[1,"two",null,false,{"k":[]}]}`,
	`{"esc":"\u003c\u003e\u0026 \u2028\u2029 \/ \"q\" \\ \u00e9 \ud83d\ude00","":"empty name","a\"b":"q"}`,
	`{"originalContent": "Remember   to water  the plants\ton Sunday", "currentContent": "Remember   to water  the plants\ton Sunday   morning"}`,
	`{"x":` + strings.Repeat(`[`, 20) + strings.Repeat(`]`, 20) + `}`,
	`{"x":` + strings.Repeat(`[`, 10001) + strings.Repeat(`]`, 10001) + `}`,
	`{"x":` + strings.Repeat(`{"y":`, 30) + `1` + strings.Repeat(`}`, 30) + `}`,
}

// A feature run decodes the stored payload and its input exactly as json v2's Unmarshal (with
// numbers as json.Number) did: the same value, or an error where it failed.
func TestDecodeObjectDecodesAsJSONv2Does(t *testing.T) {
	t.Parallel()
	for _, raw := range decodeObjectInputs {
		want, wantErr := decodeObjectV2([]byte(raw))
		got, err := decodeObject([]byte(raw))
		require.Equal(t, wantErr == nil, err == nil, "%.60q: json v2 %.200v, decodeObject %.200v", raw, wantErr, err)
		if err == nil {
			require.Equal(t, want, got, "%.60q", raw)
		}
	}
}

func FuzzDecodeObject(f *testing.F) {
	for _, raw := range decodeObjectInputs {
		f.Add([]byte(raw))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, wantErr := decodeObjectV2(raw)
		got, err := decodeObject(raw)
		if (wantErr == nil) != (err == nil) {
			t.Fatalf("%.200q: json v2 %.200v, decodeObject %.200v", raw, wantErr, err)
		}
		if err == nil {
			require.Equal(t, want, got, "%.200q", raw)
		}
	})
}

// A feature's next payload and output are written, by the fast writer or the general path it
// leaves a value to, in exactly the bytes (or with exactly the refusal) of the general path:
// json v2's marshalValue, then package jsonb's canonical text.
func TestCanonicalWritesWhatTheGeneralPathWrites(t *testing.T) {
	t.Parallel()
	deep := func(n int) map[string]any {
		m := map[string]any{"leaf": "x"}
		for range n - 1 {
			m = map[string]any{"in": m}
		}
		return m
	}
	values := []map[string]any{nil, {}, {"a": nil, "b": true, "c": false, "d": "", "e": 0, "f": -7, "g": int(1) << 62},
		{"n": json.Number("12"), "m": json.Number("-3"), "z": json.Number("0")},
		{"n": json.Number("-0")}, {"n": json.Number("1.50")}, {"n": json.Number("1e3")}, {"n": json.Number("007")}, {"n": json.Number("")},
		{"n": json.Number("12345678901234567890123")}, {"f": 1.5}, {"f": int64(3)}, {"u": uint(3)},
		{"s": "<&>\u2028\u2029 é😀 \"q\" \\ \x01\x1f\x7f"}, {"s": "\xff"}, {"s": "nul\x00"}, {"\xff": 1}, {"nul\x00": 1},
		{"": "empty", "a": 1, "bb": 2, "b": 3, "aa": 4, "é": 5, "Z": 6},
		{"list": []any{}, "nil": []any(nil), "obj": map[string]any{}, "nilobj": map[string]any(nil),
			"mixed": []any{1, "two", nil, false, map[string]any{"k": []any{json.Number("2")}}}},
		{"other": []string{"a"}}, {"other": struct{}{}},
		deep(15), deep(16), deep(17), {"big": strings.Repeat("x", 64<<10)}, {"big": strings.Repeat("x", 64<<10-20)},
	}
	for _, raw := range decodeObjectInputs {
		if v, err := decodeObjectV2([]byte(raw)); err == nil {
			values = append(values, v)
		}
	}
	for _, v := range values {
		b, err := marshalValue(v)
		if err != nil { // a value json v2 cannot write: refused the same way
			_, gotErr := canonicalObject("payload", v)
			require.Equal(t, err, gotErr, "%.80v", v)
			_, gotErr = canonicalJSON(v)
			require.Equal(t, err, gotErr, "%.80v", v)
			continue
		}
		want, wantErr := model.CanonicalObject("payload", b)
		got, err := canonicalObject("payload", v)
		require.Equal(t, wantErr, err, "%.80v", v)
		require.Equal(t, string(want), string(got), "%.80v", v)

		want, wantErr = jsonb.Canonical(b, jsonb.Limits{})
		got, err = canonicalJSON(v)
		require.Equal(t, wantErr, err, "%.80v", v)
		require.Equal(t, string(want), string(got), "%.80v", v)
	}
}
