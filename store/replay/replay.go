package replay

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// A replay in one round trip: the key row of (owner, key) and the rows its stored result
// references, read by one statement. The statements only read; every check of what they return
// stays with the result policy (package kernel), which falls back to its own reads whenever a
// row is absent or does not match the stored result.

// RevisionReplay is a key row and the revision its stored result references, with the
// revision's parent record.
type RevisionReplay struct {
	Key idem.StoredKey
	// KeyXID is the transaction that reserved the key (reserved_xid as text): the rows the key's
	// result references were written by it, where they record their transaction.
	KeyXID *string
	// Revision is nil when the statement found none it could read whole: none
	// (RevisionUnreadable false: the reference does not resolve), or one with a column a Go
	// value cannot hold, like an infinite timestamp (RevisionUnreadable true).
	Revision           *store.RevisionWithParent
	RevisionUnreadable bool
}

// ExecutionReplay is a RevisionReplay and the feature execution the result references.
type ExecutionReplay struct {
	RevisionReplay
	// Execution is nil as Revision is, ExecutionUnreadable as RevisionUnreadable.
	Execution           *model.Execution
	ExecutionUnreadable bool
	// ExecutionAttest is the execution's attestation (when Execution is not nil).
	ExecutionAttest store.Attestation
}

// Statement is the one statement of a replay, built once for where the references are.
type Statement struct {
	sql       string
	execution bool
}

// RevisionStatement is the statement reading a key row and the revision (with its parent
// record) its result references at refs.RecordID and refs.Revision.
func RevisionStatement(refs store.ReplayRefs) Statement {
	return Statement{sql: `SELECT ` + replayKeyColumns + `, ` + RevisionColumns + ` FROM idempotency_record k ` +
		replayRevisionJoin(refs) + replayWhere}
}

// ExecutionStatement is RevisionStatement with the feature execution the result
// references at refs.ExecutionID.
func ExecutionStatement(refs store.ReplayRefs) Statement {
	return Statement{execution: true, sql: `SELECT ` + replayKeyColumns + `, ` + RevisionColumns + `, ` + ExecutionColumns +
		` FROM idempotency_record k ` + replayRevisionJoin(refs) + replayExecutionJoin(refs) + replayWhere}
}

// SQL is the statement's text (its parameters are ReplayParams in order: owner, key, module).
func (s Statement) SQL() string { return s.sql }

// Each referenced row is read by a LATERAL subquery kept apart from the join tree (OFFSET 0): it
// runs once for the key row with the columns of a unique key bound by equality. Flattened into
// one join, a generic plan cached while the tables were small read the parent through the
// (owner_id, module_code) prefix and filtered on id: a scan of all the owner's records of that
// module on every replay, until the next ANALYZE replanned it. (With tiny statistics the
// execution may still be found through its record's index, (owner_id, record_id): a scan of
// one record's executions at worst.) The joins never fail on a malformed stored result: they
// simply find nothing.
const (
	replayKeyColumns = `k.operation, k.fingerprint, k.status, k.response, k.expires_at, k.reserved_xid::text`
	RevisionColumns  = `pf_rv.owner_id, pf_rv.record_id, pf_rv.revision, pf_rv.snapshot, pf_rv.idempotency_key, pf_rv.created_at,
		pf_rv.parent_owner, pf_rv.parent_id, pf_rv.parent_module, pf_rv.xid, pf_rv.digest, pf_rv.prev_digest`
	ExecutionColumns = `pf_e.id, pf_e.owner_id, pf_e.module_code, pf_e.record_id, pf_e.feature_id, pf_e.mode, pf_e.status,
		pf_e.record_revision, pf_e.input, pf_e.output, pf_e.idempotency_key, pf_e.created_at, pf_e.updated_at,
		pf_e.xid, pf_e.digest, pf_e.revision_digest`
	replayWhere = ` WHERE k.owner_id = $1 AND k.idempotency_key = $2`
)

