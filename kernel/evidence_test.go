package kernel_test

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// The evidence of SPEC §11, one test per sentence.

// requireSameRecord compares two records field by field; payloads compare as JSON because the
// first result carries the request's bytes and a restore carries jsonb's rendering of them.
func requireSameRecord(t *testing.T, want, got *model.Record) {
	t.Helper()
	require.NotNil(t, got)
	require.Equal(t, want.ID, got.ID)
	require.Equal(t, want.OwnerID, got.OwnerID)
	require.Equal(t, want.ModuleCode, got.ModuleCode)
	require.Equal(t, want.Revision, got.Revision)
	require.Equal(t, want.Title, got.Title)
	require.Equal(t, want.Summary, got.Summary)
	require.JSONEq(t, string(want.Payload), string(got.Payload))
	require.True(t, want.CreatedAt.Equal(got.CreatedAt), "createdAt %s vs %s", want.CreatedAt, got.CreatedAt)
	require.True(t, want.UpdatedAt.Equal(got.UpdatedAt), "updatedAt %s vs %s", want.UpdatedAt, got.UpdatedAt)
}

func requireSameExecution(t *testing.T, want, got *model.Execution) {
	t.Helper()
	require.NotNil(t, got)
	require.Equal(t, want.ID, got.ID)
	require.Equal(t, want.OwnerID, got.OwnerID)
	require.Equal(t, want.ModuleCode, got.ModuleCode)
	require.Equal(t, want.RecordID, got.RecordID)
	require.Equal(t, want.FeatureID, got.FeatureID)
	require.Equal(t, want.Mode, got.Mode)
	require.Equal(t, want.Status, got.Status)
	require.Equal(t, want.RecordRevision, got.RecordRevision)
	require.JSONEq(t, string(want.Input), string(got.Input))
	require.JSONEq(t, string(want.Output), string(got.Output))
	require.Equal(t, want.IdempotencyKey, got.IdempotencyKey)
	require.True(t, want.CreatedAt.Equal(got.CreatedAt))
}

func TestEnvelopesHoldMinimalReferencesUnderTheirPolicyNamesAndRestoreExactly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	created := b.createNote(t, "alice", "env-create", "first")
	patched, err := b.k.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: created.Record.ID,
		Key: "env-patch", ExpectRevision: 1, Title: str("second")})
	require.NoError(t, err)
	feature, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: created.Record.ID,
		FeatureID: "F01", Key: "env-feature"})
	require.NoError(t, err)
	commitment := b.createCommitment(t, "alice", "env-commitment")
	review, err := b.k.CreateReview(ctx, kernel.ReviewInput{Owner: "alice", RecordID: commitment.Record.ID, Key: "env-review",
		Verdict: "kept", Comment: "kept it"})
	require.NoError(t, err)

	for _, c := range []struct {
		key    string
		policy string
		fields []string
	}{
		{"env-create", kernel.PolicyRecordSnapshot, []string{"recordId", "revision"}},
		{"env-patch", kernel.PolicyRecordSnapshot, []string{"recordId", "revision"}},
		{"env-feature", kernel.PolicyFeatureExecution, []string{"executionId", "recordId", "revision"}},
		{"env-review", kernel.PolicyCommitmentReview, []string{"recordId", "reviewId"}},
	} {
		require.Equal(t, []string{"policy", "result", "schemaVersion"}, b.topKeys(t, "alice", c.key), c.key)
		require.Equal(t, c.fields, b.resultKeys(t, "alice", c.key), c.key)
		env := b.rawResponse(t, "alice", c.key)
		require.JSONEq(t, `"`+c.policy+`"`, string(env["policy"]), c.key)
		require.JSONEq(t, `1`, string(env["schemaVersion"]), c.key)
	}
	require.JSONEq(t, `{"recordId":"`+created.Record.ID+`","revision":1}`, string(b.rawResponse(t, "alice", "env-create")["result"]))
	require.JSONEq(t, `{"recordId":"`+created.Record.ID+`","revision":2}`, string(b.rawResponse(t, "alice", "env-patch")["result"]))
	require.JSONEq(t, `{"recordId":"`+created.Record.ID+`","revision":3,"executionId":"`+feature.Execution.ID+`"}`,
		string(b.rawResponse(t, "alice", "env-feature")["result"]))
	require.JSONEq(t, `{"recordId":"`+commitment.Record.ID+`","reviewId":"`+review.Review.ID+`"}`,
		string(b.rawResponse(t, "alice", "env-review")["result"]))

	// Each replay restores exactly what the first call returned.
	again, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "env-create", Title: "first",
		Payload: raw(map[string]any{"text": "first"})})
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	requireSameRecord(t, created.Record, again.Record)
	require.JSONEq(t, string(created.Envelope), string(again.Envelope))

	again, err = b.k.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: created.Record.ID,
		Key: "env-patch", ExpectRevision: 1, Title: str("second")})
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	requireSameRecord(t, patched.Record, again.Record)

	againF, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: created.Record.ID,
		FeatureID: "F01", Key: "env-feature"})
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, againF.Outcome)
	requireSameRecord(t, feature.Record, againF.Record)
	requireSameExecution(t, feature.Execution, againF.Execution)

	againR, err := b.k.CreateReview(ctx, kernel.ReviewInput{Owner: "alice", RecordID: commitment.Record.ID, Key: "env-review",
		Verdict: "kept", Comment: "kept it"})
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, againR.Outcome)
	require.Equal(t, review.Review.ID, againR.Review.ID)
	require.Equal(t, review.Review.Comment, againR.Review.Comment)
	require.Equal(t, review.Review.RecordRevision, againR.Review.RecordRevision)
}

