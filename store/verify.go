package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Reads of idemwork verify: every table in keyset pages by its primary key (a page is one
// index range scan, so a database of any size is read in bounded memory), optionally for one
// owner, inside one read-only snapshot (ReadSnapshot) so the checks see one consistent state.

// ReadSnapshot runs fn in a read-only REPEATABLE READ transaction carried by the context fn
// receives: every statement through db.Q(ctx) — the kernel's restores included — reads the
// same snapshot, and the server refuses any write. It works on a read-only session too.
func (db *DB) ReadSnapshot(ctx context.Context, fn func(ctx context.Context) error) error {
	if a, ok := ctx.Value(ambientKey{}).(*ambient); ok && a.db == db {
		return fn(ctx)
	}
	conn, err := db.acquire(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer conn.Release()
	err = db.sendBegin(ctx, conn, beginSnapshot)
	a := &ambient{db: db, conn: conn, begun: true}
	if err != nil {
		a.rollback(context.WithoutCancel(ctx))
		return fmt.Errorf("begin a read-only snapshot: %w", db.translate(err))
	}
	err = fn(context.WithValue(ctx, ambientKey{}, a))
	// Nothing to commit: the transaction only read.
	a.rollback(context.WithoutCancel(ctx))
	return db.translate(err)
}

// VerifyCursor is where a page starts: after (Owner, ID, Rev) in the table's key order (Rev
// is used by revisions only). The zero cursor starts at the beginning.
type VerifyCursor struct {
	Owner string
	ID    string
	Rev   int
}

// VerifyPage selects one page: Owner limits it to one owner ("" for every owner).
type VerifyPage struct {
	Owner string
	After VerifyCursor
	Limit int
}

// keyset returns the WHERE clause of a page over (owner_id, idCol[, revCol]) aliased alias,
// and its arguments.
func (p VerifyPage) keyset(alias, idCol, revCol string) (string, []any) {
	if revCol == "" {
		if p.Owner != "" {
			return fmt.Sprintf(`%[1]s.owner_id = $1 AND %[1]s.%[2]s > $2`, alias, idCol), []any{p.Owner, p.After.ID}
		}
		return fmt.Sprintf(`(%[1]s.owner_id, %[1]s.%[2]s) > ($1, $2)`, alias, idCol), []any{p.After.Owner, p.After.ID}
	}
	if p.Owner != "" {
		return fmt.Sprintf(`%[1]s.owner_id = $1 AND (%[1]s.%[2]s, %[1]s.%[3]s) > ($2, $3)`, alias, idCol, revCol), []any{p.Owner, p.After.ID, p.After.Rev}
	}
	return fmt.Sprintf(`(%[1]s.owner_id, %[1]s.%[2]s, %[1]s.%[3]s) > ($1, $2, $3)`, alias, idCol, revCol), []any{p.After.Owner, p.After.ID, p.After.Rev}
}

func (p VerifyPage) query(ctx context.Context, db *DB, sql string, args []any) (pgx.Rows, error) {
	return db.Q(ctx).Query(ctx, sql, append(args, p.Limit)...)
}

// VerifyKeyRow is an idempotency row as verify reads it.
type VerifyKeyRow struct {
	OwnerID, Key, Operation, Status string
	Response                        []byte // nil while PROCESSING
	ExpiresAt                       time.Time
}

// Cursor is where the page after this row starts.
func (r VerifyKeyRow) Cursor() VerifyCursor { return VerifyCursor{Owner: r.OwnerID, ID: r.Key} }

// VerifyKeys reads a page of idempotency rows in (owner_id, idempotency_key) order.
func (db *DB) VerifyKeys(ctx context.Context, p VerifyPage) ([]VerifyKeyRow, error) {
	where, args := p.keyset("k", "idempotency_key", "")
	rows, err := p.query(ctx, db, `SELECT k.owner_id, k.idempotency_key, k.operation, k.status, k.response::text, k.expires_at
		FROM idempotency_record k WHERE `+where+fmt.Sprintf(` ORDER BY k.owner_id, k.idempotency_key LIMIT $%d`, len(args)+1), args)
	if err != nil {
		return nil, fmt.Errorf("verify keys: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (VerifyKeyRow, error) {
		var x VerifyKeyRow
		var resp pgtype.Text
		err := r.Scan(&x.OwnerID, &x.Key, &x.Operation, &x.Status, &resp, &x.ExpiresAt)
		if resp.Valid {
			x.Response = []byte(resp.String)
		}
		return x, err
	})
}

// VerifyRecordRow is a record with what its revisions say about it.
type VerifyRecordRow struct {
	OwnerID, ID, ModuleCode string
	Revision                int
	// Title and Summary are the row's, as stored.
	Title, Summary string
	// Revisions counts its revision rows; MinRevision and MaxRevision are 0 without any.
	Revisions, MinRevision, MaxRevision int
	// LatestMatches: the revision numbered Revision exists and its snapshot's title, summary
	// and payload are the row's.
	LatestMatches bool
}

// Cursor is where the page after this row starts.
func (r VerifyRecordRow) Cursor() VerifyCursor { return VerifyCursor{Owner: r.OwnerID, ID: r.ID} }

// VerifyRecords reads a page of records in (owner_id, id) order.
func (db *DB) VerifyRecords(ctx context.Context, p VerifyPage) ([]VerifyRecordRow, error) {
	where, args := p.keyset("r", "id", "")
	rows, err := p.query(ctx, db, `SELECT r.owner_id, r.id, r.module_code, r.revision, r.title, r.summary, rv.n, rv.lo, rv.hi,
			COALESCE((SELECT v.snapshot->>'title' IS NOT DISTINCT FROM r.title AND v.snapshot->>'summary' IS NOT DISTINCT FROM r.summary
					AND v.snapshot->'payload' IS NOT DISTINCT FROM r.payload
				FROM record_revision v WHERE v.owner_id = r.owner_id AND v.record_id = r.id AND v.revision = r.revision), false)
		FROM record r
		CROSS JOIN LATERAL (SELECT count(*)::int AS n, COALESCE(min(v.revision), 0) AS lo, COALESCE(max(v.revision), 0) AS hi
			FROM record_revision v WHERE v.owner_id = r.owner_id AND v.record_id = r.id) rv
		WHERE `+where+fmt.Sprintf(` ORDER BY r.owner_id, r.id LIMIT $%d`, len(args)+1), args)
	if err != nil {
		return nil, fmt.Errorf("verify records: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (VerifyRecordRow, error) {
		var x VerifyRecordRow
		err := r.Scan(&x.OwnerID, &x.ID, &x.ModuleCode, &x.Revision, &x.Title, &x.Summary, &x.Revisions, &x.MinRevision, &x.MaxRevision, &x.LatestMatches)
		return x, err
	})
}

// VerifyRevisionRow is a revision with its parent (HasParent false: no such record) and
// whether an audit event names it.
type VerifyRevisionRow struct {
	RevisionWithParent
	HasParent bool
	Audited   bool
}

// Cursor is where the page after this row starts.
func (r VerifyRevisionRow) Cursor() VerifyCursor {
	return VerifyCursor{Owner: r.OwnerID, ID: r.RecordID, Rev: r.Revision.Revision}
}

// VerifyRevisions reads a page of revisions in (owner_id, record_id, revision) order.
func (db *DB) VerifyRevisions(ctx context.Context, p VerifyPage) ([]VerifyRevisionRow, error) {
	where, args := p.keyset("rv", "record_id", "revision")
	rows, err := p.query(ctx, db, `SELECT rv.owner_id, rv.record_id, rv.revision, rv.snapshot, rv.idempotency_key, rv.created_at,
			p.owner_id, p.id, p.module_code,
			EXISTS (SELECT 1 FROM audit_event a WHERE a.owner_id = rv.owner_id AND a.record_id = rv.record_id AND a.revision = rv.revision)
		FROM record_revision rv LEFT JOIN record p ON p.owner_id = rv.owner_id AND p.id = rv.record_id
		WHERE `+where+fmt.Sprintf(` ORDER BY rv.owner_id, rv.record_id, rv.revision LIMIT $%d`, len(args)+1), args)
	if err != nil {
		return nil, fmt.Errorf("verify revisions: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (VerifyRevisionRow, error) {
		var x VerifyRevisionRow
		var po, pid, pm pgtype.Text
		err := r.Scan(&x.OwnerID, &x.RecordID, &x.Revision.Revision, &x.Snapshot, &x.IdempotencyKey, &x.CreatedAt, &po, &pid, &pm, &x.Audited)
		x.HasParent = po.Valid
		x.ParentOwner, x.ParentID, x.ParentModule = po.String, pid.String, pm.String
		return x, err
	})
}

// VerifyExecutionRow is an execution with its record, audit events and outbox messages.
type VerifyExecutionRow struct {
	OwnerID, ID, ModuleCode, RecordID, FeatureID, Mode, Status string
	RecordRevision                                             int
	// HasRecord: its record exists in its module; AtRevision: that record has the revision the
	// execution was recorded at.
	HasRecord, AtRevision bool
	// RunAudits counts its FEATURE_<id>_EXECUTED/BLOCKED/QUEUED events; SettleAudits its
	// FEATURE_<id>_DELIVERED/FAILED events and SettledAs the action of one of them.
	RunAudits, SettleAudits int
	SettledAs               string
	// Messages counts the outbox messages of the execution.
	Messages int
}

// Cursor is where the page after this row starts.
func (r VerifyExecutionRow) Cursor() VerifyCursor { return VerifyCursor{Owner: r.OwnerID, ID: r.ID} }

// The actions an execution e's run and its settle are audited with (FeatureAction, in SQL).
var (
	runActionsSQL = featureActionSQL("e.feature_id", FeatureExecuted) + ", " + featureActionSQL("e.feature_id", FeatureBlocked) + ", " +
		featureActionSQL("e.feature_id", FeatureQueued)
	settleActionsSQL = featureActionSQL("e.feature_id", FeatureDelivered) + ", " + featureActionSQL("e.feature_id", FeatureFailed)
)

// VerifyExecutions reads a page of feature executions in (owner_id, id) order.
func (db *DB) VerifyExecutions(ctx context.Context, p VerifyPage) ([]VerifyExecutionRow, error) {
	where, args := p.keyset("e", "id", "")
	rows, err := p.query(ctx, db, `SELECT e.owner_id, e.id, e.module_code, e.record_id, e.feature_id, e.mode, e.status, e.record_revision,
			EXISTS (SELECT 1 FROM record p WHERE p.owner_id = e.owner_id AND p.module_code = e.module_code AND p.id = e.record_id),
			EXISTS (SELECT 1 FROM record_revision v WHERE v.owner_id = e.owner_id AND v.record_id = e.record_id AND v.revision = e.record_revision),
			au.runs, au.settles, COALESCE(au.settled_as, ''),
			(SELECT count(*)::int FROM outbox_message m WHERE m.owner_id = e.owner_id AND m.execution_id = e.id)
		FROM feature_execution e
		CROSS JOIN LATERAL (SELECT
				count(*) FILTER (WHERE a.action IN (`+runActionsSQL+`))::int AS runs,
				count(*) FILTER (WHERE a.action IN (`+settleActionsSQL+`))::int AS settles,
				max(a.action) FILTER (WHERE a.action IN (`+settleActionsSQL+`)) AS settled_as
			FROM audit_event a WHERE a.owner_id = e.owner_id AND a.record_id = e.record_id AND a.execution_id = e.id) au
		WHERE `+where+fmt.Sprintf(` ORDER BY e.owner_id, e.id LIMIT $%d`, len(args)+1), args)
	if err != nil {
		return nil, fmt.Errorf("verify executions: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (VerifyExecutionRow, error) {
		var x VerifyExecutionRow
		err := r.Scan(&x.OwnerID, &x.ID, &x.ModuleCode, &x.RecordID, &x.FeatureID, &x.Mode, &x.Status, &x.RecordRevision,
			&x.HasRecord, &x.AtRevision, &x.RunAudits, &x.SettleAudits, &x.SettledAs, &x.Messages)
		return x, err
	})
}

// VerifyOutboxRow is an outbox message with its execution (HasExecution false: none).
type VerifyOutboxRow struct {
	OwnerID, ID, ExecutionID, Status string
	HasExecution                     bool
	ExecutionMode, ExecutionStatus   string
}

// Cursor is where the page after this row starts.
func (r VerifyOutboxRow) Cursor() VerifyCursor { return VerifyCursor{Owner: r.OwnerID, ID: r.ID} }

// VerifyOutbox reads a page of outbox messages in (owner_id, id) order.
func (db *DB) VerifyOutbox(ctx context.Context, p VerifyPage) ([]VerifyOutboxRow, error) {
	where, args := p.keyset("m", "id", "")
	rows, err := p.query(ctx, db, `SELECT m.owner_id, m.id, m.execution_id, m.status, e.id IS NOT NULL, COALESCE(e.mode, ''), COALESCE(e.status, '')
		FROM outbox_message m LEFT JOIN feature_execution e ON e.owner_id = m.owner_id AND e.id = m.execution_id
		WHERE `+where+fmt.Sprintf(` ORDER BY m.owner_id, m.id LIMIT $%d`, len(args)+1), args)
	if err != nil {
		return nil, fmt.Errorf("verify outbox: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (VerifyOutboxRow, error) {
		var x VerifyOutboxRow
		err := r.Scan(&x.OwnerID, &x.ID, &x.ExecutionID, &x.Status, &x.HasExecution, &x.ExecutionMode, &x.ExecutionStatus)
		return x, err
	})
}

// VerifyAuditRow is an audit event's text with, for a MEM-001 record, the record's contents
// (to prove none of it leaked into the detail).
type VerifyAuditRow struct {
	OwnerID, ID, ModuleCode, Action string
	RecordID                        *string
	Detail                          string
	Contents                        []string
}

// Cursor is where the page after this row starts.
func (r VerifyAuditRow) Cursor() VerifyCursor { return VerifyCursor{Owner: r.OwnerID, ID: r.ID} }

// VerifyAudit reads a page of audit events in (owner_id, id) order.
func (db *DB) VerifyAudit(ctx context.Context, p VerifyPage) ([]VerifyAuditRow, error) {
	where, args := p.keyset("a", "id", "")
	rows, err := p.query(ctx, db, `SELECT a.owner_id, a.id, a.module_code, a.action, a.record_id, a.detail::text,
			r.payload->>'originalContent', r.payload->>'currentContent'
		FROM audit_event a LEFT JOIN record r ON a.module_code = 'MEM-001' AND r.owner_id = a.owner_id AND r.id = a.record_id
		WHERE `+where+fmt.Sprintf(` ORDER BY a.owner_id, a.id LIMIT $%d`, len(args)+1), args)
	if err != nil {
		return nil, fmt.Errorf("verify audit events: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (VerifyAuditRow, error) {
		var x VerifyAuditRow
		var orig, cur pgtype.Text
		err := r.Scan(&x.OwnerID, &x.ID, &x.ModuleCode, &x.Action, &x.RecordID, &x.Detail, &orig, &cur)
		for _, c := range []pgtype.Text{orig, cur} {
			if c.Valid && c.String != "" {
				x.Contents = append(x.Contents, c.String)
			}
		}
		return x, err
	})
}
