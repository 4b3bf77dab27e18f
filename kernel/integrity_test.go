package kernel_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

func TestAKeyBoundToAnotherOperationIsAScopeConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	note := b.createNote(t, "alice", "scoped", "n")
	before := b.counts(t)
	for name, call := range map[string]func() error{
		"create in another module": func() error {
			_, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleCommitment, Key: "scoped", Title: "n",
				Payload: raw(map[string]any{"status": "OPEN"})})
			return err
		},
		"patch": func() error {
			_, err := b.k.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, Key: "scoped", ExpectRevision: 1, Title: str("x")})
			return err
		},
		"feature": func() error {
			_, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, FeatureID: "F01", Key: "scoped"})
			return err
		},
	} {
		ae := requireCode(t, call(), apperr.ScopeConflict)
		require.Equal(t, 409, ae.Status(), name)
		require.Contains(t, ae.Message, "NOTE:record:create", name)
	}
	require.Equal(t, before, b.counts(t))
}

func TestTheSameKeyAndOperationWithAnotherBodyIsKeyReuse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.createNote(t, "alice", "reuse", "original")
	before := b.counts(t)
	_, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "reuse", Title: "different",
		Payload: raw(map[string]any{"text": "original"})})
	ae := requireCode(t, err, apperr.KeyReused)
	require.Equal(t, 422, ae.Status())
	// The same body in another key order and spacing is the same request.
	res, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "reuse", Title: "original",
		Payload: json.RawMessage(" {\n \"text\" : \"original\" } ")})
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, res.Outcome)
	require.Equal(t, before, b.counts(t))
}

func TestALeftoverProcessingRowCommittedBySomeoneElseIsInProgressAndNeverExecuted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	now := b.clock.Now()
	b.exec(t, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, created_at, expires_at, updated_at)
		VALUES ('alice', 'stuck', 'NOTE:record:create', 'whatever', 'PROCESSING', $1, $2, $1)`, now, now.Add(time.Hour))
	before := b.counts(t)
	for i := 0; i < 2; i++ {
		_, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "stuck", Title: "t"})
		ae := requireCode(t, err, apperr.InProgress)
		require.Equal(t, 409, ae.Status())
	}
	require.Equal(t, before, b.counts(t), "a leftover PROCESSING is never treated as success and never re-executed")

	// Once it expires, the key is free.
	b.clock.Advance(time.Hour + time.Second)
	res, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "stuck", Title: "t"})
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, res.Outcome)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM idempotency_record WHERE idempotency_key = 'stuck' AND status = 'SUCCEEDED'`))
}

func TestAnExpiredKeyIsDeletedAndExecutedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first := b.createNote(t, "alice", "ttl", "once")
	b.clock.Advance(idem.DefaultTTL - time.Minute)
	again := b.createNote(t, "alice", "ttl", "once")
	require.Equal(t, idemtype.Replayed, again.Outcome, "still valid just before the TTL")

	b.clock.Advance(2 * time.Minute)
	later, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "ttl", Title: "once",
		Payload: raw(map[string]any{"text": "once"})})
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, later.Outcome)
	require.NotEqual(t, first.Record.ID, later.Record.ID)
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM record`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM idempotency_record WHERE idempotency_key = 'ttl'`), "the expired row was replaced")
	var expires time.Time
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT expires_at FROM idempotency_record WHERE idempotency_key = 'ttl'`).Scan(&expires))
	require.WithinDuration(t, b.clock.Now().Add(idem.DefaultTTL), expires, time.Minute)

	// An expired key bound to another operation is free for it too (no scope conflict).
	b.clock.Advance(idem.DefaultTTL + time.Minute)
	mem, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleMem, Key: "ttl", Title: "m",
		Payload: raw(map[string]any{"originalContent": "a", "currentContent": "a"})})
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, mem.Outcome)
}

func TestAReplayNeverExtendsExpiresAt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.createNote(t, "alice", "fixed", "f")
	read := func() (time.Time, time.Time) {
		var exp, upd time.Time
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT expires_at, updated_at FROM idempotency_record WHERE idempotency_key = 'fixed'`).Scan(&exp, &upd))
		return exp, upd
	}
	exp0, upd0 := read()
	for i := 0; i < 3; i++ {
		b.clock.Advance(3 * time.Hour)
		res := b.createNote(t, "alice", "fixed", "f")
		require.Equal(t, idemtype.Replayed, res.Outcome)
		exp, upd := read()
		require.True(t, exp0.Equal(exp), "expires_at moved from %s to %s", exp0, exp)
		require.True(t, upd0.Equal(upd), "a replay writes nothing")
	}
}

