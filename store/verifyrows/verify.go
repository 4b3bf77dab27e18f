package verifyrows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/replay"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Every table in keyset pages by its primary key (a page is one
// index range scan, so a database of any size is read in bounded memory), optionally for one
// owner, inside one read-only snapshot (ReadSnapshot) so the checks see one consistent state.

// Cursor is where a page starts: after (Owner, ID, Rev) in the table's key order (Rev
// is used by revisions only). The zero cursor starts at the beginning.
type Cursor struct {
	Owner string
	ID    string
	Rev   int
}

// Page selects one page: Owner limits it to one owner ("" for every owner); Since, when
// set, only the rows written or changed since then.
type Page struct {
	Owner string
	After Cursor
	Limit int
	Since time.Time
}

// since is the page's --since condition on a time column ("" without one), its argument appended
// to args.
func (p Page) since(col string, args []any) (string, []any) {
	if p.Since.IsZero() {
		return "", args
	}
	args = append(args, p.Since)
	return fmt.Sprintf(` AND %s >= $%d`, col, len(args)), args
}

// where is the page's keyset condition and its --since condition on timeCol, with their
// arguments.
func (p Page) where(alias, idCol, revCol, timeCol string) (string, []any) {
	w, args := p.keyset(alias, idCol, revCol)
	s, args := p.since(alias+"."+timeCol, args)
	return w + s, args
}

