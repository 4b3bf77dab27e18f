package readmodel

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// One record's history a page at a time, for GET …/records/{id} and its /revisions,
// /executions and /audit routes: each route runs its own statement and nothing else, and no
// answer grows with the record's history (a record's 61 revisions once made every GET of it
// 3.79 MB).

// Page sizes of a record's lists.
const (
	// DefaultRecordPage is a page's size when the request names none.
	DefaultRecordPage = 50
	// MaxRevisionPage bounds a page of revisions (each up to 64 KiB of snapshot).
	MaxRevisionPage = 100
	// MaxRecordPage bounds a page of executions or audit events.
	MaxRecordPage = 500
)

// RecordHead is a record with its latest revision.
type RecordHead struct {
	Record model.Record
	Latest model.Revision
}

// recordHeadSQL reads a record ($1 owner, $2 module, $3 id) and its latest revision.
const recordHeadSQL = `SELECT r.id, r.owner_id, r.module_code, r.revision, r.title, r.summary, r.payload, r.created_at, r.updated_at,
			rv.owner_id AS "latest.owner_id", rv.record_id AS "latest.record_id", rv.revision AS "latest.revision",
			rv.snapshot AS "latest.snapshot", rv.idempotency_key AS "latest.idempotency_key", rv.created_at AS "latest.created_at"
		FROM record r JOIN record_revision rv ON rv.owner_id = r.owner_id AND rv.record_id = r.id AND rv.revision = r.revision
		WHERE r.owner_id = $1 AND r.module_code = $2 AND r.id = $3`

// headRow is recordHeadSQL's row as sqlx maps it.
type headRow struct {
	model.Record
	Latest model.Revision `db:"latest"`
}

// GetRecordHead reads the record ref names and its latest revision, in one statement.
func GetRecordHead(ctx context.Context, db *store.DB, ref store.RecordRef) (RecordHead, error) {
	var row headRow
	err := db.X.GetContext(ctx, &row, recordHeadSQL, ref.Owner, ref.Module, ref.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return RecordHead{}, recordNotFound(ref.Owner, ref.Module, ref.ID)
	}
	if err != nil {
		return RecordHead{}, fmt.Errorf("read record: %w", err)
	}
	return RecordHead{Record: row.Record, Latest: row.Latest}, nil
}

// RecordFirstPages is what GET of a record answers: the record, its latest revision, and the
// first page of its executions and of its audit events.
type RecordFirstPages struct {
	RecordHead
	Executions     []model.Execution
	MoreExecutions bool
	Audit          []model.AuditEvent
	MoreAudit      bool
}

// GetRecordFirstPages reads the record p names, its latest revision and the first p.Limit of its
// executions and audit events in one round trip: the three statements travel as one batch in one
// transaction, where one after another took three (each a transaction of its own). Every other
// owner's GET waits behind a read flood once per round trip; so does this one.
func GetRecordFirstPages(ctx context.Context, db *store.DB, p RecordPageParams) (RecordFirstPages, error) {
	p.After = nil
	var b pgx.Batch
	b.Queue(recordHeadSQL, p.Owner, p.Module, p.RecordID)
	q, args := executionPageSQL(p)
	b.Queue(q, args...)
	q, args = auditPageSQL(p)
	b.Queue(q, args...)
	br := db.Q(ctx).SendBatch(ctx, &b)
	out, err := readFirstPages(br, p)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("read record: %w", cerr)
	}
	if err != nil {
		return RecordFirstPages{}, err
	}
	return out, nil
}

// readFirstPages reads GetRecordFirstPages' three answers in their order.
func readFirstPages(br pgx.BatchResults, p RecordPageParams) (RecordFirstPages, error) {
	var out RecordFirstPages
	heads := []headRow{}
	if err := scanAll(br, &heads, 1); err != nil {
		return out, fmt.Errorf("read record: %w", err)
	}
	if len(heads) == 0 {
		return out, recordNotFound(p.Owner, p.Module, p.RecordID)
	}
	out.RecordHead = RecordHead{Record: heads[0].Record, Latest: heads[0].Latest}
	out.Executions, out.Audit = []model.Execution{}, []model.AuditEvent{}
	if err := scanAll(br, &out.Executions, 0); err != nil {
		return out, fmt.Errorf("read executions: %w", err)
	}
	if err := scanAll(br, &out.Audit, 0); err != nil {
		return out, fmt.Errorf("read audit: %w", err)
	}
	out.Executions, out.MoreExecutions = trimPage(out.Executions, p.Limit)
	out.Audit, out.MoreAudit = trimPage(out.Audit, p.Limit)
	return out, nil
}

// scanAll maps the batch's next answer's rows (at most limit when > 0) into dest, a pointer to
// a slice, by their db tags.
func scanAll(br pgx.BatchResults, dest any, limit int) error {
	rows, err := br.Query()
	if err != nil {
		rows.Close()
		return err
	}
	return store.ScanStructs(rows, dest, limit)
}