func replayRevisionJoin(refs store.ReplayRefs) string {
	return ` LEFT JOIN LATERAL (SELECT rv.owner_id, rv.record_id, rv.revision, rv.snapshot, rv.idempotency_key, rv.created_at,
				p.owner_id AS parent_owner, p.id AS parent_id, p.module_code AS parent_module,
				rv.written_xid::text AS xid, rv.digest, (SELECT q.digest FROM record_revision q
					WHERE q.owner_id = rv.owner_id AND q.record_id = rv.record_id AND q.revision = rv.revision - 1) AS prev_digest
			FROM record_revision rv JOIN record p ON p.owner_id = rv.owner_id AND p.id = rv.record_id AND p.module_code = $3
			WHERE rv.owner_id = k.owner_id AND rv.record_id = ` + store.RefText(refs.RecordID) + ` AND rv.revision = ` + store.RefInt(refs.Revision) + `
			OFFSET 0) pf_rv ON true`
}

func replayExecutionJoin(refs store.ReplayRefs) string {
	return ` LEFT JOIN LATERAL (SELECT e.id, e.owner_id, e.module_code, e.record_id, e.feature_id, e.mode, e.status,
				e.record_revision, e.input, e.output, e.idempotency_key, e.created_at, e.updated_at,
				e.written_xid::text AS xid, e.digest, (SELECT v.digest FROM record_revision v
					WHERE v.owner_id = e.owner_id AND v.record_id = e.record_id AND v.revision = e.record_revision) AS revision_digest
			FROM feature_execution e
			WHERE e.owner_id = k.owner_id AND e.id = ` + store.RefText(refs.ExecutionID) + ` AND e.module_code = $3
				AND e.record_id = ` + store.RefText(refs.RecordID) + `
			OFFSET 0) pf_e ON true`
}

// ReadRevision reads the key row of p and the revision its result references, on q (the runner's
// connection or transaction). found is false when the key has no row.
func (s Statement) ReadRevision(ctx context.Context, q store.Querier, p idem.ReplayParams) (r RevisionReplay, found bool, err error) {
	if s.execution {
		panic("store: ReadRevision of an execution replay")
	}
	var rv RevisionRow
	var keyXID pgtype.Text
	dest := make([]any, 0, 6+12)
	dest = append(append(keyDest(&r.Key, dest), &keyXID), rv.Dest()...)
	if err := q.QueryRow(ctx, s.sql, p.Owner, p.Key, p.Module).Scan(dest...); err != nil {
		return r, false, replayError(err)
	}
	rv.once = true
	r.Revision, r.KeyXID = rv.Revision(), textRef(&keyXID)
	r.RevisionUnreadable = r.Revision == nil && rv.ownerID.Valid
	return r, true, nil
}

// ReadExecution reads the key row of p, the revision and the execution its result references,
// on q. found is false when the key has no row.
func (s Statement) ReadExecution(ctx context.Context, q store.Querier, p idem.ReplayParams) (r ExecutionReplay, found bool, err error) {
	if !s.execution {
		panic("store: ReadExecution of a revision replay")
	}
	return ScanExecution(q.QueryRow(ctx, s.sql, p.Owner, p.Key, p.Module))
}

// ScanExecution reads the row of an ExecutionStatement from row: what a replay
// reads, decoded and unchecked (the bench's limit reads a replay's row with it).
func ScanExecution(row pgx.Row) (r ExecutionReplay, found bool, err error) {
	var rv RevisionRow
	var e ExecutionRow
	var keyXID pgtype.Text
	dest := make([]any, 0, 6+12+16)
	dest = append(append(append(keyDest(&r.Key, dest), &keyXID), rv.Dest()...), e.Dest()...)
	if err := row.Scan(dest...); err != nil {
		return r, false, replayError(err)
	}
	rv.once, e.once = true, true
	r.Revision, r.Execution, r.KeyXID = rv.Revision(), e.Execution(), textRef(&keyXID)
	r.RevisionUnreadable, r.ExecutionUnreadable = r.Revision == nil && rv.ownerID.Valid, r.Execution == nil && e.id.Valid
	r.ExecutionAttest = store.Attestation{XID: textRef(&e.xid), Digest: e.digest, Prev: e.revisionDigest}
	return r, true, nil
}

func replayError(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return fmt.Errorf("read key: %w", err)
}

func keyDest(k *idem.StoredKey, d []any) []any {
	return append(d, &k.Operation, &k.Fingerprint, &k.Status, &k.Response, &k.ExpiresAt)
}

