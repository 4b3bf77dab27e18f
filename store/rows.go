package store

import (
	"errors"

	"github.com/idemwork/idemwork/model"
)

// The names of rows and what reads of them share, for every job of the store.

// ErrNotFound is returned by Find* when no row matches.
var ErrNotFound = errors.New("not found")

// RecordRef names one record: its owner, its module and its id. Named fields, not three
// positional strings a caller could swap without the compiler noticing.
type RecordRef struct {
	Owner, Module, ID string
}

// RevisionWithParent is a revision row joined with its parent record's module, with what its
// digest check needs (Attest).
type RevisionWithParent struct {
	model.Revision
	ParentModule string
	ParentID     string
	ParentOwner  string
	Attest       Attestation
}

// Attestation is what checking a row's digest (package attest) and its transaction needs beside
// the row itself.
type Attestation struct {
	// XID is the row's written_xid as text (nil: not recorded, a row older than migration 0004).
	XID *string
	// Digest is the row's digest (nil: it has none).
	Digest []byte
	// Prev is the digest the row's chains on: revision n-1's for revision n, its revision's for
	// an execution (nil: there is none, or that row has no digest).
	Prev []byte
}

// Dest appends where a row's attestation columns scan into to d.
func (a *Attestation) Dest(d []any) []any { return append(d, &a.XID, &a.Digest, &a.Prev) }

// RevisionRef names one revision: its owner, its record's module and id, and its number. Named
// fields, not three positional strings a caller could swap without the compiler noticing.
type RevisionRef struct {
	Owner, Module, RecordID string
	Revision                int
}

// ExecutionRef names one feature execution: its owner, its record's module and id, and its own
// id. Named fields, not four positional strings a caller could swap without the compiler noticing.
type ExecutionRef struct {
	Owner, Module, RecordID, ID string
}

// ReviewRef names one review: its owner, its record's id and its own id.
type ReviewRef struct {
	Owner, RecordID, ID string
}