func TestATamperedPolicyNameFailsClosedWithPolicyMismatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rec := b.createNote(t, "alice", "pol", "p")
	_, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, FeatureID: "F01", Key: "pol-f"})
	require.NoError(t, err)
	for _, tampered := range []string{"record-snapshot-reference-v2", kernel.PolicyFeatureExecution, idemtype.LegacyPolicy, ""} {
		b.exec(t, `UPDATE idempotency_record SET response = jsonb_set(response, '{policy}', to_jsonb($1::text)) WHERE idempotency_key = 'pol'`, tampered)
		before := b.counts(t)
		_, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "pol", Title: "p", Payload: raw(map[string]any{"text": "p"})})
		if tampered == "" {
			requireCode(t, err, apperr.SnapshotIntegrity) // no policy at all is not an envelope
		} else {
			ae := requireCode(t, err, apperr.PolicyMismatch)
			require.Equal(t, 500, ae.Status(), tampered)
		}
		require.Equal(t, before, b.counts(t), "failing closed writes nothing")
	}
	// The feature policy name on a record operation is rejected the other way round too.
	b.exec(t, `UPDATE idempotency_record SET response = jsonb_set(response, '{policy}', '"record-snapshot-reference-v1"') WHERE idempotency_key = 'pol-f'`)
	_, err = b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, FeatureID: "F01", Key: "pol-f"})
	requireCode(t, err, apperr.PolicyMismatch)
}

func TestATamperedSnapshotFailsClosedWithSnapshotIntegrityViolation(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"ownerId":           `jsonb_set(snapshot, '{ownerId}', '"mallory"')`,
		"moduleCode":        `jsonb_set(snapshot, '{moduleCode}', '"MEM-001"')`,
		"id":                `jsonb_set(snapshot, '{id}', '"01OTHERRECORD"')`,
		"revision":          `jsonb_set(snapshot, '{revision}', '2')`,
		"payload array":     `jsonb_set(snapshot, '{payload}', '[1,2]')`,
		"payload missing":   `snapshot - 'payload'`,
		"unknown field":     `snapshot || '{"secret":"x"}'`,
		"not an object":     `'"just a string"'::jsonb`,
		"payload too deep":  `jsonb_set(snapshot, '{payload}', '{"a":[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}')`,
		"revision a string": `jsonb_set(snapshot, '{revision}', '"1"')`,
	}
	for name, expr := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			rec := b.createNote(t, "alice", "snap", "s")
			require.EqualValues(t, 1, b.exec(t, `UPDATE record_revision SET snapshot = `+expr+` WHERE record_id = $1 AND revision = 1`, rec.Record.ID))
			_, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "snap", Title: "s", Payload: raw(map[string]any{"text": "s"})})
			ae := requireCode(t, err, apperr.SnapshotIntegrity)
			require.Equal(t, 500, ae.Status())
			_, err = b.k.FindRevision(ctx, store.RevisionRef{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, Revision: 1})
			requireCode(t, err, apperr.SnapshotIntegrity)
		})
	}
}

