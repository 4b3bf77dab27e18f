package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/inspect"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
)

func TestADirectExternalFeatureFailsClosedToABlockedExecutionAndReplaysIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	mem := b.createMem(t, "alice", "mem", "publish me")
	before := b.counts(t)
	in := model.FeatureInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: mem.Record.ID, FeatureID: "F02", Key: "publish"}
	res, err := b.k.RunFeature(ctx, in)
	require.NoError(t, err, "BLOCKED is a committed fact, not an error")
	require.Equal(t, idemtype.Executed, res.Outcome)
	require.NotNil(t, res.Record)
	require.NotNil(t, res.Execution)
	require.Equal(t, "blocked_external", res.Execution.Mode)
	require.Equal(t, "BLOCKED", res.Execution.Status)
	require.Equal(t, 1, res.Record.Revision, "the record keeps its pre-request revision")
	require.Equal(t, 1, res.Execution.RecordRevision)

	after := b.counts(t)
	require.Equal(t, before["record_revision"], after["record_revision"], "no revision is written")
	require.Equal(t, before["feature_execution"]+1, after["feature_execution"])
	require.Equal(t, before["outbox_message"], after["outbox_message"], "no provider call is queued either")
	require.Equal(t, 1, b.currentRevision(t, "alice", mem.Record.ID))
	var mode, status string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT mode, status FROM feature_execution WHERE id = $1`, res.Execution.ID).Scan(&mode, &status))
	require.Equal(t, []string{"blocked_external", "BLOCKED"}, []string{mode, status})
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_event WHERE action = 'FEATURE_F02_BLOCKED' AND execution_id = $1
		AND idempotency_key = 'publish' AND revision = 1`, res.Execution.ID))
	require.Zero(t, b.count(t, `SELECT count(*) FROM audit_event WHERE action = 'FEATURE_F02_EXECUTED'`))
	var output map[string]any
	require.NoError(t, json.Unmarshal(res.Execution.Output, &output))
	require.Equal(t, true, output["blocked"])

	replay, err := b.k.RunFeature(ctx, in)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, replay.Outcome)
	requireSameExecution(t, res.Execution, replay.Execution)
	require.Equal(t, 1, replay.Record.Revision)
	require.Equal(t, after, b.counts(t), "a replay of a BLOCKED execution writes nothing")
}

func TestAnOutboxFeatureCommitsAPendingExecutionAndExactlyOneOutboxMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.createCommitment(t, "alice", "c")
	in := model.FeatureInput{Owner: "alice", Module: kernel.ModuleCommitment, RecordID: c.Record.ID, FeatureID: "F02", Key: "notify"}
	res, err := b.k.RunFeature(ctx, in)
	require.NoError(t, err)
	require.Equal(t, "outbox", res.Execution.Mode)
	require.Equal(t, "PENDING", res.Execution.Status)
	require.Equal(t, 1, res.Record.Revision)
	var provider, idemID, status string
	var ref map[string]any
	var refRaw []byte
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT provider, idempotency_id, status, payload_ref FROM outbox_message WHERE execution_id = $1`,
		res.Execution.ID).Scan(&provider, &idemID, &status, &refRaw))
	require.NoError(t, json.Unmarshal(refRaw, &ref))
	require.Equal(t, "notifier", provider)
	require.Equal(t, res.Execution.ID, idemID, "the provider is called with the execution's idempotency id")
	require.Equal(t, "PENDING", status)
	require.Equal(t, c.Record.ID, ref["recordId"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbox_message`))

	for i := 0; i < 3; i++ {
		again, err := b.k.RunFeature(ctx, in)
		require.NoError(t, err)
		require.Equal(t, idemtype.Replayed, again.Outcome)
		require.Equal(t, res.Execution.ID, again.Execution.ID)
	}
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM outbox_message`), "replays queue nothing more")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM feature_execution`))
}

