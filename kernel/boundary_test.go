package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// nested returns an object nested depth levels deep ({"a":{"a":...}}).
func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + `{}` + strings.Repeat(`}`, depth-1)
}

// sized returns an object of exactly n bytes in its canonical form (as jsonb prints it).
func sized(n int) string {
	const head, tail = `{"a": "`, `"}`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

func TestTheJSONBoundaryRejectsBadInputWithAFieldNamedValidationErrorAndWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	note := b.createNote(t, "alice", "base", "base")
	before := b.counts(t)

	type c struct {
		name    string
		call    func(key string) error
		field   string
		message string
	}
	create := func(title string, summary *string, payload string) func(string) error {
		return func(key string) error {
			var p json.RawMessage
			if payload != "" {
				p = json.RawMessage(payload)
			}
			_, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: key, Title: title, Summary: summary, Payload: p})
			return err
		}
	}
	patch := func(payload string) func(string) error {
		return func(key string) error {
			_, err := b.k.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, Key: key, ExpectRevision: 1, Payload: json.RawMessage(payload)})
			return err
		}
	}
	feature := func(input string) func(string) error {
		return func(key string) error {
			_, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, FeatureID: "F01", Key: key, Input: json.RawMessage(input)})
			return err
		}
	}
	cases := []c{
		{"payload over 64 KiB", create("t", nil, sized(model.MaxJSONBytes+1)), "payload", "exceeds the 65536-byte limit"},
		{"payload deeper than 16", create("t", nil, nested(model.MaxJSONDepth+1)), "payload", "deeper than 16"},
		{"payload with NUL", create("t", nil, `{"a":"x\u0000y"}`), "payload", "NUL"},
		{"payload key with NUL", create("t", nil, `{"a\u0000":1}`), "payload", "NUL"},
		{"payload with invalid UTF-8", create("t", nil, "{\"a\":\"\xff\xfe\"}"), "payload", "UTF-8"},
		{"payload an array", create("t", nil, `[1,2]`), "payload", "must be a JSON object"},
		{"payload a string", create("t", nil, `"s"`), "payload", "must be a JSON object"},
		{"payload a number", create("t", nil, `12`), "payload", "must be a JSON object"},
		{"payload null", create("t", nil, `null`), "payload", "must be a JSON object"},
		{"payload two objects", create("t", nil, `{} {}`), "payload", ""},
		{"payload not JSON", create("t", nil, `{"a":`), "payload", "unexpected end of JSON"},
		{"payload not JSON inside", create("t", nil, `{"a":[1,}`), "payload", "not valid JSON"},
		{"empty title", create("", nil, ""), "title", "1-200 characters, got 0"},
		{"title of 201 characters", create(strings.Repeat("é", 201), nil, ""), "title", "got 201"},
		{"title with NUL", create("a\x00b", nil, ""), "title", "NUL"},
		{"summary of 2001 characters", create("t", str(strings.Repeat("s", 2001)), ""), "summary", "at most 2000 characters, got 2001"},
		{"patch payload over 64 KiB", patch(sized(model.MaxJSONBytes + 1)), "payload", "exceeds"},
		{"patch payload an array", patch(`[]`), "payload", "must be a JSON object"},
		{"feature input deeper than 16", feature(nested(17)), "input", "deeper than 16"},
		{"feature input with NUL", feature(`{"a":"\u0000"}`), "input", "NUL"},
		{"feature input an array", feature(`[]`), "input", "must be a JSON object"},
		// jsonb refuses what Go's decoder accepts: these must be rejected here, not by PostgreSQL.
		{"payload with a lone high surrogate", create("t", nil, `{"a":"\ud800"}`), "payload", "surrogate"},
		{"payload with a lone low surrogate", create("t", nil, `{"a":"x\udc00"}`), "payload", "surrogate"},
		{"payload key with a lone surrogate", create("t", nil, `{"\ud83dx":1}`), "payload", "surrogate"},
		{"payload with a number jsonb cannot hold (scale)", create("t", nil, `{"a":1e-16384}`), "payload", "number"},
		{"payload with a number jsonb cannot hold (weight)", create("t", nil, `{"a":1e131072}`), "payload", "number"},
		{"payload with a huge exponent", create("t", nil, `{"a":1e9999999999}`), "payload", "number"},
		{"feature input with a lone surrogate", feature(`{"a":"\udfff"}`), "input", "surrogate"},
		// Small requests that PostgreSQL would print (and every reader would receive) far larger.
		{"payload whose number prints past 64 KiB", create("t", nil, `{"a":1e70000}`), "payload", "exceeds the 65536-byte limit"},
		{"payload whose numbers print past 64 KiB together", create("t", nil, `{"a":[`+strings.TrimSuffix(strings.Repeat("1e1000,", 70), ",")+`]}`), "payload", "exceeds the 65536-byte limit"},
		{"payload whose tiny numbers print past 64 KiB", create("t", nil, `{"a":[1e-16383,1e-16383,1e-16383,1e-16383,1e-16383]}`), "payload", "exceeds"},
		{"feature input whose number prints past 64 KiB", feature(`{"n":9e131071}`), "input", "exceeds"},
	}
	for i, tc := range cases {
		for _, key := range []string{"", fmt.Sprintf("boundary-%d", i)} {
			err := tc.call(key)
			ae := requireCode(t, err, apperr.ValidationFailed)
			require.Equal(t, 422, ae.Status(), tc.name)
			require.True(t, strings.HasPrefix(ae.Message, tc.field+":") || strings.HasPrefix(ae.Message, tc.field+"."),
				"%s: the message names the field: %q", tc.name, ae.Message)
			require.Contains(t, ae.Message, tc.message, tc.name)
			for _, raw := range []string{"ERROR:", "SQLSTATE", "jsonb", "insert "} {
				if raw == "jsonb" && strings.Contains(ae.Message, "PostgreSQL jsonb") {
					continue // the NUL message explains itself
				}
				require.NotContains(t, err.Error(), raw, "%s: never a raw database error", tc.name)
			}
		}
	}
	require.Equal(t, before, b.counts(t), "nothing of a rejected request is written, reservation included")
}