func TestRestoreCannotCrossOwnersOrModulesAndFailsClosed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	aliceNote := b.createNote(t, "alice", "a-note", "alice")
	aliceMem := b.createMem(t, "alice", "a-mem", "alice mem")
	bobNote := b.createNote(t, "bob", "b-note", "bob")
	feat, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: aliceNote.Record.ID, FeatureID: "F01", Key: "a-feat"})
	require.NoError(t, err)
	bobFeat, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: "bob", Module: kernel.ModuleNote, RecordID: bobNote.Record.ID, FeatureID: "F01", Key: "b-feat"})
	require.NoError(t, err)
	aliceC := b.createCommitment(t, "alice", "a-c")
	bobC := b.createCommitment(t, "bob", "b-c")
	_, err = b.k.CreateReview(ctx, kernel.ReviewInput{Owner: "alice", RecordID: aliceC.Record.ID, Key: "a-review", Verdict: "kept", Comment: "mine"})
	require.NoError(t, err)
	bobReview, err := b.k.CreateReview(ctx, kernel.ReviewInput{Owner: "bob", RecordID: bobC.Record.ID, Key: "b-review", Verdict: "missed", Comment: "bob's private comment"})
	require.NoError(t, err)

	setResult := func(key, result string) {
		require.EqualValues(t, 1, b.exec(t, `UPDATE idempotency_record SET response = jsonb_set(response, '{result}', $1::jsonb)
			WHERE owner_id = 'alice' AND idempotency_key = $2`, result, key))
	}
	replayNote := func() error {
		_, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "a-note", Title: "alice", Payload: raw(map[string]any{"text": "alice"})})
		return err
	}
	replayFeat := func() error {
		_, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: aliceNote.Record.ID, FeatureID: "F01", Key: "a-feat"})
		return err
	}
	replayReview := func() error {
		_, err := b.k.CreateReview(ctx, kernel.ReviewInput{Owner: "alice", RecordID: aliceC.Record.ID, Key: "a-review", Verdict: "kept", Comment: "mine"})
		return err
	}

	// alice's create envelope pointing at bob's record: restore reads inside alice only.
	setResult("a-note", `{"recordId":"`+bobNote.Record.ID+`","revision":1}`)
	requireCode(t, replayNote(), apperr.SnapshotIntegrity)
	// ... or at alice's own MEM-001 record through the NOTE route.
	setResult("a-note", `{"recordId":"`+aliceMem.Record.ID+`","revision":1}`)
	requireCode(t, replayNote(), apperr.SnapshotIntegrity)
	// ... or at a revision that does not exist.
	setResult("a-note", `{"recordId":"`+aliceNote.Record.ID+`","revision":9}`)
	requireCode(t, replayNote(), apperr.SnapshotIntegrity)

	// alice's feature envelope pointing at bob's execution (with alice's record).
	setResult("a-feat", `{"recordId":"`+aliceNote.Record.ID+`","revision":2,"executionId":"`+bobFeat.Execution.ID+`"}`)
	requireCode(t, replayFeat(), apperr.SnapshotIntegrity)
	// ... or at bob's record and execution together.
	setResult("a-feat", `{"recordId":"`+bobNote.Record.ID+`","revision":2,"executionId":"`+bobFeat.Execution.ID+`"}`)
	requireCode(t, replayFeat(), apperr.SnapshotIntegrity)
	// the untampered reference still works after restoring it
	setResult("a-feat", `{"recordId":"`+aliceNote.Record.ID+`","revision":2,"executionId":"`+feat.Execution.ID+`"}`)
	require.NoError(t, replayFeat())

	// alice's review envelope pointing at bob's review.
	setResult("a-review", `{"recordId":"`+bobC.Record.ID+`","reviewId":"`+bobReview.Review.ID+`"}`)
	err = replayReview()
	requireCode(t, err, apperr.SnapshotIntegrity)
	require.NotContains(t, err.Error(), "bob's private comment")
}

func TestAStoredEnvelopeWithAnyForbiddenFieldFailsClosedOnReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rec := b.createNote(t, "alice", "guarded", "g")
	pristine := b.rawResponse(t, "alice", "guarded")
	replay := func() error {
		_, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "guarded", Title: "g", Payload: raw(map[string]any{"text": "g"})})
		return err
	}
	require.NoError(t, replay())
	for _, field := range forbiddenFields {
		for _, where := range []string{"result", "top level"} {
			t.Run(field+" in "+where, func(t *testing.T) {
				env := map[string]json.RawMessage{}
				for k, v := range pristine {
					env[k] = v
				}
				if where == "result" {
					env["result"] = raw(map[string]any{"recordId": rec.Record.ID, "revision": 1, field: "leak"})
				} else {
					env[field] = raw("leak")
				}
				b.exec(t, `UPDATE idempotency_record SET response = $1 WHERE idempotency_key = 'guarded'`, raw(env))
				err := replay()
				requireCode(t, err, apperr.SnapshotIntegrity)
				require.Contains(t, err.Error(), field)
			})
		}
	}
	b.exec(t, `UPDATE idempotency_record SET response = $1 WHERE idempotency_key = 'guarded'`, raw(pristine))
	require.NoError(t, replay(), "the pristine envelope restores again: the failures above came from the fields")
}

