package kernel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/kernel"
)

func lifeKinds(l kernel.KeyLife) []string {
	var out []string
	for _, e := range l.Events {
		what := e.Kind
		if e.Action != nil {
			what += " " + *e.Action
		}
		out = append(out, what)
	}
	return out
}

func TestInspectingASucceededKeyShowsTheExactReplayAndItsOneLife(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.createNote(t, "alice", "s-1", "first")
	title := "second"
	_, err := b.k.Patch(ctx, kernel.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: c.Record.ID, ExpectRevision: 1, Title: &title})
	require.NoError(t, err)

	v, err := b.k.InspectKey(ctx, "alice", "s-1")
	require.NoError(t, err)
	require.Equal(t, kernel.KeySucceeded, v.State)
	require.False(t, v.Expired)
	require.Nil(t, v.RestoreError)
	require.Equal(t, 1, v.Restored.Record.Revision)
	require.Equal(t, 2, v.Latest.Record.Revision)
	require.Contains(t, v.Verdict, "a replay returns revision 1 of record "+c.Record.ID)
	require.Len(t, v.Lives, 1)
	require.True(t, v.Lives[0].Current)
	require.Equal(t, []string{"key", "revision", "audit RECORD_CREATED"}, lifeKinds(v.Lives[0]))
}