// keyset returns the WHERE clause of a page over (owner_id, idCol[, revCol]) aliased alias,
// and its arguments.
func (p Page) keyset(alias, idCol, revCol string) (string, []any) {
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

func (p Page) query(ctx context.Context, db *store.DB, sql string, args []any) (pgx.Rows, error) {
	return db.Q(ctx).Query(ctx, sql, append(args, p.Limit)...)
}

// KeyRow is an idempotency row as verify reads it, with the rows its stored result
// references, read in the same statement (nil where there is none, or it cannot be read whole):
// verify judges them as a replay would, without a statement per key.
type KeyRow struct {
	OwnerID, Key, Operation, Status string
	Response                        []byte // nil while PROCESSING
	ExpiresAt                       time.Time
	ReservedXID                     *string
	Revision                        *store.RevisionWithParent
	Execution                       *model.Execution
	ExecutionAttest                 store.Attestation
	Review                          *model.Review
}

// Cursor is where the page after this row starts.
func (r KeyRow) Cursor() Cursor { return Cursor{Owner: r.OwnerID, ID: r.Key} }

// verifyKeysSQL reads a page of key rows with what their results reference, each through a
// LATERAL subquery bound by a unique key (as the replay statement reads them, but in any
// module: the module check is the caller's); the execution's and the review's only for a result
// naming one (that condition on the key row alone gates the subquery: no index probe for the
// others). light leaves out what only a check of the rows' content needs — snapshot, input,
// output and digests — for a caller that judged every revision and execution on its own (their
// columns are NULL then).
func verifyKeysSQL(refs store.ReplayRefs, light bool) string {
	snapshot, digests, input := `rv.snapshot`, `rv.digest, (SELECT q.digest FROM record_revision q
				WHERE q.owner_id = rv.owner_id AND q.record_id = rv.record_id AND q.revision = rv.revision - 1) AS prev_digest`, `e.input, e.output`
	execDigests := `e.digest, (SELECT v.digest FROM record_revision v
				WHERE v.owner_id = e.owner_id AND v.record_id = e.record_id AND v.revision = e.record_revision) AS revision_digest`
	if light {
		snapshot, digests, input = `NULL::jsonb AS snapshot`, `NULL::bytea AS digest, NULL::bytea AS prev_digest`, `NULL::jsonb AS input, NULL::jsonb AS output`
		execDigests = `NULL::bytea AS digest, NULL::bytea AS revision_digest`
	}
	return `SELECT k.owner_id, k.idempotency_key, k.operation, k.status, k.response::text, k.expires_at, k.reserved_xid::text,
		` + replay.RevisionColumns + `, ` + replay.ExecutionColumns + `,
		pf_r.id, pf_r.owner_id, pf_r.module_code, pf_r.record_id, pf_r.record_revision, pf_r.verdict, pf_r.comment, pf_r.idempotency_key, pf_r.created_at
	FROM idempotency_record k
	LEFT JOIN LATERAL (SELECT rv.owner_id, rv.record_id, rv.revision, ` + snapshot + `, rv.idempotency_key, rv.created_at,
			p.owner_id AS parent_owner, p.id AS parent_id, p.module_code AS parent_module,
			rv.written_xid::text AS xid, ` + digests + `
		FROM record_revision rv JOIN record p ON p.owner_id = rv.owner_id AND p.id = rv.record_id
		WHERE rv.owner_id = k.owner_id AND rv.record_id = ` + store.RefText(refs.RecordID) + ` AND rv.revision = ` + store.RefInt(refs.Revision) + `
		OFFSET 0) pf_rv ON true
	LEFT JOIN LATERAL (SELECT e.id, e.owner_id, e.module_code, e.record_id, e.feature_id, e.mode, e.status,
			e.record_revision, ` + input + `, e.idempotency_key, e.created_at, e.updated_at,
			e.written_xid::text AS xid, ` + execDigests + `
		FROM feature_execution e
		WHERE ` + store.RefText(refs.ExecutionID) + ` IS NOT NULL
			AND e.owner_id = k.owner_id AND e.id = ` + store.RefText(refs.ExecutionID) + ` AND e.record_id = ` + store.RefText(refs.RecordID) + `
		OFFSET 0) pf_e ON true
	LEFT JOIN LATERAL (SELECT r.id, r.owner_id, r.module_code, r.record_id, r.record_revision, r.verdict, r.comment, r.idempotency_key, r.created_at
		FROM commitment_review r
		WHERE ` + store.RefText(refs.ReviewID) + ` IS NOT NULL
			AND r.owner_id = k.owner_id AND r.record_id = ` + store.RefText(refs.RecordID) + ` AND r.id = ` + store.RefText(refs.ReviewID) + `
		OFFSET 0) pf_r ON true
	WHERE `
}

// Keys reads a page of idempotency rows in (owner_id, idempotency_key) order, with the
// rows their results reference at refs — without those rows' content when light. Where a
// stored result keeps its references is the envelope's and the policies' business: the caller
// that owns the format hands refs in (kernel.ResultRefs), and the statement only follows them.
func Keys(ctx context.Context, db *store.DB, refs store.ReplayRefs, p Page, light bool) ([]KeyRow, error) {
	where, args := p.where("k", "idempotency_key", "", "updated_at")
	q := verifyKeysSQL(refs, light)
	rows, err := p.query(ctx, db, q+where+fmt.Sprintf(` ORDER BY k.owner_id, k.idempotency_key LIMIT $%d`, len(args)+1), args)
	if err != nil {
		return nil, fmt.Errorf("verify keys: %w", err)
	}
	return pgx.CollectRows(rows, newKeyScanner().scan)
}

// keyScanner scans key rows through one set of destinations, built once for every row of a
// read: built per row, the 40-odd destinations and the structs behind them were most of what a
// whole-table read of the keys allocated. Every value it returns is freshly allocated by pgx
// (strings, byte slices), so a row never aliases the next.
type keyScanner struct {
	x    KeyRow
	xid  pgtype.Text
	rv   replay.RevisionRow
	e    replay.ExecutionRow
	rw   reviewRow
	dest []any
}

func newKeyScanner() *keyScanner {
	s := &keyScanner{}
	s.dest = append(append(append([]any{&s.x.OwnerID, &s.x.Key, &s.x.Operation, &s.x.Status, &s.x.Response, &s.x.ExpiresAt, &s.xid},
		s.rv.Dest()...), s.e.Dest()...), s.rw.dest()...)
	return s
}

func (s *keyScanner) scan(r pgx.CollectableRow) (KeyRow, error) {
	err := r.Scan(s.dest...)
	x := s.x
	x.ReservedXID = store.TextPtr(s.xid)
	x.Revision, x.Execution, x.Review = s.rv.Revision(), s.e.Execution(), s.rw.review()
	x.ExecutionAttest = s.e.Attest()
	return x, err
}

// ServiceKeys reads a page of a service's idempotency rows (the runner library's table
// alone: a service's database holds none of idemwork's records), in (owner_id, idempotency_key)
// order; what their results reference is the service's policy to read.
func ServiceKeys(ctx context.Context, db *store.DB, p Page) ([]KeyRow, error) {
	where, args := p.where("k", "idempotency_key", "", "updated_at")
	rows, err := p.query(ctx, db, `SELECT k.owner_id, k.idempotency_key, k.operation, k.status, k.response::text, k.expires_at
		FROM idempotency_record k WHERE `+where+fmt.Sprintf(` ORDER BY k.owner_id, k.idempotency_key LIMIT $%d`, len(args)+1), args)
	if err != nil {
		return nil, fmt.Errorf("verify keys: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (KeyRow, error) {
		var x KeyRow
		var resp pgtype.Text
		err := r.Scan(&x.OwnerID, &x.Key, &x.Operation, &x.Status, &resp, &x.ExpiresAt)
		if resp.Valid {
			x.Response = []byte(resp.String)
		}
		return x, err
	})
}

// reviewRow receives a review (all NULL when the join found none).
type reviewRow struct {
	id, ownerID, module, recordID pgtype.Text
	revision                      pgtype.Int4
	verdict, comment, key         pgtype.Text
	createdAt                     pgtype.Timestamptz
}

func (r *reviewRow) dest() []any {
	return []any{&r.id, &r.ownerID, &r.module, &r.recordID, &r.revision, &r.verdict, &r.comment, &r.key, &r.createdAt}
}

func (r *reviewRow) review() *model.Review {
	if !r.id.Valid || !r.ownerID.Valid || !r.module.Valid || !r.recordID.Valid || !r.revision.Valid || !r.createdAt.Valid ||
		r.createdAt.InfinityModifier != pgtype.Finite {
		return nil
	}
	return &model.Review{ID: r.id.String, OwnerID: r.ownerID.String, ModuleCode: r.module.String, RecordID: r.recordID.String,
		RecordRevision: int(r.revision.Int32), Verdict: r.verdict.String, Comment: r.comment.String, IdempotencyKey: store.TextPtr(r.key),
		CreatedAt: r.createdAt.Time}
}

// RecordRow is a record with what its revisions say about it.
type RecordRow struct {
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
func (r RecordRow) Cursor() Cursor { return Cursor{Owner: r.OwnerID, ID: r.ID} }

// Records reads a page of records in (owner_id, id) order.
func Records(ctx context.Context, db *store.DB, p Page) ([]RecordRow, error) {
	where, args := p.where("r", "id", "", "updated_at")
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
	return pgx.CollectRows(rows, scanVerifyRecord)
}

func scanVerifyRecord(r pgx.CollectableRow) (RecordRow, error) {
	var x RecordRow
	err := r.Scan(&x.OwnerID, &x.ID, &x.ModuleCode, &x.Revision, &x.Title, &x.Summary, &x.Revisions, &x.MinRevision, &x.MaxRevision, &x.LatestMatches)
	return x, err
}

// RevisionRow is a revision with its parent (HasParent false: no such record), its
// attestation, and how many audit events of a write name it.
type RevisionRow struct {
	store.RevisionWithParent
	HasParent bool
	// WriteAudits counts the audit events of the write that wrote it (RECORD_CREATED,
	// RECORD_PATCHED or FEATURE_<id>_EXECUTED naming this record and revision): one.
	WriteAudits int
}

// Cursor is where the page after this row starts.
func (r RevisionRow) Cursor() Cursor {
	return Cursor{Owner: r.OwnerID, ID: r.RecordID, Rev: r.Revision.Revision}
}

// Revisions reads a page of revisions in (owner_id, record_id, revision) order. A
// revision's previous digest is the row before it on the page when that is its previous revision
// (lag over the page), read by its key otherwise: an index probe only for the first revision of
// a record on the page.
func Revisions(ctx context.Context, db *store.DB, p Page) ([]RevisionRow, error) {
	where, args := p.where("rv", "record_id", "revision", "created_at")
	rows, err := p.query(ctx, db, `SELECT rv.owner_id, rv.record_id, rv.revision, rv.snapshot, rv.idempotency_key, rv.created_at,
			p.owner_id, p.id, p.module_code, rv.written_xid::text, rv.digest,
			CASE WHEN rv.lag_owner = rv.owner_id AND rv.lag_record = rv.record_id AND rv.lag_revision = rv.revision - 1 THEN rv.lag_digest
				ELSE (SELECT q.digest FROM record_revision q WHERE q.owner_id = rv.owner_id AND q.record_id = rv.record_id AND q.revision = rv.revision - 1) END,
			(SELECT count(*)::int FROM audit_event a WHERE a.owner_id = rv.owner_id AND a.record_id = rv.record_id AND a.revision = rv.revision
				AND `+store.RevisionWriteActionSQL("a.action")+`)
		FROM (SELECT pg.*, lag(pg.owner_id) OVER w AS lag_owner, lag(pg.record_id) OVER w AS lag_record,
				lag(pg.revision) OVER w AS lag_revision, lag(pg.digest) OVER w AS lag_digest
			FROM (SELECT rv.owner_id, rv.record_id, rv.revision, rv.snapshot, rv.idempotency_key, rv.created_at, rv.written_xid, rv.digest
				FROM record_revision rv
				WHERE `+where+fmt.Sprintf(` ORDER BY rv.owner_id, rv.record_id, rv.revision LIMIT $%d) pg
			WINDOW w AS (ORDER BY pg.owner_id, pg.record_id, pg.revision)) rv
		LEFT JOIN record p ON p.owner_id = rv.owner_id AND p.id = rv.record_id
		ORDER BY rv.owner_id, rv.record_id, rv.revision`, len(args)+1), args)
	if err != nil {
		return nil, fmt.Errorf("verify revisions: %w", err)
	}
	return pgx.CollectRows(rows, scanVerifyRevision)
}

func scanVerifyRevision(r pgx.CollectableRow) (RevisionRow, error) {
	var x RevisionRow
	var po, pid, pm pgtype.Text
	// The snapshot as its bytes (*[]byte): into a json.RawMessage pgx would run it through
	// json.Unmarshal, validating what PostgreSQL's jsonb already is.
	dest := x.Attest.Dest([]any{&x.OwnerID, &x.RecordID, &x.Revision.Revision, (*[]byte)(&x.Snapshot), &x.IdempotencyKey, &x.CreatedAt, &po, &pid, &pm})
	err := r.Scan(append(dest, &x.WriteAudits)...)
	x.HasParent = po.Valid
	x.ParentOwner, x.ParentID, x.ParentModule = po.String, pid.String, pm.String
	return x, err
}

// ExecutionRow is an execution with its attestation, record, audit events and outbox
// messages.
type ExecutionRow struct {
	model.Execution
	Attest store.Attestation
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
func (r ExecutionRow) Cursor() Cursor { return Cursor{Owner: r.OwnerID, ID: r.ID} }

// The actions an execution e's run and its settle are audited with (FeatureAction, in SQL).
var (
	runActionsSQL = store.FeatureActionSQL("e.feature_id", store.FeatureExecuted) + ", " + store.FeatureActionSQL("e.feature_id", store.FeatureBlocked) + ", " +
		store.FeatureActionSQL("e.feature_id", store.FeatureQueued)
	settleActionsSQL = store.FeatureActionSQL("e.feature_id", store.FeatureDelivered) + ", " + store.FeatureActionSQL("e.feature_id", store.FeatureFailed)
)

// Executions reads a page of feature executions in (owner_id, id) order.
func Executions(ctx context.Context, db *store.DB, p Page) ([]ExecutionRow, error) {
	where, args := p.where("e", "id", "", "updated_at")
	// The record and the revision are joined, not looked up with EXISTS: a generic plan turns an
	// uncorrelated-looking EXISTS into a hashed subplan, a scan of every record on each page.
	rows, err := p.query(ctx, db, `SELECT `+store.Prefixed("e.", store.ExecutionColumns)+`, e.written_xid::text, e.digest, v.digest,
			p.id IS NOT NULL, v.revision IS NOT NULL,
			au.runs, au.settles, COALESCE(au.settled_as, ''),
			(SELECT count(*)::int FROM outbox_message m WHERE m.owner_id = e.owner_id AND m.execution_id = e.id)
		FROM feature_execution e
		LEFT JOIN record p ON p.owner_id = e.owner_id AND p.module_code = e.module_code AND p.id = e.record_id
		LEFT JOIN record_revision v ON v.owner_id = e.owner_id AND v.record_id = e.record_id AND v.revision = e.record_revision
		CROSS JOIN LATERAL (SELECT
				count(*) FILTER (WHERE a.action IN (`+runActionsSQL+`))::int AS runs,
				count(*) FILTER (WHERE a.action IN (`+settleActionsSQL+`))::int AS settles,
				max(a.action) FILTER (WHERE a.action IN (`+settleActionsSQL+`)) AS settled_as
			FROM audit_event a WHERE a.owner_id = e.owner_id AND a.record_id = e.record_id AND a.execution_id = e.id) au
		WHERE `+where+fmt.Sprintf(` ORDER BY e.owner_id, e.id LIMIT $%d`, len(args)+1), args)
	if err != nil {
		return nil, fmt.Errorf("verify executions: %w", err)
	}
	return pgx.CollectRows(rows, scanVerifyExecution)
}

func scanVerifyExecution(r pgx.CollectableRow) (ExecutionRow, error) {
	var x ExecutionRow
	dest := x.Attest.Dest([]any{&x.ID, &x.OwnerID, &x.ModuleCode, &x.RecordID, &x.FeatureID, &x.Mode, &x.Status, &x.RecordRevision,
		(*[]byte)(&x.Input), (*[]byte)(&x.Output), &x.IdempotencyKey, &x.CreatedAt, &x.UpdatedAt})
	err := r.Scan(append(dest, &x.HasRecord, &x.AtRevision, &x.RunAudits, &x.SettleAudits, &x.SettledAs, &x.Messages)...)
	return x, err
}

// OutboxRow is an outbox message with its execution (HasExecution false: none).
type OutboxRow struct {
	OwnerID, ID, ExecutionID, Status string
	HasExecution                     bool
	ExecutionMode, ExecutionStatus   string
	// Key is the message's idempotency key, ExecutionKey its execution's.
	Key, ExecutionKey *string
	// PayloadRef is the reference idemwork wrote for the provider, as text.
	PayloadRef string
}

// Cursor is where the page after this row starts.
func (r OutboxRow) Cursor() Cursor { return Cursor{Owner: r.OwnerID, ID: r.ID} }

// Outbox reads a page of outbox messages in (owner_id, id) order.
func Outbox(ctx context.Context, db *store.DB, p Page) ([]OutboxRow, error) {
	where, args := p.where("m", "id", "", "updated_at")
	rows, err := p.query(ctx, db, `SELECT m.owner_id, m.id, m.execution_id, m.status, e.id IS NOT NULL, COALESCE(e.mode, ''), COALESCE(e.status, ''),
			m.idempotency_key, e.idempotency_key, m.payload_ref::text
		FROM outbox_message m LEFT JOIN feature_execution e ON e.owner_id = m.owner_id AND e.id = m.execution_id
		WHERE `+where+fmt.Sprintf(` ORDER BY m.owner_id, m.id LIMIT $%d`, len(args)+1), args)
	if err != nil {
		return nil, fmt.Errorf("verify outbox: %w", err)
	}
	return pgx.CollectRows(rows, scanVerifyOutbox)
}

func scanVerifyOutbox(r pgx.CollectableRow) (OutboxRow, error) {
	var x OutboxRow
	err := r.Scan(&x.OwnerID, &x.ID, &x.ExecutionID, &x.Status, &x.HasExecution, &x.ExecutionMode, &x.ExecutionStatus, &x.Key, &x.ExecutionKey, &x.PayloadRef)
	return x, err
}

// AuditRow is an audit event's text with, for a MEM-001 record, the record's contents
// (to prove none of it leaked into the detail).
type AuditRow struct {
	OwnerID, ID, ModuleCode, Action string
	RecordID                        *string
	Detail                          string
	Contents                        []string
}

// Cursor is where the page after this row starts.
func (r AuditRow) Cursor() Cursor { return Cursor{Owner: r.OwnerID, ID: r.ID} }

// Audit reads a page of audit events in (owner_id, id) order.
func Audit(ctx context.Context, db *store.DB, p Page) ([]AuditRow, error) {
	where, args := p.where("a", "id", "", "at")
	// The record is read only for a MEM-001 event (a condition on the event alone gates the
	// subquery): joined outright, every event's record was probed and then filtered out.
	rows, err := p.query(ctx, db, `SELECT a.owner_id, a.id, a.module_code, a.action, a.record_id, a.detail::text, r.orig, r.cur
		FROM audit_event a LEFT JOIN LATERAL (SELECT r.payload->>'originalContent' AS orig, r.payload->>'currentContent' AS cur
			FROM record r WHERE a.module_code = 'MEM-001' AND r.owner_id = a.owner_id AND r.id = a.record_id OFFSET 0) r ON true
		WHERE `+where+fmt.Sprintf(` ORDER BY a.owner_id, a.id LIMIT $%d`, len(args)+1), args)
	if err != nil {
		return nil, fmt.Errorf("verify audit events: %w", err)
	}
	return pgx.CollectRows(rows, scanVerifyAudit)
}

func scanVerifyAudit(r pgx.CollectableRow) (AuditRow, error) {
	var x AuditRow
	var orig, cur pgtype.Text
	err := r.Scan(&x.OwnerID, &x.ID, &x.ModuleCode, &x.Action, &x.RecordID, &x.Detail, &orig, &cur)
	for _, c := range []pgtype.Text{orig, cur} {
		if c.Valid && c.String != "" {
			x.Contents = append(x.Contents, c.String)
		}
	}
	return x, err
}

// Life is what one transaction wrote under one key: a life of the key. Its rows are the
// request's own — revisions, executions, reviews, outbox messages and audit events — not the
// outbox worker's settle events, which carry the key but are written later by the worker.
type Life struct {
	// XID is the transaction (nil: rows that do not record one, written before migration 0004).
	XID                                      *string
	Revisions, Executions, Reviews, Messages int
	RunAudits                                int
	// Actions are the distinct actions of its audit events, sorted.
	Actions []string
	// First and Last are its earliest and latest row times.
	First, Last time.Time
	// KeyExpiresAt is the key's expiry as the transaction saw it (its audit event recorded it;
	// nil when none did).
	KeyExpiresAt *time.Time
}

// KeyRowFacts is a key row as the lives check needs it.
type KeyRowFacts struct {
	Status, Operation    string
	ReservedXID          *string
	CreatedAt, ExpiresAt time.Time
}

// KeyLives is one key of an owner with its row (nil: none, e.g. reaped after it expired)
// and its lives, oldest first.
type KeyLives struct {
	OwnerID, Key string
	Row          *KeyRowFacts
	Lives        []Life
}

// verifyLivesTables are the tables whose rows a request writes under its key, as verifyLivesSQL
// unions them: (table, time column, which count a row adds to).
var verifyLivesTables = []struct{ table, at, counts string }{
	{"record_revision", "created_at", "1, 0, 0, 0"},
	{"feature_execution", "created_at", "0, 1, 0, 0"},
	{"commitment_review", "created_at", "0, 0, 1, 0"},
	{"outbox_message", "created_at", "0, 0, 0, 1"},
}

// verifyLivesSQL groups by key and transaction the rows of owner $1's keys in ($2, $3]. Each
// table is read through its (owner_id, idempotency_key) index range. (A page never spans owners:
// a row comparison over (owner_id, idempotency_key) is not an index range to the planner here.)
var verifyLivesSQL = func() string {
	const rng = `owner_id = $1 AND idempotency_key > $2 AND idempotency_key <= $3 AND idempotency_key IS NOT NULL`
	var parts []string
	for _, t := range verifyLivesTables {
		parts = append(parts, `SELECT owner_id, idempotency_key, written_xid, `+t.counts+`, NULL::text AS action, `+t.at+` AS at, NULL::timestamptz AS kx
			FROM `+t.table+` WHERE `+rng)
	}
	parts = append(parts, `SELECT owner_id, idempotency_key, written_xid, 0, 0, 0, 0, action, at, key_expires_at
			FROM audit_event WHERE `+rng+` AND action !~ '`+store.SettleActionPattern+`'`)
	return `SELECT owner_id, idempotency_key, written_xid::text, sum(rv)::int, sum(ex)::int, sum(re)::int, sum(ms)::int, count(action)::int,
			coalesce(array_agg(DISTINCT action) FILTER (WHERE action IS NOT NULL), '{}'), min(at), max(at), max(kx)
		FROM (` + strings.Join(parts, "\n\t\tUNION ALL ") + `) AS r (owner_id, idempotency_key, written_xid, rv, ex, re, ms, action, at, kx)
		GROUP BY owner_id, idempotency_key, written_xid
		ORDER BY owner_id, idempotency_key, min(at)`
}()

// KeyLivesPage reads the lives of the next keys after p.After (Owner and ID are the key's
// owner and key; an empty Owner starts at the first owner): the keys of about p.Limit keyed audit
// events of one owner — a key's rows are never split between pages — and their key rows. With
// p.Since, those are the audit events since then: the page holds the keys with one and the
// owner's other keys after p.After up to the last of them (each with all its lives, the older ones
// too, to judge them; a caller that wants only what was written since drops the keys none of whose
// lives ends since, as verify's judgeKey does). next is where the page after starts; more is false
// on the last page. read counts the keyed audit events (since p.Since) the page was cut by, at
// most p.Limit: its last key's events past the limit are read but not counted.
func KeyLivesPage(ctx context.Context, db *store.DB, p Page) (out []KeyLives, next Cursor, more bool, read int, err error) {
	owner, after := p.Owner, p.After.ID
	if owner == "" {
		owner = p.After.Owner
	}
	sinceArg := func(args []any, col string) (string, []any) { return p.since(col, args) }
	// The next owner with keyed audit events, from owner on (strictly after it when past is set).
	nextOwner := func(from string, past bool) (string, bool, error) {
		cmp := ">="
		if past {
			cmp = ">"
		}
		since, args := sinceArg([]any{from}, "at")
		var o *string
		err := db.Q(ctx).QueryRow(ctx, `SELECT min(owner_id) FROM audit_event WHERE idempotency_key IS NOT NULL AND owner_id `+cmp+` $1`+since, args...).Scan(&o)
		if err != nil || o == nil {
			return "", false, err
		}
		return *o, true, nil
	}
	if owner == "" {
		o, ok, err := nextOwner("", false)
		if err != nil || !ok {
			return nil, next, false, 0, wrapLives(err)
		}
		owner = o
	}
	var hiKey string
	var n int
	for {
		since, args := sinceArg([]any{owner, after}, "a.at")
		args = append(args, p.Limit)
		err = db.Q(ctx).QueryRow(ctx, `SELECT idempotency_key, count(*) OVER ()::int
			FROM (SELECT a.idempotency_key FROM audit_event a WHERE a.owner_id = $1 AND a.idempotency_key > $2 AND a.idempotency_key IS NOT NULL`+since+
			fmt.Sprintf(` ORDER BY a.idempotency_key LIMIT $%d) s ORDER BY idempotency_key DESC LIMIT 1`, len(args)), args...).Scan(&hiKey, &n)
		if err == nil {
			break
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, next, false, 0, wrapLives(err)
		}
		if p.Owner != "" {
			return nil, next, false, 0, nil // the owner's keys are done
		}
		o, ok, err := nextOwner(owner, true)
		if err != nil || !ok {
			return nil, next, false, 0, wrapLives(err)
		}
		owner, after = o, ""
	}
	rng := []any{owner, after, hiKey}
	rows, err := db.Q(ctx).Query(ctx, verifyLivesSQL, rng...)
	if err != nil {
		return nil, next, false, 0, wrapLives(err)
	}
	for rows.Next() {
		var o, key string
		var l Life
		var xid pgtype.Text
		var kx pgtype.Timestamptz
		if err := rows.Scan(&o, &key, &xid, &l.Revisions, &l.Executions, &l.Reviews, &l.Messages, &l.RunAudits, &l.Actions,
			&l.First, &l.Last, &kx); err != nil {
			rows.Close()
			return nil, next, false, 0, wrapLives(err)
		}
		l.XID = store.TextPtr(xid)
		if kx.Valid && kx.InfinityModifier == pgtype.Finite {
			t := kx.Time
			l.KeyExpiresAt = &t
		}
		if len(out) == 0 || out[len(out)-1].Key != key {
			out = append(out, KeyLives{OwnerID: o, Key: key})
		}
		k := &out[len(out)-1]
		k.Lives = append(k.Lives, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, next, false, 0, wrapLives(err)
	}
	keyRows, err := db.Q(ctx).Query(ctx, `SELECT idempotency_key, status, operation, reserved_xid::text, created_at, expires_at
		FROM idempotency_record WHERE owner_id = $1 AND idempotency_key > $2 AND idempotency_key <= $3`, rng...)
	if err != nil {
		return nil, next, false, 0, wrapLives(err)
	}
	facts := map[string]*KeyRowFacts{}
	for keyRows.Next() {
		var key string
		var f KeyRowFacts
		var xid pgtype.Text
		if err := keyRows.Scan(&key, &f.Status, &f.Operation, &xid, &f.CreatedAt, &f.ExpiresAt); err != nil {
			keyRows.Close()
			return nil, next, false, 0, wrapLives(err)
		}
		f.ReservedXID = store.TextPtr(xid)
		facts[key] = &f
	}
	keyRows.Close()
	if err := keyRows.Err(); err != nil {
		return nil, next, false, 0, wrapLives(err)
	}
	for i := range out {
		out[i].Row = facts[out[i].Key]
	}
	more = p.Owner == "" || n >= p.Limit
	return out, Cursor{Owner: owner, ID: hiKey}, more, n, nil
}

func wrapLives(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("verify key lives: %w", err)
}

// Estimate is about how many rows of each table a verify of owner ("" every owner) since
// since (zero: all) reads: counted through the owner's indexes for one owner, the planner's
// estimate (pg_class.reltuples) for every owner.
func Estimate(ctx context.Context, db *store.DB, owner string, since time.Time) (map[string]int64, error) {
	type table struct{ name, table, at string }
	tables := []table{{"keys", "idempotency_record", "updated_at"}, {"records", "record", "updated_at"},
		{"revisions", "record_revision", "created_at"}, {"executions", "feature_execution", "updated_at"},
		{"outboxMessages", "outbox_message", "updated_at"}, {"auditEvents", "audit_event", "at"}}
	out := map[string]int64{}
	var parts []string
	var args []any
	if owner != "" {
		args = append(args, owner)
	}
	for _, t := range tables {
		switch {
		case owner != "" && since.IsZero():
			parts = append(parts, `(SELECT count(*) FROM `+t.table+` WHERE owner_id = $1)`)
		case owner != "":
			parts = append(parts, `(SELECT count(*) FROM `+t.table+` WHERE owner_id = $1 AND `+t.at+` >= $2)`)
		default:
			// reltuples is -1 before the table was first analysed (a young, small table): count it.
			parts = append(parts, `(SELECT CASE WHEN c.reltuples >= 0 THEN c.reltuples::bigint ELSE (SELECT count(*) FROM `+t.table+`) END
				FROM pg_catalog.pg_class c WHERE c.oid = '`+t.table+`'::regclass)`)
		}
	}
	if owner != "" && !since.IsZero() {
		args = append(args, since)
	}
	vals := make([]int64, len(tables))
	dest := make([]any, len(tables))
	for i := range vals {
		dest[i] = &vals[i]
	}
	if err := db.Q(ctx).QueryRow(ctx, `SELECT `+strings.Join(parts, ", "), args...).Scan(dest...); err != nil {
		return nil, fmt.Errorf("estimate the rows to verify: %w", err)
	}
	for i, t := range tables {
		out[t.name] = vals[i]
	}
	return out, nil
}

// OutboxTallyRow is what became of the outbox messages of some owners.
type OutboxTallyRow struct {
	Queued, Delivered, Failed, Pending int
	// FailedIDs and PendingIDs name up to a given number of them.
	FailedIDs, PendingIDs []string
}

// OutboxTally counts the outbox messages of owners by status, naming up to name of the failed and
// of the pending ones (a soak reconciles what it queued with this).
func OutboxTally(ctx context.Context, db *store.DB, owners []string, name int) (OutboxTallyRow, error) {
	var t OutboxTallyRow
	err := db.Q(ctx).QueryRow(ctx, `SELECT count(*)::int, (count(*) FILTER (WHERE status = 'DELIVERED'))::int,
			(count(*) FILTER (WHERE status = 'FAILED'))::int, (count(*) FILTER (WHERE status = 'PENDING'))::int,
			coalesce((array_agg(id ORDER BY id) FILTER (WHERE status = 'FAILED'))[1:$2], '{}'),
			coalesce((array_agg(id ORDER BY id) FILTER (WHERE status = 'PENDING'))[1:$2], '{}')
		FROM outbox_message WHERE owner_id = ANY($1)`, owners, name).
		Scan(&t.Queued, &t.Delivered, &t.Failed, &t.Pending, &t.FailedIDs, &t.PendingIDs)
	if err != nil {
		return t, fmt.Errorf("tally the outbox: %w", err)
	}
	return t, nil
}
