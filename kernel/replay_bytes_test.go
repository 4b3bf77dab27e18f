package kernel_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
)

// withoutOutcome is a write result's JSON with outcome and waited blanked: what must be byte for
// byte the same between a first call and its replays.
func withoutOutcome(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{`"outcome":` + string(m["outcome"]), `"waited":` + string(m["waited"])} {
		b = []byte(strings.Replace(string(b), k, "", 1))
	}
	return string(b)
}

// SPEC §6: the first response is built from what is stored, so it and every replay carry the
// same bytes. Before, the first echoed the request's bytes and a replay returned jsonb's text.
func TestTheFirstResponseIsByteForByteWhatAReplayReturns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in := model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "bytes", Title: "t <&> é", Summary: str("two\nlines"),
		Payload: json.RawMessage(`{"zz":1e3, "a":[1.0, -0, 1.50e1], "nested":{"y":"\u00e9\/","x":null}, "b":"\u001f"}`)}
	first, err := b.k.Create(ctx, in)
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, first.Outcome)
	require.Equal(t, `{"a": [1.0, 0, 15.0], "b": "\u001f", "zz": 1000, "nested": {"x": null, "y": "é/"}}`, string(first.Record.Payload),
		"the first response carries the canonical form, not the request's bytes")
	var stored string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT payload::text FROM record WHERE id = $1`, first.Record.ID).Scan(&stored))
	require.Equal(t, stored, string(first.Record.Payload), "exactly what jsonb stored")
	var storedEnv string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT response::text FROM idempotency_record WHERE idempotency_key = 'bytes'`).Scan(&storedEnv))
	require.Equal(t, storedEnv, string(first.Envelope))

	replay, err := b.k.Create(ctx, in)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, replay.Outcome)
	require.Equal(t, withoutOutcome(t, first), withoutOutcome(t, replay))

	// The same request spelled differently (key order, spacing, 1000 for 1e3) is the same request.
	respelled := in
	respelled.Payload = json.RawMessage(`{"b":"\u001F","nested":{"x":null,"y":"é/"},"a":[1.0,0,15.0],"zz":1000}`)
	again, err := b.k.Create(ctx, respelled)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	require.Equal(t, withoutOutcome(t, first), withoutOutcome(t, again))

	// A feature run: its execution's input and output and the record it wrote, first and replay.
	fin := model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: first.Record.ID, FeatureID: "F01", Key: "bytes-f",
		Input: json.RawMessage(`{"why":"tidy","n":2E2}`)}
	f1, err := b.k.RunFeature(ctx, fin)
	require.NoError(t, err)
	require.Equal(t, `{"n": 200, "why": "tidy"}`, string(f1.Execution.Input))
	f2, err := b.k.RunFeature(ctx, fin)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, f2.Outcome)
	require.Equal(t, withoutOutcome(t, f1), withoutOutcome(t, f2))

	// A patch, and a review.
	pin := model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: first.Record.ID, Key: "bytes-p", ExpectRevision: 2,
		Payload: json.RawMessage(`{"k":[3,2,1]}`)}
	p1, err := b.k.Patch(ctx, pin)
	require.NoError(t, err)
	p2, err := b.k.Patch(ctx, pin)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, p2.Outcome)
	require.Equal(t, withoutOutcome(t, p1), withoutOutcome(t, p2))
	c := b.createCommitment(t, "alice", "bytes-c")
	rin := kernel.ReviewInput{Owner: "alice", RecordID: c.Record.ID, Key: "bytes-r", Verdict: "kept", Comment: "on time"}
	r1, err := b.k.CreateReview(ctx, rin)
	require.NoError(t, err)
	r2, err := b.k.CreateReview(ctx, rin)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, r2.Outcome)
	require.Equal(t, withoutOutcome(t, r1), withoutOutcome(t, r2))
}

func TestDuplicateNamesAndBadTextAreRefusedNamingTheField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	before := b.counts(t)
	create := func(title string, summary *string, payload string) error {
		var p json.RawMessage
		if payload != "" {
			p = json.RawMessage(payload)
		}
		_, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "bad", Title: title, Summary: summary, Payload: p})
		return err
	}
	for _, c := range []struct {
		name          string
		err           error
		field, reason string
	}{
		{"duplicate names", create("t", nil, `{"dup":1,"dup":2}`), "payload.dup:", "twice"},
		{"duplicate names deep inside", create("t", nil, `{"a":[{"b":{"c":1,"c":1}}]}`), "payload.a[0].b.c:", "twice"},
		{"a name spelled twice with an escape", create("t", nil, `{"a":1,"\u0061":1}`), "payload.a:", "twice"},
		{"invalid UTF-8 in the payload", create("t", nil, "{\"a\":{\"b\":\"\xc3\x28\"}}"), "payload.a.b:", "UTF-8"},
		{"invalid UTF-8 in a title", create("bad \xff title", nil, ""), "title:", "UTF-8"},
		{"an ESC in a title", create("\x1b[31mred\x1b[0m", nil, ""), "title:", "U+001B"},
		{"a newline in a title", create("two\nlines", nil, ""), "title:", "U+000A"},
		{"a tab in a title", create("a\tb", nil, ""), "title:", "U+0009"},
		{"a C1 control in a title", create("a\u0085b", nil, ""), "title:", "U+0085"},
		{"an ESC in a summary", create("t", str("ok\n\tthen \x1b[2J"), ""), "summary:", "U+001B"},
		{"a carriage return in a summary", create("t", str("a\rb"), ""), "summary:", "U+000D"},
	} {
		ae := requireCode(t, c.err, apperr.ValidationFailed)
		require.True(t, strings.HasPrefix(ae.Message, c.field), "%s: %q names %s", c.name, ae.Message, c.field)
		require.Contains(t, ae.Message, c.reason, c.name)
	}
	require.Equal(t, before, b.counts(t), "nothing was written")
	// Newline and tab are what a summary may hold.
	_, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "ok", Title: "t", Summary: str("a\n\tb")})
	require.NoError(t, err)
}