func TestAReviewNeverStoresItsCommentInTheEnvelope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.createCommitment(t, "alice", "c")
	comment := "the candid private comment 42"
	in := kernel.ReviewInput{Owner: "alice", RecordID: c.Record.ID, Key: "review", Verdict: "missed", Comment: comment}
	res, err := b.k.CreateReview(ctx, in)
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, res.Outcome)
	require.Equal(t, []string{"recordId", "reviewId"}, b.resultKeys(t, "alice", "review"))
	require.JSONEq(t, `"`+kernel.PolicyCommitmentReview+`"`, string(b.rawResponse(t, "alice", "review")["policy"]))
	require.Zero(t, b.count(t, `SELECT count(*) FROM idempotency_record WHERE response::text LIKE '%candid%' OR response::text LIKE '%missed%'`))
	require.NotContains(t, string(res.Envelope), "candid")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM commitment_review WHERE comment = $1`, comment))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_event WHERE action = 'REVIEW_CREATED' AND detail::text NOT LIKE '%candid%'`))

	again, err := b.k.CreateReview(ctx, in)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	require.Equal(t, res.Review.ID, again.Review.ID)
	require.Equal(t, comment, again.Review.Comment, "the comment is restored from the immutable review row")

	_, err = b.k.CreateReview(ctx, kernel.ReviewInput{Owner: "alice", RecordID: c.Record.ID, Key: "review", Verdict: "missed", Comment: "edited"})
	requireCode(t, err, apperr.KeyReused)
	_, err = b.k.CreateReview(ctx, kernel.ReviewInput{Owner: "alice", RecordID: c.Record.ID, Key: "bad", Verdict: "maybe", Comment: "x"})
	requireCode(t, err, apperr.ValidationFailed)
	note := b.createNote(t, "alice", "n", "n")
	_, err = b.k.CreateReview(ctx, kernel.ReviewInput{Owner: "alice", RecordID: note.Record.ID, Key: "wrong-module", Verdict: "kept", Comment: "x"})
	requireCode(t, err, apperr.RecordNotFound)
}

func TestIdentityWritesAreGoneAndTouchNothingNotEvenTheKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	before := b.counts(t)
	b.seen.reset()
	var reached []string
	fk := b.k.WithFaults(func(_ context.Context, s string) error { reached = append(reached, s); return nil })
	calls := map[string]func() error{
		"create": func() error {
			_, err := fk.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleIdentity, Key: "id-create", Title: "me"})
			return err
		},
		"create without a key": func() error {
			_, err := fk.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleIdentity, Title: "me"})
			return err
		},
		"patch": func() error {
			_, err := fk.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleIdentity, RecordID: "01ANY", Key: "id-patch", ExpectRevision: 1, Title: str("x")})
			return err
		},
		"feature": func() error {
			_, err := fk.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleIdentity, RecordID: "01ANY", FeatureID: "F01", Key: "id-feature"})
			return err
		},
		"bad owner too": func() error {
			_, err := fk.Create(ctx, model.CreateInput{Owner: "not valid!", Module: kernel.ModuleIdentity, Key: "k", Title: "me"})
			return err
		},
	}
	for name, call := range calls {
		ae := requireCode(t, call(), apperr.LegacyWriteDisable)
		require.Equal(t, 410, ae.Status(), name)
	}
	require.Equal(t, before, b.counts(t))
	require.Zero(t, b.seen.total(), "no prepare ran")
	require.Empty(t, reached, "no step of the runner was reached")
}

