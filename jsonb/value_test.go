package jsonb_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/jsonb"
)

// stdDecode is encoding/json's reading of raw with UseNumber: what the kernel's features decoded
// payloads with before jsonb.Decode.
func stdDecode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// valueCorpus is corpus plus the shapes a feature meets: nested arrays and objects, empty ones,
// escapes, numbers past float64, and the texts Decode refuses where encoding/json reads something.
var valueCorpus = append(append([]string(nil), corpus...),
	`{"originalContent":"Remember   to water  the plants\ton Sunday","currentContent":"Remember   to water  the plants\ton Sunday   morning"}`,
	`{"a":[],"b":{},"c":[[],{}],"d":[1,"x",null,true,false,{"e":[0.5,-0,1e400]}]}`, `{"big":12345678901234567890123,"tiny":1e-400}`,
	`{"esc":"\u003c\u003e\u0026 \u2028\u2029 \/ \"q\" \\ \u00e9"}`, `{"a":1,"a":2}`, `{"a":"\ud800"}`, `{"a":1} {"b":2}`, `null`, `"s"`, `[1]`,
	`{"deep":`+strings.Repeat(`[`, 30)+strings.Repeat(`]`, 30)+`}`)

// Where Decode reads a value, encoding/json reads the same one: the features' payloads decode as
// before, down to an empty array that is not nil.
func TestDecodeReadsWhatEncodingJSONReads(t *testing.T) {
	t.Parallel()
	read := 0
	for _, raw := range valueCorpus {
		got, err := jsonb.Decode([]byte(raw))
		if err != nil {
			continue
		}
		read++
		want, stdErr := stdDecode([]byte(raw))
		require.NoError(t, stdErr, raw)
		require.Equal(t, want, got, raw)
	}
	require.Greater(t, read, 40, "Decode reads the corpus's valid values")
	for _, raw := range []string{`{"a":1,"a":2}`, `{"a":"\ud800"}`, `{"a":1} {"b":2}`, "[\"\xff\"]", `{"a":01}`, ``} {
		_, err := jsonb.Decode([]byte(raw))
		require.Error(t, err, raw)
	}
}

// AppendValue's text is the same JSON value as json.Marshal's: through Canonical, the same bytes,
// for every value decoded from the corpus and for the values features build (ints, nested maps).
func TestAppendValueCanonicalisesAsJSONMarshalDoes(t *testing.T) {
	t.Parallel()
	values := []any{nil, true, "", "<&>\u2028\x01\x7f", json.Number("-0.10e+5"), 0, -7, int64(1) << 62, []any{}, []any(nil),
		map[string]any{}, map[string]any(nil), map[string]any{"charactersBefore": 52, "charactersAfter": 41, "archived": true,
			"nested": map[string]any{"z": []any{json.Number("1.0"), "é😀", nil}, "": "empty name", "a\"b": "q"}}}
	for _, raw := range valueCorpus {
		if v, err := stdDecode([]byte(raw)); err == nil {
			values = append(values, v)
		}
	}
	for _, v := range values {
		std, err := json.Marshal(v)
		require.NoError(t, err)
		want, wantErr := jsonb.Canonical(std, jsonb.Limits{})
		b, ok := jsonb.AppendValue(nil, v)
		require.True(t, ok, "%#v", v)
		got, gotErr := jsonb.Canonical(b, jsonb.Limits{})
		require.Equal(t, wantErr, gotErr, "%#v", v)
		require.Equal(t, string(want), string(got), "%#v", v)
	}
	// What it does not write as encoding/json does, it leaves to encoding/json.
	for _, v := range []any{1.5, "\xff", map[string]any{"\xff": 1}, json.Number(""), json.Number("01"), json.Number("1e"), []any{struct{}{}},
		map[string]int{"a": 1}} {
		_, ok := jsonb.AppendValue(nil, v)
		require.False(t, ok, "%#v", v)
	}
}