// A key written before fingerprints had versions carries a version 1 value; a retry of the same
// request is compared by version 1's rule (REPLAYED), another body is still a reuse.
func TestAVersion1FingerprintIsComparedByVersion1sRule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in := model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "old-key", Title: "hello"}
	first, err := b.k.Create(ctx, in)
	require.NoError(t, err)
	// What the runner stored for this request before versions (the v1 known answer of
	// {"title":"hello"} for NOTE:record:create).
	const v1 = "daea1c376ad273a617ef9d00be030da52d5a63e9922fd6c3d28f45037b0767ca"
	require.EqualValues(t, 1, b.exec(t, `UPDATE idempotency_record SET fingerprint = $1 WHERE idempotency_key = 'old-key'`, v1))
	again, err := b.k.Create(ctx, in)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	require.Equal(t, first.Record.ID, again.Record.ID)
	_, err = b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "old-key", Title: "bye"})
	requireCode(t, err, apperr.KeyReused)
	// A version this runner does not know fails closed rather than guessing.
	b.exec(t, `UPDATE idempotency_record SET fingerprint = 'v9:abc' WHERE idempotency_key = 'old-key'`)
	_, err = b.k.Create(ctx, in)
	requireCode(t, err, apperr.PolicyMismatch)
}

// One known answer per former fast path: the version 1 body each write built (createBody,
// featureBody, bodyJSON), fingerprinted by version 1's rule, gives the values stored rows hold.
func TestTheVersion1BodiesOfEveryWriteKeepTheirKnownFingerprints(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	note := b.createNote(t, "alice", "v1-base", "base")
	mem := b.createMem(t, "alice", "v1-mem", "some content")
	commitment := b.createCommitment(t, "alice", "v1-c")
	set := func(key, fp string) {
		b.exec(t, `UPDATE idempotency_record SET fingerprint = $1 WHERE idempotency_key = $2`, fp, key)
	}
	replay := func(run func() (idemtype.Outcome, error)) {
		t.Helper()
		out, err := run()
		require.NoError(t, err)
		require.Equal(t, idemtype.Replayed, out)
	}
	// A create with a payload (numbers as written, HTML characters): the v1 body was
	// {"payload":{"b":1e3,"a":[1.0,-0,"<&>"]},"summary":"line1\nline2","title":"n"}.
	cin := model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "v1-c1", Title: "n", Summary: str("line1\nline2"),
		Payload: json.RawMessage(` { "b" : 1e3, "a" : [1.0, -0, "<&>"] } `)}
	_, err := b.k.Create(ctx, cin)
	require.NoError(t, err)
	set("v1-c1", "47841a0378da75a3e7875cfd66b698e36d5919a4d78e92108a58d903c3066535")
	replay(func() (idemtype.Outcome, error) { r, err := b.k.Create(ctx, cin); return r.Outcome, err })

	// Feature runs without input ({}) and with one ({"input":{"b":2,"a":1}}), on a record whose id
	// the vectors name: the operation is part of the fingerprint, so recompute for this id.
	for _, c := range []struct {
		key   string
		input json.RawMessage
		body  string
	}{{"v1-f1", nil, `{}`}, {"v1-f2", json.RawMessage(`{"b":2, "a":1}`), `{"input":{"b":2,"a":1}}`}} {
		fin := model.FeatureInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: mem.Record.ID, FeatureID: "F02", Key: c.key, Input: c.input}
		_, err := b.k.RunFeature(ctx, fin)
		require.NoError(t, err)
		fp, err := idem.FingerprintV1(model.OpFeature(kernel.ModuleMem, mem.Record.ID, "F02"), []byte(c.body))
		require.NoError(t, err)
		set(c.key, fp)
		replay(func() (idemtype.Outcome, error) { r, err := b.k.RunFeature(ctx, fin); return r.Outcome, err })
	}
	pin := model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, Key: "v1-p", ExpectRevision: 1,
		Title: str("t2"), Payload: json.RawMessage(`{"k":[1,2]}`)}
	_, err = b.k.Patch(ctx, pin)
	require.NoError(t, err)
	fp, err := idem.FingerprintV1(model.OpPatch(kernel.ModuleNote, note.Record.ID), []byte(`{"expectRevision":1,"payload":{"k":[1,2]},"title":"t2"}`))
	require.NoError(t, err)
	set("v1-p", fp)
	replay(func() (idemtype.Outcome, error) { r, err := b.k.Patch(ctx, pin); return r.Outcome, err })
	rin := kernel.ReviewInput{Owner: "alice", RecordID: commitment.Record.ID, Key: "v1-r", Verdict: "kept", Comment: "done <on time>"}
	_, err = b.k.CreateReview(ctx, rin)
	require.NoError(t, err)
	fp, err = idem.FingerprintV1(kernel.OpReview(commitment.Record.ID), []byte(`{"comment":"done \u003con time\u003e","verdict":"kept"}`))
	require.NoError(t, err)
	set("v1-r", fp)
	replay(func() (idemtype.Outcome, error) { r, err := b.k.CreateReview(ctx, rin); return r.Outcome, err })
}