func TestTheJSONBoundaryAcceptsEverythingUpToItsLimitsAndJSONBStoresIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for i, payload := range []string{
		sized(model.MaxJSONBytes),
		nested(model.MaxJSONDepth),
		`{"emoji":"\ud83d\ude00","escaped":"\\ud800 is text","uni":"ünïcödé","ctl":"\u0001\t\n"}`,
		`{"big":123456789012345678901234567890,"precise":3.14159265358979323846264338327950288,"tiny":1e-16383,"huge":1e40000,"neg":-0.0e5}`,
		`{"zero":0e99999999}`,
	} {
		res, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "ok-" + string(rune('a'+i)),
			Title: strings.Repeat("t", model.MaxTitleChars), Summary: str(strings.Repeat("ß", model.MaxSummaryChar)), Payload: json.RawMessage(payload)})
		require.NoError(t, err, "payload %d", i)
		require.Equal(t, idemtype.Executed, res.Outcome)
		// The stored revision restores through the integrity check.
		again, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "ok-" + string(rune('a'+i)),
			Title: strings.Repeat("t", model.MaxTitleChars), Summary: str(strings.Repeat("ß", model.MaxSummaryChar)), Payload: json.RawMessage(payload)})
		require.NoError(t, err, "replay of payload %d", i)
		require.Equal(t, idemtype.Replayed, again.Outcome)
		var same bool
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT $1::jsonb = $2::jsonb AND $1::jsonb = $3::jsonb`,
			string(res.Record.Payload), string(again.Record.Payload), payload).Scan(&same))
		require.True(t, same, "payload %d restores as the value that was written", i)
		require.LessOrEqual(t, storedSize(t, b, res.Record.ID), model.MaxJSONBytes, "payload %d as PostgreSQL prints it", i)
		require.Equal(t, storedSize(t, b, res.Record.ID), len(res.Record.Payload), "payload %d: the first response carries exactly what jsonb stored", i)
	}
}

func TestAFeatureKeepsEveryNumberOfThePayloadExactly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	payload := `{"id":12345678901234567890,"ratio":0.1000000000000000055511151231257827,"list":[9007199254740993,1e2]}`
	rec, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "nums", Title: "n", Payload: json.RawMessage(payload)})
	require.NoError(t, err)
	archived, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, FeatureID: "F01", Key: "nums-archive"})
	require.NoError(t, err)
	var stored string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT payload::text FROM record WHERE id = $1`, rec.Record.ID).Scan(&stored))
	require.Contains(t, stored, "12345678901234567890")
	require.Contains(t, stored, "0.1000000000000000055511151231257827")
	require.Contains(t, stored, "9007199254740993")
	require.Contains(t, stored, `"archived": true`)
	require.Contains(t, string(archived.Record.Payload), "12345678901234567890")
}

