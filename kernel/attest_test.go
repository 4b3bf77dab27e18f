package kernel_test

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/attest"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/inspect"
	"github.com/idemwork/idemwork/internal/kerneltest"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// writeEveryKindOfRow writes, through this test's kernel, a row of every kind a request writes
// (kerneltest.Bundle.WriteEveryKindOfRow, which verify's tests write too).
func (b *testBundle) writeEveryKindOfRow(t *testing.T, owner string) {
	t.Helper()
	(&kerneltest.Bundle{DB: b.db, Clock: b.clock, K: b.k}).WriteEveryKindOfRow(t, owner)
}

// The digest the kernel's INSERT computes on the server is the one package attest computes in
// Go from the row read back, for every kind of row, so a replay, a snapshot read and verify can
// check what was written without the server's help — and every row names the transaction that
// reserved its key.
func TestTheDigestsWritesComputeInSQLAreTheOnesAttestComputesInGo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.writeEveryKindOfRow(t, "alice")

	rows, err := b.db.Pool.Query(ctx, `SELECT rv.record_id, rv.revision, rv.snapshot, rv.idempotency_key, rv.created_at, rv.written_xid::text, rv.digest,
			(SELECT q.digest FROM record_revision q WHERE q.owner_id = rv.owner_id AND q.record_id = rv.record_id AND q.revision = rv.revision - 1),
			(SELECT k.reserved_xid::text FROM idempotency_record k WHERE k.owner_id = rv.owner_id AND k.idempotency_key = rv.idempotency_key)
		FROM record_revision rv WHERE owner_id = 'alice' ORDER BY record_id, revision`)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		var id string
		var rev int
		var snap, digest, prev []byte
		var key, xid, reserved *string
		var at time.Time
		require.NoError(t, rows.Scan(&id, &rev, &snap, &key, &at, &xid, &digest, &prev, &reserved))
		require.NotNil(t, xid, "revision %d of %s names its transaction", rev, id)
		if key != nil {
			require.Equal(t, *reserved, *xid, "revision %d of %s was written by the transaction that reserved its key %s", rev, id, *key)
		}
		require.Len(t, digest, attest.Size)
		require.Equal(t, hex.EncodeToString(digest), hex.EncodeToString(attest.Revision(prev, attest.Head{At: &at, Key: key, XID: xid}, snap)),
			"revision %d of %s", rev, id)
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 13, n)

	rows, err = b.db.Pool.Query(ctx, `SELECT e.id, e.owner_id, e.module_code, e.record_id, e.feature_id, e.mode, e.status, e.record_revision,
			e.input, e.output, e.idempotency_key, e.created_at, e.written_xid::text, e.digest,
			(SELECT v.digest FROM record_revision v WHERE v.owner_id = e.owner_id AND v.record_id = e.record_id AND v.revision = e.record_revision),
			(SELECT k.reserved_xid::text FROM idempotency_record k WHERE k.owner_id = e.owner_id AND k.idempotency_key = e.idempotency_key)
		FROM feature_execution e WHERE owner_id = 'alice' ORDER BY id`)
	require.NoError(t, err)
	statuses := map[string]bool{}
	for rows.Next() {
		var e attest.Execution
		var key, xid, reserved *string
		var at time.Time
		var digest, revDigest []byte
		require.NoError(t, rows.Scan(&e.ID, &e.OwnerID, &e.ModuleCode, &e.RecordID, &e.FeatureID, &e.Mode, &e.Status, &e.RecordRevision,
			&e.Input, &e.Output, &key, &at, &xid, &digest, &revDigest, &reserved))
		statuses[e.Mode+" "+e.Status] = true
		require.NotNil(t, xid)
		require.Equal(t, *reserved, *xid, "execution %s was written by the transaction that reserved its key", e.ID)
		require.Equal(t, hex.EncodeToString(digest), hex.EncodeToString(attest.OfExecution(revDigest, attest.Head{At: &at, Key: key, XID: xid}, e)), "execution %s (%s)", e.ID, e.Mode)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]bool{"internal SUCCEEDED": true, "blocked_external BLOCKED": true, "outbox DELIVERED": true,
		"outbox FAILED": true, "outbox PENDING": true}, statuses, "every mode, and outbox executions settled both ways after their digest was written")

	// Every keyed row of the run names its transaction; the run's audit event keeps the key's
	// expiry; an outbox message names its execution's key.
	require.Zero(t, b.count(t, `SELECT count(*) FROM audit_event a JOIN idempotency_record k ON k.owner_id = a.owner_id AND k.idempotency_key = a.idempotency_key
		WHERE a.owner_id = 'alice' AND a.action NOT LIKE '%DELIVERED' AND a.action NOT LIKE '%FAILED'
			AND (a.written_xid IS DISTINCT FROM k.reserved_xid OR a.key_expires_at IS DISTINCT FROM k.expires_at)`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM commitment_review r JOIN idempotency_record k ON k.owner_id = r.owner_id AND k.idempotency_key = r.idempotency_key
		WHERE r.written_xid IS DISTINCT FROM k.reserved_xid`))
	require.Equal(t, 3, b.count(t, `SELECT count(*) FROM outbox_message m JOIN idempotency_record k ON k.owner_id = m.owner_id AND k.idempotency_key = m.idempotency_key
		WHERE m.written_xid = k.reserved_xid`))
}

// A replay checks the chain of what it returns: a revision edited with psql — an old one, or
// the latest together with the record row — fails closed naming the revision, and so does a
// snapshot read of it; an execution's edited output fails its feature's replay.
func TestAReplayOfAnEditedRevisionOrExecutionFailsClosedNamingIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	note := b.createNote(t, "alice", "n-create", "first")
	patch := model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, ExpectRevision: 1, Key: "n-patch", Title: str("second")}
	_, err := b.k.Patch(ctx, patch)
	require.NoError(t, err)

	// An old snapshot's payload, edited in place.
	b.exec(t, `UPDATE record_revision SET snapshot = jsonb_set(snapshot, '{payload,text}', '"HACKED"') WHERE record_id = $1 AND revision = 1`, note.Record.ID)
	ae := requireCode(t, b.replayNote("n-create", "first"), apperr.SnapshotIntegrity)
	require.Contains(t, ae.Message, "revision 1 of record "+note.Record.ID)
	require.Contains(t, ae.Message, "chain is broken at revision 1")
	_, err = b.k.FindRevision(ctx, store.RevisionRef{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, Revision: 1})
	requireCode(t, err, apperr.SnapshotIntegrity)

	// The latest snapshot and the record row, changed together (record_is_latest still holds).
	b.exec(t, `UPDATE record_revision SET snapshot = jsonb_set(snapshot, '{title}', '"HACKED"') WHERE record_id = $1 AND revision = 2`, note.Record.ID)
	b.exec(t, `UPDATE record SET title = 'HACKED' WHERE id = $1`, note.Record.ID)
	_, err = b.k.Patch(ctx, patch)
	ae = requireCode(t, err, apperr.SnapshotIntegrity)
	require.Contains(t, ae.Message, "revision 2 of record "+note.Record.ID)

	// An execution's output.
	mem := b.createMem(t, "alice", "m-create", "  a   b ")
	run := model.FeatureInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: mem.Record.ID, FeatureID: "F01", Key: "m-rewrite"}
	ran, err := b.k.RunFeature(ctx, run)
	require.NoError(t, err)
	b.exec(t, `UPDATE feature_execution SET output = '{"rewritten": "HACKED"}' WHERE id = $1`, ran.Execution.ID)
	_, err = b.k.RunFeature(ctx, run)
	ae = requireCode(t, err, apperr.SnapshotIntegrity)
	require.Contains(t, ae.Message, "execution "+ran.Execution.ID)

	// A digest removed is no way out.
	blocked := model.FeatureInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: mem.Record.ID, FeatureID: "F02", Key: "m-publish"}
	bl, err := b.k.RunFeature(ctx, blocked)
	require.NoError(t, err)
	b.exec(t, `UPDATE feature_execution SET digest = NULL WHERE id = $1`, bl.Execution.ID)
	_, err = b.k.RunFeature(ctx, blocked)
	ae = requireCode(t, err, apperr.SnapshotIntegrity)
	require.Contains(t, ae.Message, "carries no digest")
}

// The rows a key's result references were written under that key by the transaction that
// reserved it: an envelope redirected to another key's revision, a create's envelope pointed at a
// later revision, a ghost key holding a copy of another key's envelope — each replay fails
// closed, where before it served the other key's rows.
func TestAReplayServesOnlyRowsItsOwnKeyWrote(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	note := b.createNote(t, "alice", "c1", "one")
	for i, key := range []string{"p2", "p3", "p4"} {
		_, err := b.k.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, ExpectRevision: i + 1, Key: key, Title: str(key)})
		require.NoError(t, err)
	}
	replayPatch := func(key string, from int, title string) error {
		_, err := b.k.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, ExpectRevision: from, Key: key, Title: str(title)})
		return err
	}
	require.NoError(t, replayPatch("p2", 1, "p2"), "untampered, a replay restores")

	// p2's envelope redirected to revision 3, which p3 wrote.
	b.exec(t, `UPDATE idempotency_record SET response = jsonb_set(response, '{result,revision}', '3') WHERE idempotency_key = 'p2'`)
	ae := requireCode(t, replayPatch("p2", 1, "p2"), apperr.SnapshotIntegrity)
	require.Contains(t, ae.Message, `revision 3 of record `+note.Record.ID+`, written by key "p3", not by key "p2"`)

	// The create's envelope pointed at revision 4.
	b.exec(t, `UPDATE idempotency_record SET response = jsonb_set(response, '{result,revision}', '4') WHERE idempotency_key = 'c1'`)
	ae = requireCode(t, b.replayNote("c1", "one"), apperr.SnapshotIntegrity)
	require.Contains(t, ae.Message, `written by key "p4"`)

	// A ghost key holding a copy of p4's envelope (and its fingerprint and operation).
	b.exec(t, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
		SELECT owner_id, 'ghost', operation, fingerprint, status, response, now(), now() + interval '1 day', now() FROM idempotency_record WHERE idempotency_key = 'p4'`)
	ae = requireCode(t, replayPatch("ghost", 3, "p4"), apperr.SnapshotIntegrity)
	require.Contains(t, ae.Message, `written by key "p4", not by key "ghost"`)

	// The same key on a revision another transaction wrote: the key was reserved by one
	// transaction, the revision written by another.
	b.exec(t, `UPDATE idempotency_record SET reserved_xid = pg_current_xact_id() WHERE idempotency_key = 'p3'`)
	ae = requireCode(t, replayPatch("p3", 2, "p3"), apperr.SnapshotIntegrity)
	require.Contains(t, ae.Message, `but key "p3" was reserved by transaction`)

	// What the workbench shows as the response a retry gets agrees.
	for _, key := range []string{"p2", "c1", "ghost", "p3"} {
		v, err := inspect.Key(ctx, b.k, "alice", key)
		require.NoError(t, err)
		require.Equal(t, model.KeyFailsClosed, v.State, key)
		require.NotNil(t, v.Replay, key)
		require.Equal(t, 500, v.Replay.Status, key)
		require.Contains(t, v.Replay.Body, "SNAPSHOT_INTEGRITY_VIOLATION", key)
	}
	v, err := inspect.Key(ctx, b.k, "alice", "p4")
	require.NoError(t, err)
	require.Equal(t, model.KeySucceeded, v.State, "the key whose rows these are still replays")
	require.Equal(t, idemtype.Replayed, mustPatchOutcome(t, b, note.Record.ID, "p4", 3))
}

func mustPatchOutcome(t *testing.T, b *testBundle, recordID, key string, from int) idemtype.Outcome {
	t.Helper()
	res, err := b.k.Patch(context.Background(), model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: recordID, ExpectRevision: from, Key: key, Title: str(key)})
	require.NoError(t, err)
	return res.Outcome
}
