package records

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/jackc/pgx/v5"
)

// The reads of single rows the kernel's write and replay paths make, in ctx's transaction.

const (
	findRecordSQL     = `SELECT ` + store.RecordColumns + ` FROM record WHERE owner_id = $1 AND module_code = $2 AND id = $3`
	findRecordLockSQL = findRecordSQL + ` FOR NO KEY UPDATE`
)

func scanRecord(row pgx.Row) (model.Record, error) {
	var r model.Record
	err := row.Scan(&r.ID, &r.OwnerID, &r.ModuleCode, &r.Revision, &r.Title, &r.Summary, &r.Payload, &r.CreatedAt, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, store.ErrNotFound
	}
	return r, err
}

// FindRecord reads the current row of the record ref names; lock takes a row lock (FOR NO KEY
// UPDATE) so concurrent features on one record serialise.
func FindRecord(ctx context.Context, db *store.DB, ref store.RecordRef, lock bool) (model.Record, error) {
	q := findRecordSQL
	if lock {
		q = findRecordLockSQL
	}
	return scanRecord(db.Q(ctx).QueryRow(ctx, q, ref.Owner, ref.Module, ref.ID))
}

// revisionAttestColumns are a revision rv's Attestation columns.
const revisionAttestColumns = `rv.written_xid::text, rv.digest,
	(SELECT q.digest FROM record_revision q WHERE q.owner_id = rv.owner_id AND q.record_id = rv.record_id AND q.revision = rv.revision - 1)`

// executionAttestColumns are an execution e's Attestation columns.
const executionAttestColumns = `e.written_xid::text, e.digest,
	(SELECT v.digest FROM record_revision v WHERE v.owner_id = e.owner_id AND v.record_id = e.record_id AND v.revision = e.record_revision)`

// FindRevision reads the revision ref names (joined to the parent, so another module's record is
// not found), with its attestation.
func FindRevision(ctx context.Context, db *store.DB, ref store.RevisionRef) (store.RevisionWithParent, error) {
	var r store.RevisionWithParent
	err := db.Q(ctx).QueryRow(ctx, `SELECT rv.owner_id, rv.record_id, rv.revision, rv.snapshot, rv.idempotency_key, rv.created_at,
			p.owner_id, p.id, p.module_code, `+revisionAttestColumns+`
		FROM record_revision rv JOIN record p ON p.owner_id = rv.owner_id AND p.id = rv.record_id
		WHERE rv.owner_id = $1 AND rv.record_id = $2 AND rv.revision = $3 AND p.module_code = $4`,
		ref.Owner, ref.RecordID, ref.Revision, ref.Module).
		Scan(r.Attest.Dest([]any{&r.OwnerID, &r.RecordID, &r.Revision.Revision, &r.Snapshot, &r.IdempotencyKey, &r.CreatedAt, &r.ParentOwner, &r.ParentID, &r.ParentModule})...)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, store.ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("find revision: %w", err)
	}
	return r, nil
}

// FindExecution reads the execution ref names.
func FindExecution(ctx context.Context, db *store.DB, ref store.ExecutionRef) (model.Execution, error) {
	return store.ScanExecution(db.Q(ctx).QueryRow(ctx, `SELECT `+store.ExecutionColumns+` FROM feature_execution
		WHERE owner_id = $1 AND module_code = $2 AND record_id = $3 AND id = $4`, ref.Owner, ref.Module, ref.RecordID, ref.ID))
}

// FindExecutionAttested is FindExecution with the execution's attestation.
func FindExecutionAttested(ctx context.Context, db *store.DB, ref store.ExecutionRef) (model.Execution, store.Attestation, error) {
	var e model.Execution
	var a store.Attestation
	err := db.Q(ctx).QueryRow(ctx, `SELECT `+store.Prefixed("e.", store.ExecutionColumns)+`, `+executionAttestColumns+` FROM feature_execution e
		WHERE e.owner_id = $1 AND e.module_code = $2 AND e.record_id = $3 AND e.id = $4`, ref.Owner, ref.Module, ref.RecordID, ref.ID).
		Scan(a.Dest([]any{&e.ID, &e.OwnerID, &e.ModuleCode, &e.RecordID, &e.FeatureID, &e.Mode, &e.Status, &e.RecordRevision,
			&e.Input, &e.Output, &e.IdempotencyKey, &e.CreatedAt, &e.UpdatedAt})...)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, a, store.ErrNotFound
	}
	if err != nil {
		return e, a, fmt.Errorf("find execution: %w", err)
	}
	return e, a, nil
}

