// Package attest defines the digests that make a record's history tamper-evident (issue 22):
// every revision carries sha256(the previous revision's digest ‖ its canonical document), every
// feature execution sha256(its revision's digest ‖ its canonical document). The kernel's writes
// compute them in their own SQL (package store, the same formula in SQL); a replay, a snapshot
// read and `idemwork verify` compute them again here, in Go, from what they read, and fail closed
// (or report) on a mismatch.
//
// "Canonical" is PostgreSQL's jsonb text rendering (package jsonb reproduces it byte for byte), so
// a document is hashed exactly as the server rendered it when it wrote the digest: the revision's
// {"at", "key", "xid", "snapshot"} and the execution's {"at", "key", "xid", "execution"}, where at
// is the row's time in microseconds since 1970 (null when it is not finite), key the idempotency
// key (null without one), xid the writing transaction (null for a row written before migration
// 0004) and the snapshot, input and output their stored jsonb text. The chain starts from the
// empty string at revision 1, and from the empty string again after a revision that has no digest.
//
// What this detects and what it cannot is in docs/reliability.md ("Tamper-evident history"): a
// row edited, moved, copied or attributed to another key or transaction; not someone who rewrites
// every digest from the edited revision on, for the formula is public and holds no secret.
package attest

import (
	"crypto/sha256"
	"strconv"
	"time"

	"github.com/idemwork/idemwork/jsonb"
)

// Size is a digest's length in bytes.
const Size = sha256.Size

// Head is what a digest covers of a row besides its content: when it was written, under which
// key and by which transaction.
type Head struct {
	// At is the row's created_at; nil when it is not finite (PostgreSQL's ±infinity).
	At *time.Time
	// Key is the row's idempotency_key (nil: none).
	Key *string
	// XID is the row's written_xid as text (nil: not recorded).
	XID *string
}

// Execution is the part of a feature execution its digest covers: everything but its status's
// later changes (an outbox execution is written PENDING and settled later) and updated_at.
type Execution struct {
	ID, OwnerID, ModuleCode, RecordID, FeatureID, Mode string
	// Status is the status the row holds; WrittenStatus makes it the one it was written with.
	Status         string
	RecordRevision int
	// Input and Output are the stored jsonb texts.
	Input, Output []byte
}

// WrittenStatus is the status an execution of mode was written with: an outbox execution is
// written PENDING and settled later by the worker; every other mode is final when written.
func WrittenStatus(mode, status string) string {
	if mode == "outbox" {
		return "PENDING"
	}
	return status
}

// Revision is the digest of a revision whose predecessor's digest is prev (nil or empty for
// revision 1, or after a revision without one) and whose snapshot is the stored jsonb text.
func Revision(prev []byte, h Head, snapshot []byte) []byte {
	return sum(prev, RevisionDocument(h, snapshot))
}

// RevisionDocument is the canonical document a revision's digest hashes after its predecessor's.
func RevisionDocument(h Head, snapshot []byte) []byte {
	return h.document(jsonb.Member{Name: "snapshot", Value: snapshot})
}

// OfExecution is the digest of an execution recorded at the revision whose digest is revision.
func OfExecution(revision []byte, h Head, e Execution) []byte {
	return sum(revision, ExecutionDocument(h, e))
}

// ExecutionDocument is the canonical document an execution's digest hashes after its revision's.
func ExecutionDocument(h Head, e Execution) []byte {
	str := func(s string) []byte { return jsonb.AppendString(nil, s) }
	inner := jsonb.AppendObject(nil,
		jsonb.Member{Name: "id", Value: str(e.ID)},
		jsonb.Member{Name: "ownerId", Value: str(e.OwnerID)},
		jsonb.Member{Name: "moduleCode", Value: str(e.ModuleCode)},
		jsonb.Member{Name: "recordId", Value: str(e.RecordID)},
		jsonb.Member{Name: "featureId", Value: str(e.FeatureID)},
		jsonb.Member{Name: "mode", Value: str(e.Mode)},
		jsonb.Member{Name: "status", Value: str(WrittenStatus(e.Mode, e.Status))},
		jsonb.Member{Name: "recordRevision", Value: strconv.AppendInt(nil, int64(e.RecordRevision), 10)},
		jsonb.Member{Name: "input", Value: orNull(e.Input)},
		jsonb.Member{Name: "output", Value: orNull(e.Output)})
	return h.document(jsonb.Member{Name: "execution", Value: inner})
}

func (h Head) document(body jsonb.Member) []byte {
	null := []byte("null")
	at, key, xid := null, null, null
	if h.At != nil {
		at = strconv.AppendInt(nil, h.At.UnixMicro(), 10)
	}
	if h.Key != nil {
		key = jsonb.AppendString(nil, *h.Key)
	}
	if h.XID != nil {
		xid = jsonb.AppendString(nil, *h.XID)
	}
	return jsonb.AppendObject(make([]byte, 0, 64+len(body.Value)),
		jsonb.Member{Name: "at", Value: at}, jsonb.Member{Name: "key", Value: key}, jsonb.Member{Name: "xid", Value: xid}, body)
}

func orNull(b []byte) []byte {
	if b == nil {
		return []byte("null")
	}
	return b
}

func sum(prev, doc []byte) []byte {
	h := sha256.New()
	h.Write(prev)
	h.Write(doc)
	return h.Sum(nil)
}