func TestACacheHitSkipsCurrentStateAndModuleRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	created := b.createMem(t, "alice", "hit-create", "hello world")
	require.Equal(t, 1, b.seen.get("prepare"))
	require.Equal(t, 1, b.seen.get("module-rules"))
	patchIn := model.PatchInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: created.Record.ID, Key: "hit-patch", ExpectRevision: 1,
		Payload: raw(map[string]any{"originalContent": "hello world", "currentContent": "hello   there"})}
	_, err := b.k.Patch(ctx, patchIn)
	require.NoError(t, err)
	featIn := model.FeatureInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: created.Record.ID, FeatureID: "F01", Key: "hit-feature"}
	_, err = b.k.RunFeature(ctx, featIn)
	require.NoError(t, err)
	require.Equal(t, 3, b.seen.get("prepare"), "each miss runs prepare once")
	require.Equal(t, 2, b.seen.get("read-current"), "patch and feature read the current record on a miss")
	require.Equal(t, 3, b.seen.get("module-rules"))

	before := b.counts(t)
	b.seen.reset()
	var checkpoints []string
	fk := b.k.WithFaults(func(_ context.Context, step string) error { checkpoints = append(checkpoints, step); return nil })
	res, err := fk.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleMem, Key: "hit-create", Title: "memo",
		Payload: raw(map[string]any{"originalContent": "hello world", "currentContent": "hello world"})})
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, res.Outcome)
	pres, err := fk.Patch(ctx, patchIn)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, pres.Outcome)
	fres, err := fk.RunFeature(ctx, featIn)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, fres.Outcome)

	require.Zero(t, b.seen.total(), "a hit runs no prepare, reads no current record, applies no module rule: %v", b.seen.order)
	require.Empty(t, checkpoints, "a hit reaches no step of the commit unit")
	require.Equal(t, before, b.counts(t), "a hit writes nothing and audits nothing")
}

func TestAMissKeepsTheSideEffectOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	note := b.createNote(t, "alice", "order-note", "n")
	commitment := b.createCommitment(t, "alice", "order-commitment")

	var log []string
	b.seen.reset()
	// The kernel's Observe and the fault checkpoints write into one log, in the order they happen.
	k := kernel.New(b.db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{Observe: func(s string) { log = append(log, "observe:"+s) },
		Runner: idem.Options{Clock: b.clock}}).WithFaults(func(_ context.Context, step string) error { log = append(log, step); return nil })
	fctx := ctx

	cases := []struct {
		name string
		run  func() error
		want []string
	}{
		{"create", func() error {
			_, err := k.Create(fctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "o-create", Title: "t"})
			return err
		}, []string{kernel.StepReserved, "observe:prepare", "observe:module-rules", kernel.StepRecord, kernel.StepRevision, kernel.StepAudit, kernel.StepSucceeded}},
		{"patch", func() error {
			_, err := k.Patch(fctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, Key: "o-patch", ExpectRevision: 1, Title: str("t2")})
			return err
		}, []string{kernel.StepReserved, "observe:prepare", "observe:read-current", "observe:module-rules", kernel.StepRecord, kernel.StepRevision, kernel.StepAudit, kernel.StepSucceeded}},
		{"internal feature", func() error {
			_, err := k.RunFeature(fctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, FeatureID: "F01", Key: "o-feature"})
			return err
		}, []string{kernel.StepReserved, "observe:prepare", "observe:read-current", "observe:module-rules", kernel.StepRecord, kernel.StepRevision, kernel.StepExecution, kernel.StepAudit, kernel.StepSucceeded}},
		{"outbox feature", func() error {
			_, err := k.RunFeature(fctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleCommitment, RecordID: commitment.Record.ID, FeatureID: "F02", Key: "o-outbox"})
			return err
		}, []string{kernel.StepReserved, "observe:prepare", "observe:read-current", kernel.StepExecution, kernel.StepAudit, kernel.StepSucceeded}},
	}
	for _, c := range cases {
		log = nil
		require.NoError(t, c.run(), c.name)
		require.Equal(t, c.want, log, "%s: prepare only after the reservation, then record → revision → execution → audit → SUCCEEDED", c.name)
	}
}