// RevisionRow receives the revision and its parent (all NULL when the join found none).
// pgtype values, not pointers: pgx scans them without reflection or a pointer allocation.
type RevisionRow struct {
	ownerID, recordID           pgtype.Text
	revisionNo                  pgtype.Int4
	snapshot                    []byte
	key                         pgtype.Text
	createdAt                   pgtype.Timestamptz
	parentOwner, parentID, pMod pgtype.Text
	xid                         pgtype.Text
	digest, prevDigest          []byte
	// once: this row receives one row only, so what it returns may point into it (a scanner
	// that reuses it across rows copies instead).
	once bool
}

func (r *RevisionRow) Dest() []any {
	return []any{&r.ownerID, &r.recordID, &r.revisionNo, &r.snapshot, &r.key, &r.createdAt, &r.parentOwner, &r.parentID, &r.pMod,
		&r.xid, &r.digest, &r.prevDigest}
}

// Revision is the row read, or nil when there is none whole.
func (r *RevisionRow) Revision() *store.RevisionWithParent {
	if !r.ownerID.Valid || !r.recordID.Valid || !r.revisionNo.Valid || !r.createdAt.Valid ||
		!r.parentOwner.Valid || !r.parentID.Valid || !r.pMod.Valid || r.createdAt.InfinityModifier != pgtype.Finite {
		return nil
	}
	return &store.RevisionWithParent{
		Revision: model.Revision{OwnerID: r.ownerID.String, RecordID: r.recordID.String, Revision: int(r.revisionNo.Int32), Snapshot: r.snapshot,
			IdempotencyKey: r.text(&r.key), CreatedAt: r.createdAt.Time},
		ParentOwner: r.parentOwner.String, ParentID: r.parentID.String, ParentModule: r.pMod.String,
		Attest: store.Attestation{XID: r.text(&r.xid), Digest: r.digest, Prev: r.prevDigest}}
}

type ExecutionRow struct {
	id, ownerID, module, recordID, featureID, mode, status pgtype.Text
	recordRevision                                         pgtype.Int4
	input, output                                          []byte
	key                                                    pgtype.Text
	createdAt, updatedAt                                   pgtype.Timestamptz
	xid                                                    pgtype.Text
	digest, revisionDigest                                 []byte
	once                                                   bool // as RevisionRow's
}

func (e *ExecutionRow) Dest() []any {
	return []any{&e.id, &e.ownerID, &e.module, &e.recordID, &e.featureID, &e.mode, &e.status, &e.recordRevision,
		&e.input, &e.output, &e.key, &e.createdAt, &e.updatedAt, &e.xid, &e.digest, &e.revisionDigest}
}

// Execution is the row read, or nil when there is none whole.
func (e *ExecutionRow) Execution() *model.Execution {
	if !e.id.Valid || !e.ownerID.Valid || !e.module.Valid || !e.recordID.Valid || !e.featureID.Valid || !e.mode.Valid ||
		!e.status.Valid || !e.recordRevision.Valid || !e.createdAt.Valid || !e.updatedAt.Valid ||
		e.createdAt.InfinityModifier != pgtype.Finite || e.updatedAt.InfinityModifier != pgtype.Finite {
		return nil
	}
	return &model.Execution{ID: e.id.String, OwnerID: e.ownerID.String, ModuleCode: e.module.String, RecordID: e.recordID.String,
		FeatureID: e.featureID.String, Mode: e.mode.String, Status: e.status.String, RecordRevision: int(e.recordRevision.Int32),
		Input: e.input, Output: e.output, IdempotencyKey: e.text(&e.key), CreatedAt: e.createdAt.Time, UpdatedAt: e.updatedAt.Time}
}

// Attest is the execution's attestation as the row read it, copied out of the row.
func (e *ExecutionRow) Attest() store.Attestation {
	return store.Attestation{XID: store.TextPtr(e.xid), Digest: e.digest, Prev: e.revisionDigest}
}

func (r *RevisionRow) text(t *pgtype.Text) *string {
	if r.once {
		return textRef(t)
	}
	return store.TextPtr(*t)
}

func (e *ExecutionRow) text(t *pgtype.Text) *string {
	if e.once {
		return textRef(t)
	}
	return store.TextPtr(*t)
}

// textRef is t's string, pointing into t (nil when NULL): no copy, for a t that is not reused.
func textRef(t *pgtype.Text) *string {
	if !t.Valid {
		return nil
	}
	return &t.String
}
