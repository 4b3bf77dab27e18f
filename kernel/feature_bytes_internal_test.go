package kernel

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/jsonb"
	"github.com/idemwork/idemwork/model"
)

// Before json v2, an internal feature decoded the payload and input
// with encoding/json (UseNumber) and wrote its next payload and its output with json.Marshal on
// the way to the canonical text. These are those steps as they were.
func decodeObjectStd(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	err := dec.Decode(&m)
	return m, err
}

func canonicalPayloadStd(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return model.CanonicalObject("payload", b)
}

func canonicalJSONStd(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jsonb.Canonical(b, jsonb.Limits{})
}

// Every internal feature of every module writes, from hostile payloads and inputs, the same
// next payload and the same output bytes through the new decoding and encoding as through
// encoding/json: a stored revision or execution does not change by a byte.
func TestInternalFeaturesWriteTheSameBytesAsThroughEncodingJSON(t *testing.T) {
	t.Parallel()
	payloads := []string{
		`{"originalContent": "Remember   to water  the plants\ton Sunday", "currentContent": "Remember   to water  the plants\ton Sunday   morning"}`,
		`{"currentContent": "  <&> \u2028 \u2029 é😀 \"q\" \\ \u0001\u001f\u007f  tail  ", "originalContent": ""}`,
		`{"status": "OPEN", "due": "2026-01-02"}`, `{"status": "OPEN"}`,
		`{"text": "call the plumber", "tags": ["home", "todo", [], {}], "priority": 2, "archived": false}`,
		`{"n": 12345678901234567890123, "f": 0.1000000000000000055, "e": 1e400, "neg": -0.0, "nested": {"a": [1, {"b": null}]}}`,
		`{"": "empty name", "a\"b": 1, "currentContent": "` + strings.Repeat("word   ", 500) + `"}`, `{}`,
	}
	inputs := []string{`{}`, `{"x": 1}`, `{"note": "<tag>", "list": [true, false, null]}`}
	reg := NewRegistry(NewRules(1 << 20))
	ran := 0
	for _, code := range reg.Codes() {
		mod, err := reg.Module(code)
		require.NoError(t, err)
		for _, feat := range mod.Features {
			if feat.Mode != ModeInternal || feat.Apply == nil {
				continue
			}
			for _, rawPayload := range payloads {
				payload, err := model.CanonicalObject("payload", []byte(rawPayload))
				require.NoError(t, err)
				for _, rawInput := range inputs {
					input, err := model.CanonicalObject("input", []byte(rawInput))
					require.NoError(t, err)
					stdP, err := decodeObjectStd(payload)
					require.NoError(t, err)
					stdIn, err := decodeObjectStd(input)
					require.NoError(t, err)
					newP, err := decodeObject(payload)
					require.NoError(t, err)
					newIn, err := decodeObject(input)
					require.NoError(t, err)
					require.Equal(t, stdP, newP, rawPayload)
					require.Equal(t, stdIn, newIn, rawInput)

					stdNext, stdOut, stdErr := feat.Apply(stdP, stdIn)
					next, out, applyErr := feat.Apply(newP, newIn)
					require.Equal(t, stdErr, applyErr)
					if applyErr != nil {
						continue
					}
					ran++
					wantPayload, wantErr := canonicalPayloadStd(stdNext)
					gotPayload, gotErr := canonicalObject("payload", next)
					require.Equal(t, wantErr, gotErr)
					require.Equal(t, string(wantPayload), string(gotPayload), "%s %s on %s", code, feat.ID, rawPayload)
					wantOut, wantErr := canonicalJSONStd(stdOut)
					gotOut, gotErr := canonicalJSON(out)
					require.Equal(t, wantErr, gotErr)
					require.Equal(t, string(wantOut), string(gotOut), "%s %s output on %s", code, feat.ID, rawPayload)
				}
			}
		}
	}
	require.Greater(t, ran, 20, "the features ran on the corpus")
	// What is not an object (null, an array) decodes as encoding/json decodes it, to the same
	// value or an error; a duplicate name, which encoding/json resolves "last wins", and a second
	// value, which its Decoder leaves unread, are errors (the boundary refuses both before a
	// payload or input is stored).
	for _, raw := range []string{`null`, `[1]`} {
		want, wantErr := decodeObjectStd([]byte(raw))
		got, gotErr := decodeObject([]byte(raw))
		require.Equal(t, want, got, raw)
		require.Equal(t, wantErr == nil, gotErr == nil, raw)
	}
	for _, raw := range []string{`{"a": 1, "a": 2}`, `{"a": 1} {"b": 2}`} {
		_, err := decodeObject([]byte(raw))
		require.Error(t, err, raw)
	}
}

