package kernel_test

import (
	"context"
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

// replayNote replays the create of key with the same body createNote used.
func (b *testBundle) replayNote(key, title string) error {
	_, err := b.k.Create(context.Background(), model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: key, Title: title,
		Payload: raw(map[string]any{"text": title})})
	return err
}

func TestAStoredSnapshotPayloadOverTheSizeLimitFailsClosed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	rec := b.createNote(t, "alice", "big", "b")
	// 70 KB planted straight into the revision, as a tampered or imported row would hold it.
	require.EqualValues(t, 1, b.exec(t, `UPDATE record_revision SET snapshot = jsonb_set(snapshot, '{payload}', jsonb_build_object('text', repeat('x', 70000)))
		WHERE record_id = $1 AND revision = 1`, rec.Record.ID))

	ae := requireCode(t, b.replayNote("big", "b"), apperr.SnapshotIntegrity)
	require.Contains(t, ae.Message, "exceeds")
	_, err := b.k.FindRevision(ctx, store.RevisionRef{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, Revision: 1})
	requireCode(t, err, apperr.SnapshotIntegrity)
	_, _, _, err = b.k.RestoreKey(ctx, "alice", "b", nil, model.OpCreate(kernel.ModuleNote), []byte(fmt.Sprintf(
		`{"schemaVersion":1,"policy":%q,"result":{"recordId":%q,"revision":1}}`, kernel.PolicyRecordSnapshot, rec.Record.ID)))
	requireCode(t, err, apperr.SnapshotIntegrity)
}

// internalRun runs NOTE F01 (archive: a new revision) on a fresh note with key and returns the
// record id and the execution id.
func (b *testBundle) internalRun(t *testing.T, key string) (string, string) {
	t.Helper()
	rec := b.createNote(t, "alice", key+"-create", "n")
	res, err := b.k.RunFeature(context.Background(), model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, FeatureID: "F01", Key: key})
	require.NoError(t, err)
	require.Equal(t, 2, res.Execution.RecordRevision)
	return rec.Record.ID, res.Execution.ID
}

func TestAnEnvelopeMovedToAnotherRevisionThanItsExecutionFailsClosed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	recordID, _ := b.internalRun(t, "moved")
	// Revision 1 exists and is intact; only the envelope now points at it.
	require.EqualValues(t, 1, b.exec(t, `UPDATE idempotency_record SET response = jsonb_set(response, '{result,revision}', '1') WHERE idempotency_key = 'moved'`))

	_, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: recordID, FeatureID: "F01", Key: "moved"})
	ae := requireCode(t, err, apperr.SnapshotIntegrity)
	require.Contains(t, ae.Message, "recorded at revision 2")

	var response []byte
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT response FROM idempotency_record WHERE idempotency_key = 'moved'`).Scan(&response))
	_, _, _, err = b.k.RestoreKey(ctx, "alice", "moved", nil, model.OpFeature(kernel.ModuleNote, recordID, "F01"), response)
	requireCode(t, err, apperr.SnapshotIntegrity)
}

func TestAnExecutionOfAnotherFeatureIsNeverReplayedForThisFeature(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	mem := b.createMem(t, "alice", "mem", "  some   text ")
	run := model.FeatureInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: mem.Record.ID, FeatureID: "F01", Key: "rewrite"}
	res, err := b.k.RunFeature(ctx, run)
	require.NoError(t, err)
	require.EqualValues(t, 1, b.exec(t, `UPDATE feature_execution SET feature_id = 'F02' WHERE id = $1`, res.Execution.ID))

	_, err = b.k.RunFeature(ctx, run)
	ae := requireCode(t, err, apperr.SnapshotIntegrity)
	require.Contains(t, ae.Message, "is of feature F02")

	var response []byte
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT response FROM idempotency_record WHERE idempotency_key = 'rewrite'`).Scan(&response))
	_, _, _, err = b.k.RestoreKey(ctx, "alice", "rewrite", nil, model.OpFeature(kernel.ModuleMem, mem.Record.ID, "F01"), response)
	requireCode(t, err, apperr.SnapshotIntegrity)
	// Untampered, the same replay restores the first result.
	require.EqualValues(t, 1, b.exec(t, `UPDATE feature_execution SET feature_id = 'F01' WHERE id = $1`, res.Execution.ID))
	again, err := b.k.RunFeature(ctx, run)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	require.Equal(t, res.Execution.ID, again.Execution.ID)
}

func TestAFeatureThatWouldGrowAPayloadPastTheLimitIsRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	payload := `{"text":"` + strings.Repeat("x", model.MaxJSONBytes-12) + `"}`
	require.LessOrEqual(t, len(payload), model.MaxJSONBytes)
	rec, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Title: "full", Payload: []byte(payload)})
	require.NoError(t, err)
	before := b.counts(t)
	_, err = b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, FeatureID: "F01", Key: "grow"})
	ae := requireCode(t, err, apperr.ValidationFailed)
	require.Contains(t, ae.Message, "payload")
	require.Equal(t, before, b.counts(t), "nothing is written: a revision the read check would refuse never exists")
}
