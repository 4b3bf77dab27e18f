package inspect_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/inspect"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/verify"
)

func lifeKinds(l model.KeyLife) []string {
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
	c := b.CreateNote(t, "alice", "s-1", "first")
	title := "second"
	_, err := b.k.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: c.Record.ID, ExpectRevision: 1, Title: &title})
	require.NoError(t, err)

	v, err := inspect.Key(ctx, b.k, "alice", "s-1")
	require.NoError(t, err)
	require.Equal(t, model.KeySucceeded, v.State)
	require.False(t, v.Expired)
	require.Nil(t, v.RestoreError)
	require.Equal(t, 1, v.Restored.Record.Revision)
	require.Equal(t, 2, v.Latest.Record.Revision)
	require.Contains(t, v.Next, "a replay returns revision 1 of record "+c.Record.ID)
	require.Equal(t, model.VerdictExecutedOnce, v.VerdictKind)
	require.Regexp(t, `^executed once at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z \(transaction \d+\); a retry gets 201 with record `+c.Record.ID+`, revision 1$`, v.Verdict)
	require.Empty(t, v.Problems)
	require.Len(t, v.Lives, 1)
	require.True(t, v.Lives[0].Current)
	require.Contains(t, v.Verdict, "(transaction "+v.Lives[0].XID+")", "the transaction of the life that holds the rows")
	require.Equal(t, []string{"key", "revision", "audit RECORD_CREATED"}, lifeKinds(v.Lives[0]))
}

