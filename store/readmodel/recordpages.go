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

// GetRecordHead reads the record ref names and its latest revision, in one statement.
func GetRecordHead(ctx context.Context, db *store.DB, ref store.RecordRef) (RecordHead, error) {
	var row struct {
		model.Record
		Latest model.Revision `db:"latest"`
	}
	err := db.X.GetContext(ctx, &row, `SELECT r.id, r.owner_id, r.module_code, r.revision, r.title, r.summary, r.payload, r.created_at, r.updated_at,
			rv.owner_id AS "latest.owner_id", rv.record_id AS "latest.record_id", rv.revision AS "latest.revision",
			rv.snapshot AS "latest.snapshot", rv.idempotency_key AS "latest.idempotency_key", rv.created_at AS "latest.created_at"
		FROM record r JOIN record_revision rv ON rv.owner_id = r.owner_id AND rv.record_id = r.id AND rv.revision = r.revision
		WHERE r.owner_id = $1 AND r.module_code = $2 AND r.id = $3`, ref.Owner, ref.Module, ref.ID)
	if errors.Is(err, sql.ErrNoRows) {
		return RecordHead{}, recordNotFound(ref.Owner, ref.Module, ref.ID)
	}
	if err != nil {
		return RecordHead{}, fmt.Errorf("read record: %w", err)
	}
	return RecordHead{Record: row.Record, Latest: row.Latest}, nil
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
	q, args := `SELECT `+store.ExecutionColumns+` FROM feature_execution WHERE owner_id = $1 AND module_code = $2 AND record_id = $3`,
		[]any{p.Owner, p.Module, p.RecordID, p.Limit + 1}
	if p.After != nil {
		q, args = q+` AND (created_at, id) > ($5, $6)`, append(args, p.After.At, p.After.ID)
	}
	if err := db.X.SelectContext(ctx, &out, q+` ORDER BY created_at, id LIMIT $4`, args...); err != nil {
		return nil, false, fmt.Errorf("read executions: %w", err)
	}
	return pageOf(ctx, db, p, out)
}

// RecordAuditPage reads up to p.Limit audit events of the record after p.After, and whether
// more follow.
func RecordAuditPage(ctx context.Context, db *store.DB, p RecordPageParams) ([]model.AuditEvent, bool, error) {
	out := []model.AuditEvent{}
	q, args := `SELECT `+auditColumns+` FROM audit_event WHERE owner_id = $1 AND record_id = $2 AND module_code = $3`,
		[]any{p.Owner, p.RecordID, p.Module, p.Limit + 1}
	if p.After != nil {
		q, args = q+` AND (at, id) > ($5, $6)`, append(args, p.After.At, p.After.ID)
	}
	if err := db.X.SelectContext(ctx, &out, q+` ORDER BY at, id LIMIT $4`, args...); err != nil {
		return nil, false, fmt.Errorf("read audit: %w", err)
	}
	return pageOf(ctx, db, p, out)
}

// pageOf trims a Limit+1 result to Limit and says whether more follow. An empty page alone
// cannot tell a record without entries from no record at all: only then is the record looked
// up, so a missing one is RECORD_NOT_FOUND.
func pageOf[T any](ctx context.Context, db *store.DB, p RecordPageParams, rows []T) ([]T, bool, error) {
	if len(rows) > p.Limit {
		return rows[:p.Limit], true, nil
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
