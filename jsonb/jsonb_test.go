package jsonb_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/jsonb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// corpus covers every rule of the rendering: key order, spacing, escapes, numbers at and past
// numeric's limits, and the inputs jsonb refuses.
var corpus = []string{
	`{}`, `[]`, `{"a":{}}`, `[[]]`, `null`, `true`, `false`, `0`, `"s"`, ` {"a" : 1 } `,
	`{"b":1,"aa":2,"a":3,"":4}`, `{"z":1,"Z":2,"é":3,"e":4,"":5}`, `{" ":0,"0":0,"":0}`,
	`{"a":1,"a b":2,"a!":3,"a\"":4}`, `{"\u00e9":1,"e\u0301":2}`, `{"b":{"d":1,"c":[{"f":1,"e":2}]},"a":[]}`,
	`[1,2e3,1.0,-0.0,1E-2,100e-2,0e-5,-0,1.5e1,15e-1,1500e-2,0.000,-1.25E+2,12345678901234567890,0.1000000000000000055]`,
	`[1e0,1E+0,1e-0,0e0,0.0e5,-0e-3,9e-1,123.456e-5,5e16383,1e-16383,1.0e-16382]`,
	`[1e131071, -1e131071]`, `[1e131072]`, `[1e-16384]`, `[0e-16384]`, `[0e99999999]`, `[1e1073741822]`, `[1e1073741823]`, `[1e-1073741823]`,
	`["\u0000"]`, `{"\u0000":1}`, `["\ud83d\ude00"]`, `["\ud800"]`, `["\udc00x"]`, `["\ud800\u0041"]`,
	`["\"\\\/\b\f\n\r\t"]`, `["\u0001\u001f\u007f\u0080\u2028\u2029"]`, `["<&>'"]`, `["é😀"]`, "[\"\x7f\"]",
	`["\u00E9\u00e9"]`, `{"a":"b","a":"c"}`, `{"a":1,"\u0061":2}`, `{"x":{"a":1,"a":2}}`,
	"[\"\xff\"]", "[\"\xc3\"]", "{\"\xe2\x28\xa1\":1}", `{"a":01}`, `{"a":1.}`, `{"a":tru}`, `{"a":1,}`, `[1,]`, `{} {}`, `{} x`, ``, ` `,
	`{"a":"` + strings.Repeat("x", 3000) + `"}`, strings.Repeat("[", 40) + strings.Repeat("]", 40),
}

// pgRender asks PostgreSQL what jsonb makes of raw: its text, or that it refuses it.
func pgRender(t *testing.T, conn *pgx.Conn, raw string) (string, bool) {
	t.Helper()
	var out string
	err := conn.QueryRow(context.Background(), `SELECT $1::text::jsonb::text`, raw).Scan(&out)
	if err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			t.Fatalf("%q: %v", raw, err)
		}
		return pgErr.Code + " " + pgErr.Message, false
	}
	return out, true
}

func TestCanonicalIsWhatPostgreSQLPrints(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	conn, err := pgx.Connect(context.Background(), db.DSN)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	for _, raw := range corpus {
		got, err := jsonb.Canonical([]byte(raw), jsonb.Limits{})
		if !utf8.ValidString(raw) {
			// PostgreSQL refuses invalid UTF-8 in any text before jsonb sees it.
			require.Error(t, err, "%q", raw)
			continue
		}
		want, ok := pgRender(t, conn, raw)
		if !ok {
			require.Error(t, err, "%q: PostgreSQL refuses it (%s), Canonical gave %q", raw, want, got)
			continue
		}
		var je *jsonb.Error
		if errors.As(err, &je) && je.Kind == jsonb.DuplicateName {
			continue // jsonb keeps the last of duplicate names; the boundary refuses them
		}
		require.NoError(t, err, "%q: PostgreSQL prints %q", raw, want)
		require.Equal(t, want, string(got), "%q", raw)
		again, err := jsonb.Canonical(got, jsonb.Limits{})
		require.NoError(t, err)
		require.Equal(t, string(got), string(again), "canonical text is a fixed point")
		require.True(t, jsonb.IsCanonical(got))
	}
}

func TestRefusalsNameThePlace(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		raw     string
		kind    jsonb.Kind
		pointer string
	}{
		{`{"a":{"b":1,"b":2}}`, jsonb.DuplicateName, "/a/b"},
		{`{"dup":1,"dup":2}`, jsonb.DuplicateName, "/dup"},
		{"{\"a\":[\"x\xff\"]}", jsonb.InvalidUTF8, "/a/0"},
		{`{"a":"\ud800"}`, jsonb.InvalidUTF8, "/a"},
		{`{"a":{"b":"\u0000"}}`, jsonb.NUL, "/a/b"},
		{`{"a":[1e131072]}`, jsonb.Number, "/a/0"},
		{`{"a":1} x`, jsonb.Syntax, ""},
		{`{"a":`, jsonb.Syntax, ""},
	} {
		_, err := jsonb.Canonical([]byte(c.raw), jsonb.Limits{})
		var je *jsonb.Error
		require.ErrorAs(t, err, &je, "%q", c.raw)
		require.Equal(t, c.kind, je.Kind, "%q: %v", c.raw, err)
		if c.pointer != "" {
			require.Equal(t, c.pointer, je.Pointer, "%q: %v", c.raw, err)
		}
	}
	require.Equal(t, "payload.a.tags[2]", jsonb.Path("payload", "/a/tags/2"))
	require.Equal(t, "payload", jsonb.Path("payload", ""))
}

