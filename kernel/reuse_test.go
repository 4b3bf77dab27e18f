package kernel_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
)

// One request has one body whichever door it came through: the workbench's form sends an empty
// summary and the payload {}, the CLI without --summary and --payload sends neither, a storm
// sends the payload only; all are the same create, and each replays the others.
func TestACreatesDefaultsSpelledOrLeftOutAreOneRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	form := model.Fields{Kind: model.KindCreate, Owner: "alice", Module: kernel.ModuleNote, Key: "one-body", Title: str("form record"),
		Summary: str(""), Payload: str(`{}`)}.Request()
	first, err := b.k.Create(ctx, form.Create)
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, first.Outcome)
	for name, in := range map[string]model.CreateInput{
		"the CLI without --summary or --payload": model.NewCreate("alice", kernel.ModuleNote, "one-body", "form record", nil, nil),
		"the CLI with --summary '' --payload {}": model.NewCreate("alice", kernel.ModuleNote, "one-body", "form record", str(""), json.RawMessage(`{}`)),
		"a storm's body (payload only)":          {Owner: "alice", Module: kernel.ModuleNote, Key: "one-body", Title: "form record", Payload: json.RawMessage(` { } `)},
		"an HTTP body with \"summary\": null":    model.NewCreate("alice", kernel.ModuleNote, "one-body", "form record", nil, json.RawMessage(``)),
	} {
		res, err := b.k.Create(ctx, in)
		require.NoError(t, err, name)
		require.Equal(t, idemtype.Replayed, res.Outcome, name)
		require.Equal(t, first.Record.ID, res.Record.ID, name)
	}
	// A feature run's input {} is its default too.
	_, err = b.k.RunFeature(ctx, model.NewFeature("alice", kernel.ModuleNote, first.Record.ID, "F01", "archive", json.RawMessage(`{}`)))
	require.NoError(t, err)
	again, err := b.k.RunFeature(ctx, model.NewFeature("alice", kernel.ModuleNote, first.Record.ID, "F01", "archive", nil))
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	// A patch has no defaults: an empty summary clears it, which is another request.
	_, err = b.k.Patch(ctx, model.NewPatch("alice", kernel.ModuleNote, first.Record.ID, "patch", 2, nil, str(""), nil))
	require.NoError(t, err)
	_, err = b.k.Patch(ctx, model.NewPatch("alice", kernel.ModuleNote, first.Record.ID, "patch", 2, nil, nil, nil))
	requireCode(t, err, apperr.KeyReused)
}

// A key stored before defaults were left out holds the fingerprint of the body as it was
// spelled; a retry spelled the same way still replays (EarlierBody), another spelling of the
// same request is reuse as it was then.
func TestAKeyStoredWithADefaultSpelledStillReplaysAcrossTheUpgrade(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in := model.NewCreate("alice", kernel.ModuleNote, "old-spelling", "t", str(""), json.RawMessage(`{}`))
	first, err := b.k.Create(ctx, in)
	require.NoError(t, err)
	asSent := model.CreateBodyAsSent("t", str(""), json.RawMessage(`{}`))
	require.JSONEq(t, `{"title":"t","summary":"","payload":{}}`, string(asSent))
	b.exec(t, `UPDATE idempotency_record SET fingerprint = $1 WHERE idempotency_key = 'old-spelling'`,
		idem.Fingerprint(model.OpCreate(kernel.ModuleNote), asSent))
	again, err := b.k.Create(ctx, in)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	require.Equal(t, first.Record.ID, again.Record.ID)
	_, err = b.k.Create(ctx, model.NewCreate("alice", kernel.ModuleNote, "old-spelling", "t", nil, nil))
	ae := requireCode(t, err, apperr.KeyReused)
	require.Contains(t, ae.Message, "spelled a default differently")
}

// On IDEMPOTENCY_KEY_REUSED the message names the fields that differ from the key's first
// request, rebuilt from the key's rows — never their stored values.
func TestKeyReuseNamesTheFieldsThatDifferWithoutShowingStoredBodies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first, err := b.k.Create(ctx, model.NewCreate("alice", kernel.ModuleNote, "reuse", "secret title",
		nil, json.RawMessage(`{"text":"secret text","n":1}`)))
	require.NoError(t, err)
	_, err = b.k.Create(ctx, model.NewCreate("alice", kernel.ModuleNote, "reuse", "other", str("new"), json.RawMessage(`{"text":"other","n":1}`)))
	ae := requireCode(t, err, apperr.KeyReused)
	require.Contains(t, ae.Message, "a retry must send the same body")
	require.Contains(t, ae.Message, "differs from the key's first request in title, summary, payload (at payload.text)")
	require.NotContains(t, ae.Message, "secret")

	id := first.Record.ID
	_, err = b.k.Patch(ctx, model.NewPatch("alice", kernel.ModuleNote, id, "p", 1, str("patched"), nil, nil))
	require.NoError(t, err)
	rep, err := b.k.ExplainKeyReuse(ctx, model.WriteRequest{Kind: model.KindPatch,
		Patch: model.NewPatch("alice", kernel.ModuleNote, id, "p", 2, str("patched"), nil, json.RawMessage(`{"x":1}`))})
	require.NoError(t, err)
	require.True(t, rep.Rebuilt, rep.Unknown)
	require.Equal(t, []model.FieldDiff{{Name: "expectRevision", Detail: "first 1, now 2"}, {Name: "payload", Detail: "the first request left it out"}}, rep.Fields)
	// A patch setting the title to the value it already had and one leaving it out leave the same
	// rows: the stored fingerprint tells which it was.
	_, err = b.k.Patch(ctx, model.NewPatch("alice", kernel.ModuleNote, id, "same-title", 2, str("patched"), nil, nil))
	require.NoError(t, err)
	rep, err = b.k.ExplainKeyReuse(ctx, model.WriteRequest{Kind: model.KindPatch,
		Patch: model.NewPatch("alice", kernel.ModuleNote, id, "same-title", 2, nil, nil, nil)})
	require.NoError(t, err)
	require.Equal(t, []model.FieldDiff{{Name: "title", Detail: "the first request set it; this one leaves it out"}}, rep.Fields)

	_, err = b.k.RunFeature(ctx, model.NewFeature("alice", kernel.ModuleNote, id, "F01", "run", json.RawMessage(`{"why":"x"}`)))
	require.NoError(t, err)
	_, err = b.k.RunFeature(ctx, model.NewFeature("alice", kernel.ModuleNote, id, "F01", "run", nil))
	ae = requireCode(t, err, apperr.KeyReused)
	require.Contains(t, ae.Message, "input (at input.why)")

	// A key whose rows no longer describe it says so instead of guessing.
	b.exec(t, `UPDATE idempotency_record SET fingerprint = $1 WHERE idempotency_key = 'reuse'`, idem.Fingerprint("x", []byte("{}")))
	_, err = b.k.Create(ctx, model.NewCreate("alice", kernel.ModuleNote, "reuse", "other", nil, nil))
	ae = requireCode(t, err, apperr.KeyReused)
	require.Contains(t, ae.Message, "cannot be rebuilt to compare: no request its rows describe has the stored fingerprint")
}
