package wire_test

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/wire"
)

// encodingJSON is what the toolchain's encoding/json writes for v, as wire.JSON is configured:
// HTML characters unescaped, one trailing newline.
func encodingJSON(t *testing.T, v any) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	return b.String()
}

// An answer's body is, byte for byte, what encoding/json writes for it (but for the two
// characters below): clients of the HTTP contract and the CLI's --json see the bytes they saw
// before the engine changed. The bodies hold what the API's answers hold: PostgreSQL's jsonb
// text (with its spaces and escapes) in raw fields,
// nil and empty slices, nil pointers, times in and out of UTC, control characters, HTML
// characters, U+2028 and maps in no particular order.
func TestAnAnswersBodyIsWhatEncodingJSONWrites(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 18, 30, 0, 123456789, time.UTC)
	key, rev := "key-<&>", 4
	payload := json.RawMessage(`{"blob": "` + strings.Repeat("x", 60<<10) + `", "n": [1, 2.50, {"a": null, "b": "\u2028<&>"}], "e": {}}`)
	bodies := map[string]any{
		"a record's answer": struct {
			Record     model.Record       `json:"record"`
			Revisions  []model.Revision   `json:"revisions"`
			Executions []model.Execution  `json:"executions"`
			Audit      []model.AuditEvent `json:"audit"`
			Links      map[string]*string `json:"links"`
		}{
			Record:    model.Record{ID: "01M8VGHECN7YMXRN7TPFQ17HNH", OwnerID: "alice", ModuleCode: "NOTE", Revision: 4, Title: "a\x1b[2J\nb\u2028", Payload: payload, CreatedAt: at, UpdatedAt: at.In(time.FixedZone("X", -5*3600))},
			Revisions: []model.Revision{{OwnerID: "alice", RecordID: "r", Revision: 4, Snapshot: payload, IdempotencyKey: &key, CreatedAt: at}},
			Audit:     []model.AuditEvent{{ID: "e", Action: "record.create", Revision: &rev, Detail: json.RawMessage(`{"x": [ ]}`), At: at}, {Detail: nil}},
			Links:     map[string]*string{"revisions": &key, "executions": nil, "audit": nil},
		},
		"an empty page": struct{ Executions []model.Execution }{Executions: []model.Execution{}},
		"a map of any":  map[string]any{"z": 1, "a": []any{nil, true, 1.5e300, "s"}, "m": map[string]int{"b": 2, "a": 1}},
		"a bare string": "<&>\u2029",
		"bytes and ints": struct {
			B []byte
			U uint64
		}{B: []byte{0, 255}, U: math.MaxUint64},
	}
	for name, v := range bodies {
		got := wire.JSON(http.StatusOK, v)
		require.Equal(t, http.StatusOK, got.Status, name)
		want := encodingJSON(t, v)
		if want != got.Body {
			i := 0
			for i < len(want) && i < len(got.Body) && want[i] == got.Body[i] {
				i++
			}
			t.Fatalf("%s: differs at byte %d: encoding/json %q, wire.JSON %q", name, i, want[max(0, i-40):min(len(want), i+40)], got.Body[max(0, i-40):min(len(got.Body), i+40)])
		}
	}
}

// U+2028 and U+2029 inside a raw value (PostgreSQL prints them unescaped in jsonb's text) are
// written escaped, as every other string's are: the same JSON as encoding/json's, which left
// them raw, and no answer holds either character unescaped.
func TestLineAndParagraphSeparatorsInARawValueAreEscaped(t *testing.T) {
	t.Parallel()
	v := struct {
		Title   string          `json:"title"`
		Payload json.RawMessage `json:"payload"`
	}{Title: "a\u2028b", Payload: json.RawMessage("{\"a\": \"x\u2028y\u2029z é\"}")}
	got := wire.JSON(http.StatusOK, v)
	require.Equal(t, `{"title":"a\u2028b","payload":{"a":"x\u2028y\u2029z é"}}`+"\n", got.Body)
	require.NotContains(t, got.Body, "\u2028")
	require.NotContains(t, got.Body, "\u2029")
	var back, want any
	require.NoError(t, json.Unmarshal([]byte(got.Body), &back))
	require.NoError(t, json.Unmarshal([]byte(encodingJSON(t, v)), &want))
	require.Equal(t, want, back)
}

// A string that is not UTF-8 (no text from PostgreSQL is: a UTF8 database refuses it) has each
// bad byte replaced by U+FFFD, as encoding/json does; the character is written as itself where
// encoding/json writes its escape, the same JSON string.
func TestAStringThatIsNotUTF8IsAnsweredWithReplacementCharacters(t *testing.T) {
	t.Parallel()
	v := map[string]string{"title": "b\xffc\xc3"}
	got := wire.JSON(http.StatusOK, v)
	require.Equal(t, "{\"title\":\"b\uFFFDc\uFFFD\"}\n", got.Body)
	var back, want map[string]string
	require.NoError(t, json.Unmarshal([]byte(got.Body), &back))
	require.NoError(t, json.Unmarshal([]byte(encodingJSON(t, v)), &want))
	require.Equal(t, want, back)
}

// A body that is not JSON (a raw field that does not parse, a NaN) is a bug in this program: it
// is answered as one, INTERNAL, with no half body.
func TestABodyThatIsNotJSONIsAnsweredAsInternal(t *testing.T) {
	t.Parallel()
	for name, v := range map[string]any{
		"a raw field that does not parse": struct{ P json.RawMessage }{P: json.RawMessage(`{"a": }`)},
		"a NaN":                           map[string]float64{"x": math.NaN()},
	} {
		got := wire.JSON(http.StatusOK, v)
		require.Equal(t, http.StatusInternalServerError, got.Status, name)
		require.Contains(t, got.Body, string(apperr.Internal), name)
		require.NotContains(t, got.Body, "NaN", name)
	}
}