func TestLimits(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"a":`, 16) + `1` + strings.Repeat(`}`, 16)
	_, err := jsonb.Canonical([]byte(deep), jsonb.Limits{MaxDepth: 16})
	require.NoError(t, err)
	_, err = jsonb.Canonical([]byte(`[`+deep+`]`), jsonb.Limits{MaxDepth: 16})
	var je *jsonb.Error
	require.ErrorAs(t, err, &je)
	require.Equal(t, jsonb.TooDeep, je.Kind)

	// The size is the canonical text's: nine bytes of 1e131071 are 131072 digits.
	_, err = jsonb.Canonical([]byte(`{"n":1e131071}`), jsonb.Limits{MaxBytes: 64 << 10})
	require.ErrorAs(t, err, &je)
	require.Equal(t, jsonb.TooLarge, je.Kind)
	require.Contains(t, je.Detail, "prints as 131072 characters")
	out, err := jsonb.Canonical([]byte(`{"a":1,"b":2}`), jsonb.Limits{MaxBytes: len(`{"a": 1, "b": 2}`)})
	require.NoError(t, err)
	require.Equal(t, `{"a": 1, "b": 2}`, string(out))
	_, err = jsonb.Canonical([]byte(`{"a":1,"b":2}`), jsonb.Limits{MaxBytes: len(`{"a": 1, "b": 2}`) - 1})
	require.ErrorAs(t, err, &je)
	require.Equal(t, jsonb.TooLarge, je.Kind)
}

// Explain words json v2's refusals as Canonical words its own: a body decoded by json v2 and a
// payload through Canonical name a duplicate, bad UTF-8 or a lone surrogate alike.
func TestExplainWordsJSONv2sRefusalsAsCanonicalDoes(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`{"a":{"b":1,"b":2}}`, "{\"a\":[\"x\xff\"]}", `{"a":"\ud800"}`, "{\"\xff\":1}", `{"a":1} x`, `{"a":`, `{"a":tru}`, `[1,]`} {
		_, cerr := jsonb.Canonical([]byte(raw), jsonb.Limits{})
		var want *jsonb.Error
		require.ErrorAs(t, cerr, &want, raw)
		var v any
		err := jsonv2.Unmarshal([]byte(raw), &v)
		require.Error(t, err, raw)
		got := jsonb.Explain([]byte(raw), err)
		require.NotNil(t, got, "%q: %v", raw, err)
		require.Equal(t, want.Kind, got.Kind, "%q: %v", raw, err)
		if want.Kind != jsonb.Syntax {
			require.Equal(t, *want, *got, raw)
		}
	}
	require.Nil(t, jsonb.Explain(nil, errors.New("not a decoder's")))
}

// AppendObject and AppendString write what Canonical makes of the same object, and they write
// it into one allocation: the runner builds a body, an audit detail and an envelope with them
// on every write.
func TestAppendObjectIsCanonicalInOneAllocation(t *testing.T) {
	// Not parallel: AllocsPerRun counts the whole process's allocations.
	hostile := []string{"", "bench note", "tab\there", "quote \" and \\ back", "ctl \x01\x1f\x7f", "é😀 <&>", strings.Repeat("x", 300)}
	for _, s := range hostile {
		members := []jsonb.Member{{Name: "title", Value: jsonb.AppendString(nil, s)}, {Name: "summary", Value: nil},
			{Name: "payload", Value: []byte(`{"a": 1}`)}, {Name: "aa", Value: jsonb.AppendString(nil, s+s)}}
		got := jsonb.AppendObject(nil, members...)
		ref, err := json.Marshal(map[string]any{"title": s, "payload": map[string]int{"a": 1}, "aa": s + s})
		require.NoError(t, err)
		want, err := jsonb.Canonical(ref, jsonb.Limits{})
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%q", s)
		require.Equal(t, string(want), string(jsonb.AppendObject([]byte("prefix"), members...)[len("prefix"):]))
	}
	members := []jsonb.Member{{Name: "policy", Value: []byte(`"feature-execution-reference-v1"`)},
		{Name: "result", Value: []byte(`{"revision": 2, "recordId": "01JZ3W9Q8X4T6V2N1M0K7H5G3F", "executionId": "01JZ3W9Q8X4T6V2N1M0K7H5G3G"}`)},
		{Name: "schemaVersion", Value: []byte(`1`)}}
	if raceDetector {
		return
	}
	require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _ = jsonb.AppendObject(nil, members...) }))
	require.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _ = jsonb.AppendString(nil, "call the plumber about the kitchen tap") }))
}