// marshalValue writes the same JSON value as json.Marshal: through the canonical writer, the
// same bytes, for the values features build and every value encoding/json decodes.
func TestMarshalValueWritesWhatJSONMarshalWrites(t *testing.T) {
	t.Parallel()
	values := []any{nil, true, "", "<&>\u2028\x01\x7f", "\xff", json.Number("-0.10e+5"), json.Number(""), 0, -7, int64(1) << 62, 1.5, 1e21, []any{}, []any(nil),
		map[string]any{}, map[string]any(nil), map[string]any{"\xff": 1}, map[string]int{"a": 1}, []any{struct{}{}},
		map[string]any{"charactersBefore": 52, "charactersAfter": 41, "archived": true,
			"nested": map[string]any{"z": []any{json.Number("1.0"), "é😀", nil}, "": "empty name", "a\"b": "q"}}}
	for _, raw := range []string{`{"a":[],"b":{},"c":[[],{}],"d":[1,"x",null,true,false,{"e":[0.5,-0,1e400]}]}`,
		`{"big":12345678901234567890123,"tiny":1e-400}`, `{"esc":"\u003c\u003e\u0026 \u2028\u2029 \/ \"q\" \\ \u00e9"}`} {
		v, err := decodeObjectStd([]byte(raw))
		require.NoError(t, err)
		values = append(values, v)
	}
	for _, v := range values {
		std, err := json.Marshal(v)
		require.NoError(t, err)
		want, wantErr := jsonb.Canonical(std, jsonb.Limits{})
		b, err := marshalValue(v)
		require.NoError(t, err, "%#v", v)
		got, gotErr := jsonb.Canonical(b, jsonb.Limits{})
		require.Equal(t, wantErr, gotErr, "%#v", v)
		require.Equal(t, string(want), string(got), "%#v", v)
	}
	for _, v := range []any{json.Number("01"), json.Number("1e")} {
		_, stdErr := json.Marshal(v)
		_, err := marshalValue(v)
		require.Error(t, stdErr)
		require.Error(t, err, "%#v", v)
	}
}

// The policies write a reference as json.Marshal of its ref struct writes it: the same bytes for
// the ids the kernel makes and the same envelope, or the same refusal, for any other.
func TestPoliciesSerializeReferencesAsJSONMarshalDoes(t *testing.T) {
	t.Parallel()
	ids := []string{"01JZ3W9Q8X4T6V2N1M0K7H5G3F", "rec-1:x.y_z", "", "a\"b", "<&>", "é", "\xff", "ctl\x01", strings.Repeat("7", 65)}
	k := &Kernel{}
	env := func(policy string, fields []string, b []byte, err error) string {
		require.NoError(t, err)
		e, err := idem.BuildEnvelope(policy, fields, b)
		if err != nil {
			return "error: " + err.Error()
		}
		return string(e)
	}
	for _, id := range ids {
		for _, rev := range []int{0, 1, 2, 1 << 31} {
			rp := recordSnapshotPolicy{k}
			got, err := rp.Serialize(RecordResult{Record: model.Record{ID: id, Revision: rev}})
			want, wantErr := json.Marshal(recordRef{RecordID: id, Revision: rev})
			require.Equal(t, env(rp.Name(), rp.Fields(), want, wantErr), env(rp.Name(), rp.Fields(), got, err), "%q", id)
			fp := k.featurePolicyFor("F01")
			got, err = fp.Serialize(FeatureResult{Record: model.Record{ID: id, Revision: rev}, Execution: model.Execution{ID: id + "e"}})
			want, wantErr = json.Marshal(executionRef{RecordID: id, Revision: rev, ExecutionID: id + "e"})
			require.Equal(t, env(fp.Name(), fp.Fields(), want, wantErr), env(fp.Name(), fp.Fields(), got, err), "%q", id)
			if id == ids[0] || id == ids[1] {
				require.Equal(t, string(want), string(got))
			}
		}
		cp := commitmentReviewPolicy{k}
		got, err := cp.Serialize(ReviewResult{Review: model.Review{RecordID: id, ID: "01JREV" + id}})
		want, wantErr := json.Marshal(reviewRef{RecordID: id, ReviewID: "01JREV" + id})
		require.Equal(t, env(cp.Name(), cp.Fields(), want, wantErr), env(cp.Name(), cp.Fields(), got, err), "%q", id)
	}
}