// trimPage trims a Limit+1 result to limit and says whether more follow.
func trimPage[T any](rows []T, limit int) ([]T, bool) {
	if len(rows) > limit {
		return rows[:limit], true
	}
	return rows, false
}

func recordNotFound(owner, module, id string) error {
	return apperr.New(apperr.RecordNotFound, "owner %s has no %s record %s", owner, module, id)
}

// RecordPageParams selects a page of one record's list, oldest first.
type RecordPageParams struct {
	Owner, Module, RecordID string
	// Limit is the page's size (the caller checks it against the list's maximum).
	Limit int
	// AfterRevision continues a page of revisions after that revision (0: from the first).
	AfterRevision int
	// After continues a page of executions or audit events after the entry a cursor names
	// (nil: from the first).
	After *Cursor
	// Exists says the record is known to exist (read in the same request): an empty page then
	// needs no second look.
	Exists bool
}

// RecordRevisionPage reads up to p.Limit revisions after p.AfterRevision, and whether more follow.
func RecordRevisionPage(ctx context.Context, db *store.DB, p RecordPageParams) ([]model.Revision, bool, error) {
	out := []model.Revision{}
	if err := db.X.SelectContext(ctx, &out, `SELECT rv.owner_id, rv.record_id, rv.revision, rv.snapshot, rv.idempotency_key, rv.created_at
		FROM record r JOIN record_revision rv ON rv.owner_id = r.owner_id AND rv.record_id = r.id
		WHERE r.owner_id = $1 AND r.module_code = $2 AND r.id = $3 AND rv.revision > $4
		ORDER BY rv.revision LIMIT $5`, p.Owner, p.Module, p.RecordID, p.AfterRevision, p.Limit+1); err != nil {
		return nil, false, fmt.Errorf("read revisions: %w", err)
	}
	return pageOf(ctx, db, p, out)
}

// RecordExecutionPage reads up to p.Limit executions of the record after p.After, and whether more
// follow.
func RecordExecutionPage(ctx context.Context, db *store.DB, p RecordPageParams) ([]model.Execution, bool, error) {
	out := []model.Execution{}
	q, args := executionPageSQL(p)
	if err := db.X.SelectContext(ctx, &out, q, args...); err != nil {
		return nil, false, fmt.Errorf("read executions: %w", err)
	}
	return pageOf(ctx, db, p, out)
}

// executionPageSQL is the statement of a page of p's executions (one more than p.Limit).
func executionPageSQL(p RecordPageParams) (string, []any) {
	q, args := `SELECT `+store.ExecutionColumns+` FROM feature_execution WHERE owner_id = $1 AND module_code = $2 AND record_id = $3`,
		[]any{p.Owner, p.Module, p.RecordID, p.Limit + 1}
	if p.After != nil {
		q, args = q+` AND (created_at, id) > ($5, $6)`, append(args, p.After.At, p.After.ID)
	}
	return q + ` ORDER BY created_at, id LIMIT $4`, args
}

// RecordAuditPage reads up to p.Limit audit events of the record after p.After, and whether
// more follow.
func RecordAuditPage(ctx context.Context, db *store.DB, p RecordPageParams) ([]model.AuditEvent, bool, error) {
	out := []model.AuditEvent{}
	q, args := auditPageSQL(p)
	if err := db.X.SelectContext(ctx, &out, q, args...); err != nil {
		return nil, false, fmt.Errorf("read audit: %w", err)
	}
	return pageOf(ctx, db, p, out)
}

// auditPageSQL is the statement of a page of p's audit events (one more than p.Limit).
func auditPageSQL(p RecordPageParams) (string, []any) {
	q, args := `SELECT `+auditColumns+` FROM audit_event WHERE owner_id = $1 AND record_id = $2 AND module_code = $3`,
		[]any{p.Owner, p.RecordID, p.Module, p.Limit + 1}
	if p.After != nil {
		q, args = q+` AND (at, id) > ($5, $6)`, append(args, p.After.At, p.After.ID)
	}
	return q + ` ORDER BY at, id LIMIT $4`, args
}

// pageOf trims a Limit+1 result to Limit and says whether more follow. An empty page alone
// cannot tell a record without entries from no record at all: only then is the record looked
// up, so a missing one is RECORD_NOT_FOUND.
func pageOf[T any](ctx context.Context, db *store.DB, p RecordPageParams, rows []T) ([]T, bool, error) {
	if rows, more := trimPage(rows, p.Limit); more {
		return rows, true, nil
	}
	if len(rows) == 0 && !p.Exists {
		var one int
		err := db.Q(ctx).QueryRow(ctx, `SELECT 1 FROM record WHERE owner_id = $1 AND module_code = $2 AND id = $3`, p.Owner, p.Module, p.RecordID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, recordNotFound(p.Owner, p.Module, p.RecordID)
		}
		if err != nil {
			return nil, false, fmt.Errorf("read record: %w", err)
		}
	}
	return rows, false, nil
}