func TestInspectingACommittedProcessingLeftoverSaysWhatTheNextRequestGets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.Exec(t, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
		VALUES ('alice', 'stuck', 'NOTE:record:create', repeat('a', 64), 'PROCESSING', NULL, now(), now() + interval '2 hours', now())`)

	v, err := inspect.Key(ctx, b.k, "alice", "stuck")
	require.NoError(t, err, "a PROCESSING row is shown, not an error")
	require.Equal(t, model.KeyProcessing, v.State)
	require.Nil(t, v.Envelope)
	require.Nil(t, v.RestoreError)
	require.Nil(t, v.Restored.Record)
	require.Contains(t, v.Next, "abnormal")
	require.Contains(t, v.Next, "never treated as success")
	require.Contains(t, v.Next, "expires at "+v.ExpiresAt.UTC().Format("2006-01-02 15:04:05Z"))
	require.Contains(t, v.Next, "409 IDEMPOTENCY_IN_PROGRESS")
	require.Equal(t, model.VerdictProcessing, v.VerdictKind)
	require.Regexp(t, `^abnormal: reserved at .* \(transaction \d+\) and committed without its result — nothing ran; a retry gets 409 IDEMPOTENCY_IN_PROGRESS until the key expires at `, v.Verdict)

	// And that is what the next request gets.
	_, err = b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "stuck", Title: "t"})
	requireCode(t, err, apperr.InProgress)
}

func TestInspectingAnExpiredKeySaysItRunsAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.CreateNote(t, "alice", "old-1", "first")
	b.clock.Advance(25 * time.Hour)
	v, err := inspect.Key(ctx, b.k, "alice", "old-1")
	require.NoError(t, err)
	require.Equal(t, model.KeyExpired, v.State)
	require.True(t, v.Expired)
	require.Contains(t, v.Next, "the next request with this key deletes the row and executes anew")
	require.Equal(t, 1, v.Restored.Record.Revision, "what it was is still shown")
	require.Equal(t, model.VerdictExpired, v.VerdictKind)
	require.Regexp(t, `^expired at .*: it executed once at .* \(transaction \d+\); a retry executes anew \(the key expired, so nothing is replayed\)$`, v.Verdict)
	require.NotContains(t, v.Verdict, "gets 201", "an expired key says one thing: nothing is replayed")
}

func TestInspectingALegacyReceiptShowsItReadOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.insertReceipt(t, "alice", "legacy-1", kernel.OpLegacyIdentityCreate, `{"policy":"raw-json-v1","body":{"identityId":"x"}}`)
	v, err := inspect.Key(ctx, b.k, "alice", "legacy-1")
	require.NoError(t, err)
	require.Equal(t, model.KeyLegacy, v.State)
	require.True(t, v.Legacy)
	require.Contains(t, v.Next, "410 LEGACY_WRITE_DISABLED")
	require.Equal(t, model.VerdictLegacy, v.VerdictKind)
	require.Nil(t, v.Restored.Record)

	// A raw-json-v1 envelope under a current operation fails closed, and says so.
	b.insertReceipt(t, "alice", "legacy-2", model.OpCreate(kernel.ModuleNote), `{"policy":"raw-json-v1","body":{"title":"x"}}`)
	v, err = inspect.Key(ctx, b.k, "alice", "legacy-2")
	require.NoError(t, err)
	require.Equal(t, model.KeyLegacy, v.State)
	require.Equal(t, apperr.PolicyMismatch, v.RestoreError.Code)
	require.Contains(t, v.Next, "500 IDEMPOTENCY_POLICY_MISMATCH")
}

func TestInspectingATamperedKeyShowsTheCodedErrorBesideTheStoredEnvelope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.CreateNote(t, "alice", "t-env", "first")
	b.Exec(t, `UPDATE idempotency_record SET response = response || '{"title": "smuggled"}' WHERE idempotency_key = 't-env'`)
	v, err := inspect.Key(ctx, b.k, "alice", "t-env")
	require.NoError(t, err, "the key is shown, the restore fails closed")
	require.Equal(t, model.KeyFailsClosed, v.State)
	require.Equal(t, apperr.SnapshotIntegrity, v.RestoreError.Code)
	require.Contains(t, string(v.Envelope), "smuggled", "the stored envelope as it is")
	require.Contains(t, v.Next, "a replay fails closed: 500 SNAPSHOT_INTEGRITY_VIOLATION")
	require.Equal(t, model.VerdictTampered, v.VerdictKind)
	require.Equal(t, `tampered: stored envelope carries an unknown field "title"; a retry gets 500 SNAPSHOT_INTEGRITY_VIOLATION`, v.Verdict)
	require.Nil(t, v.Restored.Record, "nothing restored is shown as if it were the result")
	require.Equal(t, c.Record.ID, v.Latest.Record.ID, "the record the envelope names is still found")

	// A tampered revision behind an intact envelope fails closed too.
	d := b.CreateNote(t, "alice", "t-rev", "first")
	b.Exec(t, `UPDATE record_revision SET snapshot = jsonb_set(snapshot, '{ownerId}', '"mallory"') WHERE record_id = $1`, d.Record.ID)
	v, err = inspect.Key(ctx, b.k, "alice", "t-rev")
	require.NoError(t, err)
	require.Equal(t, model.KeyFailsClosed, v.State)
	require.Equal(t, apperr.SnapshotIntegrity, v.RestoreError.Code)
	require.Equal(t, model.VerdictTampered, v.VerdictKind)
	require.Contains(t, v.Verdict, "tampered: revision 1 of record "+d.Record.ID)
}

func TestAKeysEarlierLifeIsListedApartFromItsCurrentOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	first := b.CreateNote(t, "alice", "twice", "same")
	b.clock.Advance(25 * time.Hour) // the key expires
	second := b.CreateNote(t, "alice", "twice", "same")
	require.NotEqual(t, first.Record.ID, second.Record.ID, "the expired key executed again")

	v, err := inspect.Key(ctx, b.k, "alice", "twice")
	require.NoError(t, err)
	require.Equal(t, model.KeySucceeded, v.State)
	require.Len(t, v.Lives, 2)
	cur, old := v.Lives[0], v.Lives[1]
	require.True(t, cur.Current)
	require.False(t, old.Current)
	require.Contains(t, old.Label, "earlier life: transaction "+old.XID)
	require.Contains(t, old.Label, "the key expired at ")
	require.Equal(t, "earlier", old.Kind)
	require.NotEqual(t, cur.XID, old.XID)
	require.Equal(t, model.VerdictRanAgainAfterExpiry, v.VerdictKind)
	require.Regexp(t, `^expired at .* and ran again: it executed once at .* \(transaction `+cur.XID+`\); a retry gets 201 with record `+second.Record.ID+`, revision 1$`, v.Verdict)
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
	b.Exec(t, `UPDATE idempotency_record SET status = 'PROCESSING', response = NULL WHERE idempotency_key = 'twice'`)
	b.Exec(t, `DELETE FROM audit_event WHERE record_id = $1`, second.Record.ID)
	b.Exec(t, `DELETE FROM record_revision WHERE record_id = $1`, second.Record.ID)
	v, err = inspect.Key(ctx, b.k, "alice", "twice")
	require.NoError(t, err)
	require.Equal(t, model.KeyProcessing, v.State)
	require.Equal(t, []string{"key"}, lifeKinds(v.Lives[0]), "nothing was written in this reservation's life")
	require.Equal(t, []string{"revision", "audit RECORD_CREATED"}, lifeKinds(v.Lives[1]))
	require.Equal(t, model.VerdictProcessing, v.VerdictKind)
}

func TestInspectingAFeatureKeyGroupsItsExecution(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	m := b.CreateMem(t, "alice", "", "draft")
	_, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: m.Record.ID, FeatureID: "F02", Key: "pub"})
	require.NoError(t, err)
	v, err := inspect.Key(ctx, b.k, "alice", "pub")
	require.NoError(t, err)
	require.Equal(t, model.KeySucceeded, v.State)
	require.Equal(t, "BLOCKED", v.Restored.Execution.Status)
	require.Len(t, v.Lives, 1)
	require.Equal(t, []string{"key", "execution", "audit FEATURE_F02_BLOCKED"}, lifeKinds(v.Lives[0]))
}

// Issue 22, items 3 and 4: the verdict is read from the rows. A key whose envelope was pointed at
// another key's record says "tampered", naming the revision and the key that wrote it, and lists
// no earlier life (before, it was shown as "expired and ran again"); a key whose row was deleted
// by hand and which then ran again says "ran twice" — its first transaction recorded the key as
// valid until a time after the second ran; verify agrees with both.
func TestTheKeyVerdictIsReadFromTheRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	other := b.CreateNote(t, "alice", "k7", "other")
	b.CreateNote(t, "alice", "h-tamper2", "mine")
	b.Exec(t, `UPDATE idempotency_record SET response = jsonb_set(response, '{result,recordId}', to_jsonb($1::text)) WHERE idempotency_key = 'h-tamper2'`, other.Record.ID)
	v, err := inspect.Key(ctx, b.k, "alice", "h-tamper2")
	require.NoError(t, err)
	require.Equal(t, model.VerdictTampered, v.VerdictKind)
	require.Equal(t, `tampered: the envelope points at revision 1 of record `+other.Record.ID+`, written by key "k7", not by key "h-tamper2": `+
		`it was moved to rows this key did not write; a retry gets 500 SNAPSHOT_INTEGRITY_VIOLATION`, v.Verdict)
	require.Len(t, v.Lives, 1, "its own rows are its one life: nothing says it expired and ran again")
	require.Equal(t, "current", v.Lives[0].Kind)
	require.Equal(t, 500, v.Replay.Status)

	twice := b.CreateNote(t, "alice", "twice", "same")
	b.clock.Advance(time.Hour)
	b.Exec(t, `DELETE FROM idempotency_record WHERE idempotency_key = 'twice'`) // by hand, long before it expired
	again := b.CreateNote(t, "alice", "twice", "same")
	require.NotEqual(t, twice.Record.ID, again.Record.ID, "with its row gone, the key ran again")
	v, err = inspect.Key(ctx, b.k, "alice", "twice")
	require.NoError(t, err)
	require.Equal(t, model.VerdictRanTwice, v.VerdictKind)
	require.Regexp(t, `^ran twice: transaction \d+ at .* and transaction \d+ at .* both ran under key "twice", and the first recorded the key as valid until .*; a retry gets 201 with record `+again.Record.ID+`, revision 1$`, v.Verdict)
	require.Len(t, v.Lives, 2)
	require.Equal(t, "twice", v.Lives[1].Kind, "the first run is not called an earlier life")

	rep, err := verify.Invariants(ctx, b.k, model.VerifyOptions{Owner: "alice"})
	require.NoError(t, err)
	got := map[string][]string{}
	for _, inv := range rep.Failed() {
		for _, ex := range inv.Examples {
			got[inv.Name] = append(got[inv.Name], ex.Key)
		}
	}
	require.Equal(t, map[string][]string{verify.InvEnvelopeOwnRows: {"h-tamper2"}, verify.InvKeyRunsOnce: {"twice"}}, got)
}