func TestTheSuccessCacheIsReadFirstSoAReplayNeedsNoWriteTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first := b.createNote(t, "alice", "cache-first", "cached")

	// A second pool over the same database whose sessions are read-only: any reservation INSERT
	// or transaction begin would fail with READ_ONLY, so a replay proves the cache is read first.
	ro, err := store.Open(ctx, b.db.DSN, store.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	rk := kernel.New(ro, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
	res, err := rk.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "cache-first", Title: "cached",
		Payload: raw(map[string]any{"text": "cached"})})
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, res.Outcome)
	requireSameRecord(t, first.Record, res.Record)

	// The same read-only kernel cannot execute a miss: the check above is able to fail.
	_, err = rk.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "cache-miss", Title: "x"})
	requireCode(t, err, apperr.ReadOnly)
}

func TestReplayAfterTheRecordGainsRevisionsStillReturnsTheFirstRevision(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in := model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "drift", Title: "Secret title", Summary: str("secret summary"),
		Payload: raw(map[string]any{"content": "secret payload content", "n": 1})}
	first, err := b.k.Create(ctx, in)
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, first.Outcome)
	id := first.Record.ID
	for rev := 1; rev <= 3; rev++ {
		_, err := b.k.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: id, ExpectRevision: rev,
			Title: str("title v" + string(rune('1'+rev))), Payload: raw(map[string]any{"content": "changed", "n": rev + 1})})
		require.NoError(t, err)
	}
	_, err = b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: id, FeatureID: "F01"})
	require.NoError(t, err)
	require.Equal(t, 5, b.currentRevision(t, "alice", id))

	replay, err := b.k.Create(ctx, in)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, replay.Outcome)
	require.Equal(t, 1, replay.Record.Revision, "the replay is the first revision, not the latest (5)")
	requireSameRecord(t, first.Record, replay.Record)

	// The idempotency table holds references only: no body, in any key, at any depth.
	require.Equal(t, []string{"policy", "result", "schemaVersion"}, b.topKeys(t, "alice", "drift"))
	require.Equal(t, []string{"recordId", "revision"}, b.resultKeys(t, "alice", "drift"))
	var leaked int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_record
		WHERE response::text ~* '(title|summary|payload|content|secret)'`).Scan(&leaked))
	require.Zero(t, leaked, "no envelope mentions a title, summary, payload or content")
}

func TestMEM001StoresOnlyRecordIdAndRevision(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	content := "  Confidential   memory   text  "
	created := b.createMem(t, "alice", "mem-only-refs", content)
	rewrite, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: created.Record.ID,
		FeatureID: "F01", Key: "mem-only-refs:rewrite"})
	require.NoError(t, err)
	require.JSONEq(t, `{"originalContent":"`+content+`","currentContent":"Confidential memory text"}`, string(rewrite.Record.Payload))

	require.Equal(t, []string{"recordId", "revision"}, b.resultKeys(t, "alice", "mem-only-refs"))
	require.JSONEq(t, `{"recordId":"`+created.Record.ID+`","revision":1}`, string(b.rawResponse(t, "alice", "mem-only-refs")["result"]))
	require.Equal(t, []string{"executionId", "recordId", "revision"}, b.resultKeys(t, "alice", "mem-only-refs:rewrite"))
	var text string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT string_agg(response::text, ' ') FROM idempotency_record WHERE owner_id = 'alice'`).Scan(&text))
	for _, banned := range []string{"Confidential", "originalContent", "currentContent", "memo"} {
		require.NotContains(t, text, banned)
	}
}