func TestARevisionNearTheSizeLimitStillRestoresAfterJSONBRendersIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// Compact input whose canonical form (jsonb's text: a space after every comma) is just under
	// 64 KiB, with room for F01's "archived": true. The limit is measured on that form, on the
	// way in and when the revision is read back, so what the boundary accepted always restores.
	n := (model.MaxJSONBytes - 64) / 3
	payload := `{"a":[` + strings.TrimSuffix(strings.Repeat("1,", n), ",") + `]}`
	in := model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "near-limit", Title: "t", Payload: json.RawMessage(payload)}
	first, err := b.k.Create(ctx, in)
	require.NoError(t, err)
	require.Greater(t, len(first.Record.Payload), model.MaxJSONBytes-64)
	require.LessOrEqual(t, len(first.Record.Payload), model.MaxJSONBytes)
	again, err := b.k.Create(ctx, in)
	require.NoError(t, err, "a revision the boundary accepted must restore")
	require.Equal(t, idemtype.Replayed, again.Outcome)
	requireSameRecord(t, first.Record, again.Record)
	_, err = b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: first.Record.ID, FeatureID: "F01", Key: "near-limit-f"})
	require.NoError(t, err)
	_, err = b.k.FindRevision(ctx, store.RevisionRef{Owner: "alice", Module: kernel.ModuleNote, RecordID: first.Record.ID, Revision: 2})
	require.NoError(t, err)
}

// PostgreSQL is the oracle: on these edge cases of numbers and escapes the boundary accepts
// exactly what jsonb stores within 64 KiB as it prints it back.
func TestTheJSONBoundaryAgreesWithPostgreSQLOnNumbersAndEscapes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	values := []string{
		`1e-16383`, `1e-16384`, `0.5e-16382`, `1.0e-16383`, `10e-16384`, `1e131071`, `1e131072`, `10e131070`, `9e131071`,
		`0.01e131073`, `0.01e131074`, `0e1073741822`, `0e1073741823`, `0e-1073741822`, `0e-16383`, `0e-16384`,
		`0.0e-16383`, `1E+5`, `-0`, `-0.0`, `1e0000000000000000001`, `1e-0000000000016384`, `123.456e-3`, `0.000001e-16377`,
		`"\ud800"`, `"\udc00"`, `"\ud83d\ude00"`, `"\ud83dx"`, `"\ud83d\u0041"`, `"\\ud800"`, `"\udbff\udfff"`,
		`"\ud800\ud800"`, `"\\\ud800"`, `"\u00e9"`, `"\uDBFF\uDFFF"`, `"\\\\ud800"`, `"\ud800\\udc00"`, `"x\"\udc00"`,
		`"\u0000"`, `"\u0001"`, `"\/"`,
		`1e65520`, `1e65526`, `-1e65528`, `-1e65529`, `1e65535`, `-0.000e-16380`, `-12.5e-16380`, `123e65500`, `0.0001e65530`,
		`"` + strings.Repeat("1", 20000) + `"`, "0." + strings.Repeat("1", 16383), "0." + strings.Repeat("1", 16384),
	}
	for _, v := range values {
		for _, doc := range []string{`{"v":` + v + `}`, `{"k":[` + v + `]}`} {
			accepted := model.CheckJSONObject("payload", []byte(doc)) == nil
			var printed string
			pgErr := b.db.Pool.QueryRow(ctx, `SELECT $1::text::jsonb::text`, doc).Scan(&printed)
			want := pgErr == nil && len(printed) <= model.MaxJSONBytes
			require.Equal(t, want, accepted, "%.60s: boundary accepted=%v, jsonb error=%v, printed %d bytes", doc, accepted, pgErr, len(printed))
		}
	}
}

// storedSize is the size of the record's payload as PostgreSQL prints it.
func storedSize(t *testing.T, b *testBundle, id string) int {
	t.Helper()
	var printed string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT payload::text FROM record WHERE id = $1`, id).Scan(&printed))
	return len(printed)
}