// insertReceipt writes an idempotency row by hand.
func (b *testBundle) insertReceipt(t *testing.T, owner, key, operation, response string) {
	t.Helper()
	now := b.clock.Now()
	b.exec(t, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
		VALUES ($1, $2, $3, repeat('0', 64), 'SUCCEEDED', $4::jsonb, $5, $6, $5)`, owner, key, operation, response, now, now.Add(idem.DefaultTTL))
}

func TestLegacyRedactionDeletesExactlyTheIdentityRawJSONReceiptsAfterVerification(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for i, owner := range []string{"alice", "alice", "bob"} {
		b.insertReceipt(t, owner, fmt.Sprintf("legacy-%d", i), kernel.OpLegacyIdentityCreate,
			fmt.Sprintf(`{"policy":"raw-json-v1","body":{"identityId":"id-%d","displayName":"Person %d"}}`, i, i))
	}
	// Decoys that must survive: typed receipts of every kind, one whose key looks legacy, one
	// whose result mentions raw-json-v1 below the top level.
	note := b.createNote(t, "alice", "identity:create", "decoy key")
	b.createNote(t, "bob", "legacy-0", "same key as a legacy receipt")
	_, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, FeatureID: "F01", Key: "decoy-f"})
	require.NoError(t, err)
	b.insertReceipt(t, "carol", "nested", "NOTE:record:create", `{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"raw-json-v1","revision":1}}`)
	decoys := b.count(t, `SELECT count(*) FROM idempotency_record`) - 3

	// Redact before verify is refused.
	_, err = b.k.RedactLegacy(ctx)
	ae := requireCode(t, err, apperr.ValidationFailed)
	require.Contains(t, ae.Message, "pending")
	require.Equal(t, decoys+3, b.count(t, `SELECT count(*) FROM idempotency_record`))

	// A legacy receipt under another operation fails verification, and redact stays refused.
	b.insertReceipt(t, "alice", "odd", "NOTE:record:create", `{"policy":"raw-json-v1","body":{}}`)
	rep, err := b.k.VerifyLegacy(ctx)
	require.NoError(t, err)
	require.Equal(t, "failed", rep.Status)
	require.NotEmpty(t, rep.Problems)
	_, err = b.k.RedactLegacy(ctx)
	requireCode(t, err, apperr.ValidationFailed)
	b.exec(t, `DELETE FROM idempotency_record WHERE idempotency_key = 'odd'`)

	rep, err = b.k.VerifyLegacy(ctx)
	require.NoError(t, err)
	require.Equal(t, "passed", rep.Status, "%v", rep.Problems)
	require.Equal(t, 3, rep.Receipts)
	var ledger string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT status FROM data_migration_ledger WHERE name = $1`, kernel.LegacyLedgerEntry).Scan(&ledger))
	require.Equal(t, "passed", ledger)

	// Legacy receipts are readable (shown as legacy) before they go.
	view, err := inspect.Key(ctx, b.k, "alice", "legacy-0")
	require.NoError(t, err)
	require.True(t, view.Legacy)
	require.Nil(t, view.Restored.Record)

	n, err := b.k.RedactLegacy(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	require.Zero(t, b.count(t, `SELECT count(*) FROM idempotency_record WHERE operation = 'identity:create'`))
	require.Equal(t, decoys, b.count(t, `SELECT count(*) FROM idempotency_record`), "every decoy survives")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM idempotency_record WHERE owner_id = 'alice' AND idempotency_key = 'identity:create'`))

	n, err = b.k.RedactLegacy(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a rerun deletes nothing")
	require.Equal(t, decoys, b.count(t, `SELECT count(*) FROM idempotency_record`))
}

func TestALegacyReceiptIsNeverReplayedIntoAWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.insertReceipt(t, "alice", "old", model.OpCreate(kernel.ModuleNote), `{"policy":"raw-json-v1","body":{"title":"old"}}`)
	var fp string
	// A receipt of the legacy era carries a version 1 fingerprint; it is compared by that rule.
	fp, err := idem.FingerprintV1(model.OpCreate(kernel.ModuleNote), []byte(`{"title":"old"}`))
	require.NoError(t, err)
	b.exec(t, `UPDATE idempotency_record SET fingerprint = $1 WHERE idempotency_key = 'old'`, fp)
	_, err = b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "old", Title: "old"})
	ae := requireCode(t, err, apperr.PolicyMismatch)
	require.Contains(t, ae.Message, idemtype.LegacyPolicy)
	require.Zero(t, b.count(t, `SELECT count(*) FROM record`))
}
