package kernel

import (
	"strconv"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/attest"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// The checks of what a replay and a snapshot read return beyond SPEC §6's (issue 22): a revision
// is the one its digest chain says was written (checkRevisionChain), an execution the one its
// digest says (checkExecutionDigest), and the rows a key's result references were written under
// that key by the transaction that reserved it (writtenBy). Each fails closed with
// SNAPSHOT_INTEGRITY_VIOLATION naming the row.

// revisionHead is what a revision's digest covers of the row besides its snapshot.
func revisionHead(r model.Revision, a store.Attestation) attest.Head {
	at := r.CreatedAt
	return attest.Head{At: &at, Key: r.IdempotencyKey, XID: a.XID}
}

// checkRevisionChain fails unless the revision carries the digest of its snapshot, its head and
// the digest of the revision before it.
func checkRevisionChain(row store.RevisionWithParent) error {
	if row.Attest.Digest == nil {
		return apperr.New(apperr.SnapshotIntegrity, "revision %d of record %s carries no digest: it was removed after the revision was written",
			row.Revision.Revision, row.RecordID)
	}
	if !attest.RevisionHolds(row.Attest.Digest, row.Attest.Prev, revisionHead(row.Revision, row.Attest), row.Snapshot) {
		return apperr.New(apperr.SnapshotIntegrity, "revision %d of record %s does not match its digest: the chain is broken at revision %d "+
			"(the revision, its key or time, or the digest of the revision before it was changed after it was written)",
			row.Revision.Revision, row.RecordID, row.Revision.Revision)
	}
	return nil
}

// executionOf is the part of e its digest covers.
func executionOf(e model.Execution) attest.Execution {
	return attest.Execution{ID: e.ID, OwnerID: e.OwnerID, ModuleCode: e.ModuleCode, RecordID: e.RecordID, FeatureID: e.FeatureID,
		Mode: e.Mode, Status: e.Status, RecordRevision: e.RecordRevision, Input: e.Input, Output: e.Output}
}

// checkExecutionDigest fails unless the execution carries the digest of what it was written
// with, chained on its revision's.
func checkExecutionDigest(e model.Execution, a store.Attestation) error {
	if a.Digest == nil {
		return apperr.New(apperr.SnapshotIntegrity, "execution %s of record %s carries no digest: it was removed after the execution was written",
			e.ID, e.RecordID)
	}
	at := e.CreatedAt
	if !attest.ExecutionHolds(a.Digest, a.Prev, attest.Head{At: &at, Key: e.IdempotencyKey, XID: a.XID}, executionOf(e)) {
		return apperr.New(apperr.SnapshotIntegrity, "execution %s of record %s (revision %d) does not match its digest: its output, input, "+
			"status as written, key or time, or its revision, was changed after it was written", e.ID, e.RecordID, e.RecordRevision)
	}
	return nil
}

// writer is the key whose result a restore reads, and the transaction that reserved it (nil:
// unknown): the rows the result references must have been written under it.
type writer struct {
	key string
	xid *string
}

// writtenBy fails unless a row (what names it: "revision 2 of record R") carrying key rowKey and
// transaction rowXID was written under w's key, and by w's transaction where both record one. A
// row older than migration 0004 records no transaction; it is then judged by its key alone.
func (w writer) writtenBy(what string, rowKey, rowXID *string) error {
	if w.key == "" {
		return nil
	}
	if rowKey == nil || *rowKey != w.key {
		by := "without a key"
		if rowKey != nil {
			by = "by key " + quoteKey(*rowKey)
		}
		return foreignRows{apperr.New(apperr.SnapshotIntegrity, "the envelope points at %s, written %s, not by key %s: it was moved to rows this key did not write",
			what, by, quoteKey(w.key))}
	}
	if w.xid != nil && rowXID != nil && *w.xid != *rowXID {
		return foreignRows{apperr.New(apperr.SnapshotIntegrity, "the envelope points at %s, written by transaction %s, but key %s was reserved by transaction %s: "+
			"it points at rows another request wrote", what, *rowXID, quoteKey(w.key), *w.xid)}
	}
	return nil
}

// foreignRows is the refusal of a result that references rows its key did not write (verify
// counts it as envelope_own_rows rather than envelope_restores).
type foreignRows struct{ error }

func (e foreignRows) Unwrap() error { return e.error }

// quoteKey shows a key in a message ("k7"), quoted with Go's rules (a planted key may hold
// anything).
func quoteKey(k string) string { return strconv.Quote(k) }