// FindReview reads the review ref names.
func FindReview(ctx context.Context, db *store.DB, ref store.ReviewRef) (model.Review, error) {
	var r model.Review
	err := db.Q(ctx).QueryRow(ctx, `SELECT id, owner_id, module_code, record_id, record_revision, verdict, comment, idempotency_key, created_at
		FROM commitment_review WHERE owner_id = $1 AND record_id = $2 AND id = $3`, ref.Owner, ref.RecordID, ref.ID).
		Scan(&r.ID, &r.OwnerID, &r.ModuleCode, &r.RecordID, &r.RecordRevision, &r.Verdict, &r.Comment, &r.IdempotencyKey, &r.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, store.ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("find review: %w", err)
	}
	return r, nil
}

// RecordAhead is FindRecord queued ahead: the read of the current record a keyed write's
// prepare needs, which does not depend on the idempotency reservation, so the runner sends it in
// the reservation's round trip, right behind the INSERT (idem.Prefetch). There it is guarded on
// the server: it reads — and, with lock, locks — the record only in a transaction that holds the
// reservation it was queued for (the key row this transaction inserted); behind a reservation
// that lost, it reads nothing and locks nothing. Get returns what it read, or reads at once when
// it did not travel (no key, or a reservation won only on a later attempt without it).
type RecordAhead struct {
	db   *store.DB
	ref  store.RecordRef
	lock bool
	read bool // rec and err hold the read's result
	rec  model.Record
	err  error
}

// ReadAhead returns FindRecord(ref, lock) to send ahead.
func ReadAhead(db *store.DB, ref store.RecordRef, lock bool) *RecordAhead {
	return &RecordAhead{db: db, ref: ref, lock: lock}
}

// recordHeldSQL is FindRecord's statement, run only while this transaction holds the key
// ($5, $4) it reserved: the key row's reserved_xid is this transaction's
// (pg_current_xact_id_if_assigned() is NULL in a transaction that has written nothing, so behind
// an INSERT that did nothing the EXISTS is false). The EXISTS is uncorrelated: the plan
// evaluates it once, before it scans the record, and scans nothing when it is false. Both
// tables are read by owner_id = $1 (the key's owner $5 must be the record's): one owner, one
// shard of a database distributed by owner (docs/scaling.md).
const recordHeldSQL = `SELECT ` + store.RecordColumns + ` FROM record WHERE owner_id = $1 AND module_code = $2 AND id = $3
		AND EXISTS (SELECT 1 FROM idempotency_record WHERE owner_id = $1 AND $5 = $1 AND idempotency_key = $4
			AND reserved_xid = pg_current_xact_id_if_assigned())`

// recordHeldLockSQL is recordHeldSQL taking the row lock (a constant: not a string built, and
// hashed into the statement cache, anew on every feature run).
const recordHeldLockSQL = recordHeldSQL + ` FOR NO KEY UPDATE`

// QueueHeld queues the guarded read for the reservation of (owner, key) in b.
func (r *RecordAhead) QueueHeld(b *pgx.Batch, owner, key string) {
	sql := recordHeldSQL
	if r.lock {
		sql = recordHeldLockSQL
	}
	b.Queue(sql, r.ref.Owner, r.ref.Module, r.ref.ID, key, owner)
}

// TakeHeld reads the queued read's result from br; held says whether the reservation it was
// queued behind was won. Behind a lost one the (empty) result is dropped. Only a failure of the
// statement itself is an error.
func (r *RecordAhead) TakeHeld(br pgx.BatchResults, held bool) error {
	rec, err := scanRecord(br.QueryRow())
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("find record: %w", err)
	}
	if held {
		r.read, r.rec, r.err = true, rec, err
	}
	return nil
}

// Get is the record read ahead (ErrNotFound when there is none), or FindRecord's at once in ctx's
// transaction when the read did not travel.
func (r *RecordAhead) Get(ctx context.Context) (model.Record, error) {
	if r.read {
		return r.rec, r.err
	}
	return FindRecord(ctx, r.db, r.ref, r.lock)
}
