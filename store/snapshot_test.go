package store_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/jsonb"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// A revision's snapshot is the JSON value json.Marshal writes of the record (what it was written
// with before AppendSnapshot): through jsonb's canonical text — what the column keeps — the same
// bytes, for hostile texts, payloads and times; and where json.Marshal fails, AppendSnapshot fails.
func TestASnapshotIsTheValueJSONMarshalWrites(t *testing.T) {
	t.Parallel()
	utc := time.Date(2026, 12, 1, 14, 54, 18, 123456789, time.UTC)
	texts := []string{"", "bench note", "<&> \u2028\u2029 é😀", "q\"b\\s/", "ctl \x01\x08\x0c\x1f\x7f\n\r\t", "\xff\xfe", "nul \x00", strings.Repeat("long ", 400)}
	payloads := []json.RawMessage{nil, json.RawMessage(`{}`), json.RawMessage(`{"text": "<b>", "n": 12345678901234567890, "f": 1.50, "a": [1, {"x": null}]}`),
		json.RawMessage(` { "spaced" : true } `), json.RawMessage(`{"bad": }`), json.RawMessage(`[1,2]`), json.RawMessage(`{"s": "\u0000"}`)}
	times := []time.Time{utc, utc.Truncate(time.Microsecond), utc.Truncate(time.Second), utc.In(time.FixedZone("", 5*3600+1800)),
		utc.In(time.FixedZone("", -(9*3600 + 30*60 + 15))), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		utc.In(time.FixedZone("", 24*3600)), {}}
	var recs []model.Record
	for i, s := range texts {
		recs = append(recs, model.Record{ID: "01JZ" + s, OwnerID: s, ModuleCode: "NOTE", Revision: i * 7919, Title: s, Summary: s + s,
			Payload: json.RawMessage(`{}`), CreatedAt: utc, UpdatedAt: utc})
	}
	for i, p := range payloads {
		recs = append(recs, model.Record{ID: "r", OwnerID: "o", ModuleCode: "MEM-001", Revision: -i, Title: "t", Payload: p, CreatedAt: utc, UpdatedAt: utc})
	}
	for _, tm := range times {
		recs = append(recs, model.Record{ID: "r", OwnerID: "o", ModuleCode: "M", Revision: 2, Payload: json.RawMessage(`{}`), CreatedAt: utc, UpdatedAt: tm},
			model.Record{ID: "r", OwnerID: "o", ModuleCode: "M", Revision: 2, Payload: json.RawMessage(`{}`), CreatedAt: tm, UpdatedAt: utc})
	}
	for _, r := range recs {
		want, wantErr := json.Marshal(r)
		got, gotErr := store.AppendSnapshot([]byte("kept"), r)
		require.True(t, strings.HasPrefix(string(got), "kept"), "appends")
		got = got[len("kept"):]
		if wantErr != nil {
			require.Error(t, gotErr, "%+v", r)
			continue
		}
		require.NoError(t, gotErr, "%+v", r)
		wantCanon, wantCanonErr := jsonb.Canonical(want, jsonb.Limits{})
		gotCanon, gotCanonErr := jsonb.Canonical(got, jsonb.Limits{})
		require.Equal(t, wantCanonErr, gotCanonErr, "%+v", r)
		require.Equal(t, string(wantCanon), string(gotCanon), "%+v", r)
	}
	// Texts without HTML characters and a compact payload: json.Marshal's very bytes (otherwise
	// json.Marshal also escapes <, > and & and compacts the payload, which jsonb undoes).
	r := model.Record{ID: "01JZ3W9Q8X4T6V2N1M0K7H5G3F", OwnerID: "bench", ModuleCode: "NOTE", Revision: 1, Title: "bench \"note\"\t",
		Payload: json.RawMessage(`{"tags":["home","todo"],"text":"call the plumber about the kitchen tap","priority":2}`), CreatedAt: utc, UpdatedAt: utc}
	want, err := json.Marshal(r)
	require.NoError(t, err)
	got, err := store.AppendSnapshot(nil, r)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}
