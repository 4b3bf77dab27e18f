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
	"bytes"
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
	sum := sha256.Sum256(appendRevision(make([]byte, 0, len(prev)+docRoom+len(snapshot)), prev, h, snapshot))
	return sum[:]
}

// RevisionHolds reports whether digest is Revision(prev, h, snapshot): what a replay checks,
// without allocating for a revision whose document fits a small stack buffer.
func RevisionHolds(digest, prev []byte, h Head, snapshot []byte) bool {
	var buf [stackDoc]byte
	sum := sha256.Sum256(appendRevision(buf[:0], prev, h, snapshot))
	return bytes.Equal(digest, sum[:])
}

// RevisionDocument is the canonical document a revision's digest hashes after its predecessor's.
func RevisionDocument(h Head, snapshot []byte) []byte {
	return appendRevision(make([]byte, 0, docRoom+len(snapshot)), nil, h, snapshot)
}

// OfExecution is the digest of an execution recorded at the revision whose digest is revision.
func OfExecution(revision []byte, h Head, e Execution) []byte {
	sum := sha256.Sum256(appendExecution(make([]byte, 0, len(revision)+docRoom+executionRoom(e)), revision, h, e))
	return sum[:]
}

// ExecutionHolds reports whether digest is OfExecution(revision, h, e), as RevisionHolds.
func ExecutionHolds(digest, revision []byte, h Head, e Execution) bool {
	var buf [stackDoc]byte
	sum := sha256.Sum256(appendExecution(buf[:0], revision, h, e))
	return bytes.Equal(digest, sum[:])
}

// ExecutionDocument is the canonical document an execution's digest hashes after its revision's.
func ExecutionDocument(h Head, e Execution) []byte {
	return appendExecution(make([]byte, 0, docRoom+executionRoom(e)), nil, h, e)
}

// The documents are written straight in jsonb's canonical text: members in jsonb's order
// (shorter names first, then bytewise), ": " after a name and ", " between members. What is
// hashed is prev ‖ document, appended into one buffer and hashed at once.
const (
	// docRoom is room for a document's head and punctuation besides its variable parts.
	docRoom = 256
	// stackDoc is the buffer a check hashes in without allocating; a longer document (a large
	// snapshot or execution output) grows it on the heap.
	stackDoc = 2048
)

func executionRoom(e Execution) int {
	return len(e.ID) + len(e.OwnerID) + len(e.ModuleCode) + len(e.RecordID) + len(e.FeatureID) + len(e.Mode) + len(e.Status) +
		len(e.Input) + len(e.Output) + 160
}

func appendRevision(dst, prev []byte, h Head, snapshot []byte) []byte {
	dst = h.appendOpen(append(dst, prev...))
	dst = append(dst, `, "snapshot": `...)
	return append(append(dst, snapshot...), '}')
}

func appendExecution(dst, prev []byte, h Head, e Execution) []byte {
	dst = h.appendOpen(append(dst, prev...))
	dst = append(dst, `, "execution": {"id": `...)
	dst = jsonb.AppendString(dst, e.ID)
	dst = jsonb.AppendString(append(dst, `, "mode": `...), e.Mode)
	dst = appendOrNull(append(dst, `, "input": `...), e.Input)
	dst = appendOrNull(append(dst, `, "output": `...), e.Output)
	dst = jsonb.AppendString(append(dst, `, "status": `...), WrittenStatus(e.Mode, e.Status))
	dst = jsonb.AppendString(append(dst, `, "ownerId": `...), e.OwnerID)
	dst = jsonb.AppendString(append(dst, `, "recordId": `...), e.RecordID)
	dst = jsonb.AppendString(append(dst, `, "featureId": `...), e.FeatureID)
	dst = jsonb.AppendString(append(dst, `, "moduleCode": `...), e.ModuleCode)
	dst = strconv.AppendInt(append(dst, `, "recordRevision": `...), int64(e.RecordRevision), 10)
	return append(dst, "}}"...)
}

// appendOpen appends the head's members, {"at": …, "key": …, "xid": …, without the body or the
// closing brace.
func (h Head) appendOpen(dst []byte) []byte {
	dst = append(dst, `{"at": `...)
	if h.At != nil {
		dst = strconv.AppendInt(dst, h.At.UnixMicro(), 10)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `, "key": `...)
	if h.Key != nil {
		dst = jsonb.AppendString(dst, *h.Key)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `, "xid": `...)
	if h.XID != nil {
		return jsonb.AppendString(dst, *h.XID)
	}
	return append(dst, "null"...)
}

func appendOrNull(dst, b []byte) []byte {
	if b == nil {
		return append(dst, "null"...)
	}
	return append(dst, b...)
}