// forbiddenFields are the things SPEC §5 says never enter an envelope.
var forbiddenFields = []string{"title", "summary", "payload", "snapshot", "input", "output", "originalContent", "currentContent",
	"cookie", "token", "authorization", "connectionString", "providerResponse", "privateKey",
	// the same secrets under other spellings: the guard is a whitelist, not a blacklist
	"Authorization", "set-cookie", "accessToken", "password", "dsn", "connection_string", "provider_response", "private_key"}

func TestAChangedModuleRuleAndABodyThatNoLongerValidatesStillReplayTheFirstResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	content := strings.Repeat("x", 100)
	in := model.CreateInput{Owner: "alice", Module: kernel.ModuleMem, Key: "rule", Title: "memo",
		Payload: raw(map[string]any{"originalContent": content, "currentContent": content})}
	first, err := b.k.Create(ctx, in)
	require.NoError(t, err)
	featIn := model.FeatureInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: first.Record.ID, FeatureID: "F01", Key: "rule-f"}
	firstF, err := b.k.RunFeature(ctx, featIn)
	require.NoError(t, err)

	b.k.Registry.Rules.SetMemMaxContentLength(10)
	// A new request with the same body fails the changed rule ...
	_, err = b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleMem, Key: "rule-new", Title: "memo", Payload: in.Payload})
	ae := requireCode(t, err, apperr.ValidationFailed)
	require.Contains(t, ae.Message, "max_content_length")
	_, err = b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: first.Record.ID, FeatureID: "F01", Key: "rule-f-new"})
	requireCode(t, err, apperr.ValidationFailed)
	// ... but the replays return the first results untouched by it.
	b.seen.reset()
	again, err := b.k.Create(ctx, in)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	requireSameRecord(t, first.Record, again.Record)
	againF, err := b.k.RunFeature(ctx, featIn)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, againF.Outcome)
	requireSameExecution(t, firstF.Execution, againF.Execution)
	require.Zero(t, b.seen.get("module-rules"))
}

func TestABodyThatNoLongerValidatesStillReplaysTheFirstResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// The first request was valid when it ran; the same body is invalid today because the
	// record it patched has moved on (expectRevision is stale).
	rec := b.createNote(t, "alice", "base", "base")
	in := model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, Key: "stale-body", ExpectRevision: 1, Title: str("v2")}
	first, err := b.k.Patch(ctx, in)
	require.NoError(t, err)
	_, err = b.k.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, ExpectRevision: 2, Title: str("v3")})
	require.NoError(t, err)
	fresh := in
	fresh.Key = "stale-body-new"
	_, err = b.k.Patch(ctx, fresh)
	requireCode(t, err, apperr.RevisionConflict)

	again, err := b.k.Patch(ctx, in)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	requireSameRecord(t, first.Record, again.Record)
	require.Equal(t, 2, again.Record.Revision)

	// The same holds for a COMMITMENT close whose record is no longer OPEN.
	c := b.createCommitment(t, "alice", "c")
	closeIn := model.FeatureInput{Owner: "alice", Module: kernel.ModuleCommitment, RecordID: c.Record.ID, FeatureID: "F01", Key: "close"}
	closed, err := b.k.RunFeature(ctx, closeIn)
	require.NoError(t, err)
	_, err = b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleCommitment, RecordID: c.Record.ID, FeatureID: "F01", Key: "close-again"})
	requireCode(t, err, apperr.ValidationFailed)
	replayed, err := b.k.RunFeature(ctx, closeIn)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, replayed.Outcome)
	requireSameExecution(t, closed.Execution, replayed.Execution)
}
