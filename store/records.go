package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/model"
)

// ErrNotFound is returned by Find* when no row matches.
var ErrNotFound = errors.New("not found")

// Repositories route every statement to the ambient transaction when ctx carries one. The
// writes of the commit unit are queued in a Batch (see TxBatch), each under its step.

const (
	insertRecordSQL = `INSERT INTO record (owner_id, id, module_code, revision, title, summary, payload, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	updateRecordGuardedSQL = `WITH u AS (
			UPDATE record SET revision = $4, title = $5, summary = $6, payload = $7, updated_at = $8
			WHERE owner_id = $1 AND module_code = $2 AND id = $3 AND revision = $9 RETURNING 1)
		SELECT 1 / count(*) FROM u`
)

// The INSERTs of the rows a keyed request writes are in attest.go, with the digests they compute.

// InsertRecord queues a new record row.
func (b *Batch) InsertRecord(step string, r model.Record) {
	b.queue(step, "insert record", nil, insertRecordSQL,
		[]any{r.OwnerID, r.ID, r.ModuleCode, r.Revision, r.Title, r.Summary, r.Payload, r.CreatedAt, r.UpdatedAt})
}

// UpdateRecordGuarded queues r as the next revision of its record if the stored revision is
// still fromRevision (optimistic lock); the transaction fails with conflict otherwise. The
// statement fails on the server itself when no row matched, so the COMMIT behind it never runs.
func (b *Batch) UpdateRecordGuarded(step string, r model.Record, fromRevision int, conflict error) {
	b.queue(step, "update record", conflict, updateRecordGuardedSQL,
		[]any{r.OwnerID, r.ModuleCode, r.ID, r.Revision, r.Title, r.Summary, r.Payload, r.UpdatedAt, fromRevision})
}

// InsertRevision queues an immutable revision whose snapshot is r as it is now.
func (b *Batch) InsertRevision(step string, r model.Record, key *string) {
	snap, err := AppendSnapshot(make([]byte, 0, snapshotSize(r)), r)
	if err != nil {
		if b.err == nil {
			b.err = &idem.StepError{Step: step, Err: fmt.Errorf("insert revision: %w", err)}
		}
		return
	}
	// json.RawMessage, not []byte: pgx's exec and simple_protocol modes send a []byte as bytea.
	b.queue(step, "insert revision", nil, insertRevisionSQL, []any{r.OwnerID, r.ID, r.Revision, json.RawMessage(snap), key, r.UpdatedAt})
}

// snapshotSize is about the length of r's snapshot: the room to write it in at once.
func snapshotSize(r model.Record) int {
	return 192 + len(r.ID) + len(r.OwnerID) + len(r.ModuleCode) + len(r.Title) + len(r.Summary) + len(r.Payload)
}

// InsertExecution queues a feature execution.
func (b *Batch) InsertExecution(step string, e model.Execution) {
	b.queue(step, "insert execution", nil, insertExecutionSQL,
		[]any{e.OwnerID, e.ID, e.ModuleCode, e.RecordID, e.FeatureID, e.Mode, e.Status, e.RecordRevision, e.Input, e.Output,
			e.IdempotencyKey, e.CreatedAt, e.UpdatedAt})
}

// InsertAudit queues an audit event.
func (b *Batch) InsertAudit(step string, a model.AuditEvent) {
	b.queue(step, "insert audit event", nil, insertAuditSQL, auditArgs(a))
}

// InsertAudit writes an audit event at once (in ctx's transaction when it carries one).
func (db *DB) InsertAudit(ctx context.Context, a model.AuditEvent) error {
	_, err := db.Q(ctx).Exec(ctx, insertAuditSQL, auditArgs(a)...)
	return stmtError("insert audit event", nil, err)
}

func auditArgs(a model.AuditEvent) []any {
	detail := a.Detail
	if detail == nil {
		detail = json.RawMessage(`{}`)
	}
	return []any{a.OwnerID, a.ID, a.ModuleCode, a.RecordID, a.Action, a.Revision, a.ExecutionID, a.IdempotencyKey, detail, a.At}
}

// InsertReview queues an immutable commitment review.
func (b *Batch) InsertReview(step string, r model.Review) {
	b.queue(step, "insert review", nil, insertReviewSQL,
		[]any{r.OwnerID, r.ID, r.ModuleCode, r.RecordID, r.RecordRevision, r.Verdict, r.Comment, r.IdempotencyKey, r.CreatedAt})
}

// InsertOutbox queues a message for the delivery worker.
func (b *Batch) InsertOutbox(step string, m model.OutboxMessage) {
	b.queue(step, "insert outbox message", nil, insertOutboxSQL,
		[]any{m.OwnerID, m.ID, m.ExecutionID, m.Provider, m.PayloadRef, m.IdempotencyID, m.Status, m.NextAttemptAt, m.CreatedAt, m.IdempotencyKey})
}

const (
	findRecordSQL     = `SELECT ` + RecordColumns + ` FROM record WHERE owner_id = $1 AND module_code = $2 AND id = $3`
	findRecordLockSQL = findRecordSQL + ` FOR NO KEY UPDATE`
)

func scanRecord(row pgx.Row) (model.Record, error) {
	var r model.Record
	err := row.Scan(&r.ID, &r.OwnerID, &r.ModuleCode, &r.Revision, &r.Title, &r.Summary, &r.Payload, &r.CreatedAt, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, ErrNotFound
	}
	return r, err
}

// RecordRef names one record: its owner, its module and its id. Named fields, not three
// positional strings a caller could swap without the compiler noticing.
type RecordRef struct {
	Owner, Module, ID string
}

// FindRecord reads the current row of the record ref names; lock takes a row lock (FOR NO KEY
// UPDATE) so concurrent features on one record serialise.
func (db *DB) FindRecord(ctx context.Context, ref RecordRef, lock bool) (model.Record, error) {
	q := findRecordSQL
	if lock {
		q = findRecordLockSQL
	}
	return scanRecord(db.Q(ctx).QueryRow(ctx, q, ref.Owner, ref.Module, ref.ID))
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

// revisionAttestColumns are a revision rv's Attestation columns.
const revisionAttestColumns = `rv.written_xid::text, rv.digest,
	(SELECT q.digest FROM record_revision q WHERE q.owner_id = rv.owner_id AND q.record_id = rv.record_id AND q.revision = rv.revision - 1)`

// executionAttestColumns are an execution e's Attestation columns.
const executionAttestColumns = `e.written_xid::text, e.digest,
	(SELECT v.digest FROM record_revision v WHERE v.owner_id = e.owner_id AND v.record_id = e.record_id AND v.revision = e.record_revision)`

// Dest appends where a row's attestation columns scan into to d.
func (a *Attestation) Dest(d []any) []any { return append(d, &a.XID, &a.Digest, &a.Prev) }

// RevisionRef names one revision: its owner, its record's module and id, and its number. Named
// fields, not three positional strings a caller could swap without the compiler noticing.
type RevisionRef struct {
	Owner, Module, RecordID string
	Revision                int
}

// FindRevision reads the revision ref names (joined to the parent, so another module's record is
// not found), with its attestation.
func (db *DB) FindRevision(ctx context.Context, ref RevisionRef) (RevisionWithParent, error) {
	var r RevisionWithParent
	err := db.Q(ctx).QueryRow(ctx, `SELECT rv.owner_id, rv.record_id, rv.revision, rv.snapshot, rv.idempotency_key, rv.created_at,
			p.owner_id, p.id, p.module_code, `+revisionAttestColumns+`
		FROM record_revision rv JOIN record p ON p.owner_id = rv.owner_id AND p.id = rv.record_id
		WHERE rv.owner_id = $1 AND rv.record_id = $2 AND rv.revision = $3 AND p.module_code = $4`,
		ref.Owner, ref.RecordID, ref.Revision, ref.Module).
		Scan(r.Attest.Dest([]any{&r.OwnerID, &r.RecordID, &r.Revision.Revision, &r.Snapshot, &r.IdempotencyKey, &r.CreatedAt, &r.ParentOwner, &r.ParentID, &r.ParentModule})...)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("find revision: %w", err)
	}
	return r, nil
}

// ExecutionRef names one feature execution: its owner, its record's module and id, and its own
// id. Named fields, not four positional strings a caller could swap without the compiler noticing.
type ExecutionRef struct {
	Owner, Module, RecordID, ID string
}

// FindExecution reads the execution ref names.
func (db *DB) FindExecution(ctx context.Context, ref ExecutionRef) (model.Execution, error) {
	return ScanExecution(db.Q(ctx).QueryRow(ctx, `SELECT `+ExecutionColumns+` FROM feature_execution
		WHERE owner_id = $1 AND module_code = $2 AND record_id = $3 AND id = $4`, ref.Owner, ref.Module, ref.RecordID, ref.ID))
}

// FindExecutionAttested is FindExecution with the execution's attestation.
func (db *DB) FindExecutionAttested(ctx context.Context, ref ExecutionRef) (model.Execution, Attestation, error) {
	var e model.Execution
	var a Attestation
	err := db.Q(ctx).QueryRow(ctx, `SELECT `+Prefixed("e.", ExecutionColumns)+`, `+executionAttestColumns+` FROM feature_execution e
		WHERE e.owner_id = $1 AND e.module_code = $2 AND e.record_id = $3 AND e.id = $4`, ref.Owner, ref.Module, ref.RecordID, ref.ID).
		Scan(a.Dest([]any{&e.ID, &e.OwnerID, &e.ModuleCode, &e.RecordID, &e.FeatureID, &e.Mode, &e.Status, &e.RecordRevision,
			&e.Input, &e.Output, &e.IdempotencyKey, &e.CreatedAt, &e.UpdatedAt})...)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, a, ErrNotFound
	}
	if err != nil {
		return e, a, fmt.Errorf("find execution: %w", err)
	}
	return e, a, nil
}

// ReviewRef names one review: its owner, its record's id and its own id.
type ReviewRef struct {
	Owner, RecordID, ID string
}

// FindReview reads the review ref names.
func (db *DB) FindReview(ctx context.Context, ref ReviewRef) (model.Review, error) {
	var r model.Review
	err := db.Q(ctx).QueryRow(ctx, `SELECT id, owner_id, module_code, record_id, record_revision, verdict, comment, idempotency_key, created_at
		FROM commitment_review WHERE owner_id = $1 AND record_id = $2 AND id = $3`, ref.Owner, ref.RecordID, ref.ID).
		Scan(&r.ID, &r.OwnerID, &r.ModuleCode, &r.RecordID, &r.RecordRevision, &r.Verdict, &r.Comment, &r.IdempotencyKey, &r.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, ErrNotFound
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
	db   *DB
	ref  RecordRef
	lock bool
	read bool // rec and err hold the read's result
	rec  model.Record
	err  error
}

// RecordAhead returns FindRecord(ref, lock) to send ahead.
func (db *DB) RecordAhead(ref RecordRef, lock bool) *RecordAhead {
	return &RecordAhead{db: db, ref: ref, lock: lock}
}

// recordHeldSQL is FindRecord's statement, run only while this transaction holds the key
// ($5, $4) it reserved: the key row's reserved_xid is this transaction's
// (pg_current_xact_id_if_assigned() is NULL in a transaction that has written nothing, so behind
// an INSERT that did nothing the EXISTS is false). The EXISTS is uncorrelated: the plan
// evaluates it once, before it scans the record, and scans nothing when it is false. Both
// tables are read by owner_id = $1 (the key's owner $5 must be the record's): one owner, one
// shard of a database distributed by owner (docs/scaling.md).
const recordHeldSQL = `SELECT ` + RecordColumns + ` FROM record WHERE owner_id = $1 AND module_code = $2 AND id = $3
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
	if err != nil && !errors.Is(err, ErrNotFound) {
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
	return r.db.FindRecord(ctx, r.ref, r.lock)
}