func TestInspectingACommittedProcessingLeftoverSaysWhatTheNextRequestGets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.exec(t, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
		VALUES ('alice', 'stuck', 'NOTE:record:create', repeat('a', 64), 'PROCESSING', NULL, now(), now() + interval '2 hours', now())`)

	v, err := b.k.InspectKey(ctx, "alice", "stuck")
	require.NoError(t, err, "a PROCESSING row is shown, not an error")
	require.Equal(t, kernel.KeyProcessing, v.State)
	require.Nil(t, v.Envelope)
	require.Nil(t, v.RestoreError)
	require.Nil(t, v.Restored.Record)
	require.Contains(t, v.Verdict, "abnormal")
	require.Contains(t, v.Verdict, "never treated as success")
	require.Contains(t, v.Verdict, "expires at "+v.ExpiresAt.UTC().Format("2006-01-02 15:04:05Z"))
	require.Contains(t, v.Verdict, "409 IDEMPOTENCY_IN_PROGRESS")

	// And that is what the next request gets.
	_, err = b.k.Create(ctx, kernel.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "stuck", Title: "t"})
	requireCode(t, err, apperr.InProgress)
}

func TestInspectingAnExpiredKeySaysItRunsAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.createNote(t, "alice", "old-1", "first")
	b.clock.Advance(25 * time.Hour)
	v, err := b.k.InspectKey(ctx, "alice", "old-1")
	require.NoError(t, err)
	require.Equal(t, kernel.KeyExpired, v.State)
	require.True(t, v.Expired)
	require.Contains(t, v.Verdict, "the next request with this key deletes the row and executes anew")
	require.Equal(t, 1, v.Restored.Record.Revision, "what it was is still shown")
}

func TestInspectingALegacyReceiptShowsItReadOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.insertReceipt(t, "alice", "legacy-1", kernel.OpLegacyIdentityCreate, `{"policy":"raw-json-v1","body":{"identityId":"x"}}`)
	v, err := b.k.InspectKey(ctx, "alice", "legacy-1")
	require.NoError(t, err)
	require.Equal(t, kernel.KeyLegacy, v.State)
	require.True(t, v.Legacy)
	require.Contains(t, v.Verdict, "410 LEGACY_WRITE_DISABLED")
	require.Nil(t, v.Restored.Record)

	// A raw-json-v1 envelope under a current operation fails closed, and says so.
	b.insertReceipt(t, "alice", "legacy-2", kernel.OpCreate(kernel.ModuleNote), `{"policy":"raw-json-v1","body":{"title":"x"}}`)
	v, err = b.k.InspectKey(ctx, "alice", "legacy-2")
	require.NoError(t, err)
	require.Equal(t, kernel.KeyLegacy, v.State)
	require.Equal(t, apperr.PolicyMismatch, v.RestoreError.Code)
	require.Contains(t, v.Verdict, "500 IDEMPOTENCY_POLICY_MISMATCH")
}

func TestInspectingATamperedKeyShowsTheCodedErrorBesideTheStoredEnvelope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.createNote(t, "alice", "t-env", "first")
	b.exec(t, `UPDATE idempotency_record SET response = response || '{"title": "smuggled"}' WHERE idempotency_key = 't-env'`)
	v, err := b.k.InspectKey(ctx, "alice", "t-env")
	require.NoError(t, err, "the key is shown, the restore fails closed")
	require.Equal(t, kernel.KeyFailsClosed, v.State)
	require.Equal(t, apperr.SnapshotIntegrity, v.RestoreError.Code)
	require.Contains(t, string(v.Envelope), "smuggled", "the stored envelope as it is")
	require.Contains(t, v.Verdict, "a replay fails closed: 500 SNAPSHOT_INTEGRITY_VIOLATION")
	require.Nil(t, v.Restored.Record, "nothing restored is shown as if it were the result")
	require.Equal(t, c.Record.ID, v.Latest.Record.ID, "the record the envelope names is still found")

	// A tampered revision behind an intact envelope fails closed too.
	d := b.createNote(t, "alice", "t-rev", "first")
	b.exec(t, `UPDATE record_revision SET snapshot = jsonb_set(snapshot, '{ownerId}', '"mallory"') WHERE record_id = $1`, d.Record.ID)
	v, err = b.k.InspectKey(ctx, "alice", "t-rev")
	require.NoError(t, err)
	require.Equal(t, kernel.KeyFailsClosed, v.State)
	require.Equal(t, apperr.SnapshotIntegrity, v.RestoreError.Code)
}

func TestAKeysEarlierLifeIsListedApartFromItsCurrentOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first := b.createNote(t, "alice", "twice", "same")
	b.clock.Advance(25 * time.Hour) // the key expires
	second := b.createNote(t, "alice", "twice", "same")
	require.NotEqual(t, first.Record.ID, second.Record.ID, "the expired key executed again")

	v, err := b.k.InspectKey(ctx, "alice", "twice")
	require.NoError(t, err)
	require.Equal(t, kernel.KeySucceeded, v.State)
	require.Len(t, v.Lives, 2)
	cur, old := v.Lives[0], v.Lives[1]
	require.True(t, cur.Current)
	require.False(t, old.Current)
	require.Contains(t, old.Label, "earlier life 1")
	require.Equal(t, []string{"key", "revision", "audit RECORD_CREATED"}, lifeKinds(cur))
	require.Equal(t, []string{"revision", "audit RECORD_CREATED"}, lifeKinds(old))
	for _, e := range cur.Events {
		if e.RecordID != nil {
			require.Equal(t, second.Record.ID, *e.RecordID, "the current life holds only the second request's rows")
		}
	}
	for _, e := range old.Events {
		require.Equal(t, first.Record.ID, *e.RecordID)
	}

	// The same split by time when the envelope cannot be read: a PROCESSING row reserved later.
	b.exec(t, `UPDATE idempotency_record SET status = 'PROCESSING', response = NULL WHERE idempotency_key = 'twice'`)
	b.exec(t, `DELETE FROM audit_event WHERE record_id = $1`, second.Record.ID)
	b.exec(t, `DELETE FROM record_revision WHERE record_id = $1`, second.Record.ID)
	v, err = b.k.InspectKey(ctx, "alice", "twice")
	require.NoError(t, err)
	require.Equal(t, kernel.KeyProcessing, v.State)
	require.Equal(t, []string{"key"}, lifeKinds(v.Lives[0]), "nothing was written in this reservation's life")
	require.Equal(t, []string{"revision", "audit RECORD_CREATED"}, lifeKinds(v.Lives[1]))
}

func TestInspectingAFeatureKeyGroupsItsExecution(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	m := b.createMem(t, "alice", "", "draft")
	_, err := b.k.RunFeature(ctx, kernel.FeatureInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: m.Record.ID, FeatureID: "F02", Key: "pub"})
	require.NoError(t, err)
	v, err := b.k.InspectKey(ctx, "alice", "pub")
	require.NoError(t, err)
	require.Equal(t, kernel.KeySucceeded, v.State)
	require.Equal(t, "BLOCKED", v.Restored.Execution.Status)
	require.Len(t, v.Lives, 1)
	require.Equal(t, []string{"key", "execution", "audit FEATURE_F02_BLOCKED"}, lifeKinds(v.Lives[0]))
}