func TestOwnersAreIsolatedAndTheSameKeyOfAnotherOwnerIsUnaffected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	alice := b.createNote(t, "alice", "shared-key", "alice's")
	bob, err := b.k.Create(ctx, model.CreateInput{Owner: "bob", Module: kernel.ModuleNote, Key: "shared-key", Title: "bob's"})
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, bob.Outcome, "bob's key is his own even though alice used the same string")
	require.NotEqual(t, alice.Record.ID, bob.Record.ID)

	// bob reusing the key with another operation conflicts only with his own binding.
	_, err = b.k.Create(ctx, model.CreateInput{Owner: "bob", Module: kernel.ModuleMem, Key: "shared-key", Title: "x",
		Payload: raw(map[string]any{"originalContent": "a", "currentContent": "a"})})
	requireCode(t, err, apperr.ScopeConflict)
	again := b.createNote(t, "alice", "shared-key", "alice's")
	require.Equal(t, idemtype.Replayed, again.Outcome)
	requireSameRecord(t, alice.Record, again.Record)

	// bob cannot read, patch or run features on alice's record.
	_, err = b.k.Patch(ctx, model.PatchInput{Owner: "bob", Module: kernel.ModuleNote, RecordID: alice.Record.ID, ExpectRevision: 1, Title: str("mine")})
	requireCode(t, err, apperr.RecordNotFound)
	_, err = b.k.RunFeature(ctx, model.FeatureInput{Owner: "bob", Module: kernel.ModuleNote, RecordID: alice.Record.ID, FeatureID: "F01", Key: "steal"})
	requireCode(t, err, apperr.RecordNotFound)
	_, err = b.k.FindRevision(ctx, store.RevisionRef{Owner: "bob", Module: kernel.ModuleNote, RecordID: alice.Record.ID, Revision: 1})
	requireCode(t, err, apperr.RecordNotFound)
	require.Equal(t, 1, b.currentRevision(t, "alice", alice.Record.ID))
	require.Zero(t, b.count(t, `SELECT count(*) FROM idempotency_record WHERE owner_id = 'bob' AND idempotency_key = 'steal'`))

	// The schema refuses a revision of alice's record filed under bob (composite key on owner).
	_, err = b.db.Pool.Exec(ctx, `INSERT INTO record_revision (owner_id, record_id, revision, snapshot, created_at)
		VALUES ('bob', $1, 2, '{}', now())`, alice.Record.ID)
	require.Error(t, err)
	require.Contains(t, err.Error(), "record_revision_record_fkey")
}

func TestModulesAreIsolatedAndARecordIsOnlyReachableThroughItsModule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	mem := b.createMem(t, "alice", "mod-mem", "text")
	_, err := b.k.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: mem.Record.ID, ExpectRevision: 1, Title: str("as a note")})
	requireCode(t, err, apperr.RecordNotFound)
	_, err = b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: mem.Record.ID, FeatureID: "F01"})
	requireCode(t, err, apperr.RecordNotFound)
	_, err = b.k.FindRevision(ctx, store.RevisionRef{Owner: "alice", Module: kernel.ModuleNote, RecordID: mem.Record.ID, Revision: 1})
	requireCode(t, err, apperr.RecordNotFound)
	rec, err := b.k.FindRevision(ctx, store.RevisionRef{Owner: "alice", Module: kernel.ModuleMem, RecordID: mem.Record.ID, Revision: 1})
	require.NoError(t, err)
	require.Equal(t, kernel.ModuleMem, rec.ModuleCode)
	require.Equal(t, []int{1}, b.revisionsOf(t, "alice", mem.Record.ID))

	// The schema itself refuses an execution whose module differs from its record's.
	_, err = b.db.Pool.Exec(ctx, `INSERT INTO feature_execution (owner_id, id, module_code, record_id, feature_id, mode, status, record_revision, created_at, updated_at)
		VALUES ('alice', 'x1', 'NOTE', $1, 'F01', 'internal', 'SUCCEEDED', 1, now(), now())`, mem.Record.ID)
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "feature_execution_record_fkey"), err.Error())
}

func TestTheFirstResultIsReturnedAsJSONWithTheSameShapeOnReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.createNote(t, "alice", "shape", "s")
	again := b.createNote(t, "alice", "shape", "s")
	var f, a map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw(first), &f))
	require.NoError(t, json.Unmarshal(raw(again), &a))
	require.Equal(t, keysOf(f), keysOf(a))
	require.Equal(t, []string{"envelope", "execution", "key", "operation", "outcome", "record", "waited"}, keysOf(f))
	require.JSONEq(t, `"EXECUTED"`, string(f["outcome"]))
	require.JSONEq(t, `"REPLAYED"`, string(a["outcome"]))
	require.JSONEq(t, `null`, string(a["execution"]))
	require.Equal(t, string(first.Envelope), string(again.Envelope), "the replay's envelope is byte for byte the first one")
	require.Equal(t, string(f["record"]), string(a["record"]), "and so is the restored record")
}

func keysOf(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
