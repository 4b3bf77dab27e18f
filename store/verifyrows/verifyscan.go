package verifyrows

import (
	"context"
	"fmt"
	"strings"

	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/replay"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Whole-scope reads of verify: when it checks everything of one owner or of all (no --since),
// each pass is one statement streamed row by row, its related rows joined set-wise — hash or
// merge joins over whole tables that PostgreSQL reads in one pass each — instead of keyset pages
// that look each related row up by its key. Looked up one by one, in the pass's order rather
// than the heap's, a million-event owner's related rows are a million random heap reads per
// pass, most of them outside shared_buffers: the pages grew superlinearly with the owner. The
// rows stream (pgx reads them off the connection as they are scanned): memory stays bounded by
// one row, PostgreSQL keeps producing while Go checks, and ctx cancels the statement.
//
// The passes other than the lives' need no order (each row is judged on its own): their rows
// come in whatever order the plan yields them, so that a million wide rows are not sorted — a
// sort that spills to disk past work_mem — only to be checked one at a time. (Their examples
// are then the first the plan met, not the first in key order.)
//
// With --since the pages stay (Keys, Records, …): they read only what was written
// since, where a whole-table join would read everything.

// Scope is what a whole-scope read covers: Owner's rows ("" every owner's).
type Scope struct{ Owner string }

// cond is the scope's condition on alias's owner_id ($1 when it names an owner).
func (s Scope) cond(alias string) string {
	if s.Owner == "" {
		return "true"
	}
	return alias + ".owner_id = $1"
}

func (s Scope) args() []any {
	if s.Owner == "" {
		return nil
	}
	return []any{s.Owner}
}

// sql replaces {scope:alias} in q by the scope's condition on alias.
func (s Scope) sql(q string) string {
	for {
		i := strings.Index(q, "{scope:")
		if i < 0 {
			return q
		}
		j := strings.IndexByte(q[i:], '}')
		q = q[:i] + s.cond(q[i+len("{scope:"):i+j]) + q[i+j+1:]
	}
}

// verifyStream runs q over the scope and hands each row, as scan reads it, to fn; fn's error
// ends the read.
func verifyStream[T any](ctx context.Context, db *store.DB, what string, s Scope, q string,
	scan func(pgx.CollectableRow) (T, error), fn func(T) error) error {
	rows, err := db.Q(ctx).Query(ctx, s.sql(q), s.args()...)
	if err != nil {
		return fmt.Errorf("verify %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		x, err := scan(rows)
		if err != nil {
			return fmt.Errorf("verify %s: %w", what, err)
		}
		if err := fn(x); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("verify %s: %w", what, err)
	}
	return nil
}

// verifyRecordsScanSQL: each record with its revisions' count and range, and whether its latest
// revision's snapshot is the row (Records' columns).
const verifyRecordsScanSQL = `SELECT r.owner_id, r.id, r.module_code, r.revision, r.title, r.summary,
		COALESCE(rv.n, 0), COALESCE(rv.lo, 0), COALESCE(rv.hi, 0),
		v.revision IS NOT NULL AND v.snapshot->>'title' IS NOT DISTINCT FROM r.title AND v.snapshot->>'summary' IS NOT DISTINCT FROM r.summary
			AND v.snapshot->'payload' IS NOT DISTINCT FROM r.payload
	FROM record r
	LEFT JOIN (SELECT q.owner_id, q.record_id, count(*)::int AS n, min(q.revision) AS lo, max(q.revision) AS hi
		FROM record_revision q WHERE {scope:q} GROUP BY q.owner_id, q.record_id) rv ON rv.owner_id = r.owner_id AND rv.record_id = r.id
	LEFT JOIN record_revision v ON v.owner_id = r.owner_id AND v.record_id = r.id AND v.revision = r.revision
	WHERE {scope:r}`

// RecordsScan streams every record of the scope, as Records reads a page of them.
func RecordsScan(ctx context.Context, db *store.DB, s Scope, fn func(RecordRow) error) error {
	return verifyStream(ctx, db, "records", s, verifyRecordsScanSQL, scanVerifyRecord, fn)
}

// verifyRevisionsScanSQL: each revision with its record, its previous revision's digest (the
// row before it in its record's order, when that is revision - 1: a missing revision breaks
// the chain) and its write's audit events (Revisions' columns).
var verifyRevisionsScanSQL = `SELECT rv.owner_id, rv.record_id, rv.revision, rv.snapshot, rv.idempotency_key, rv.created_at,
		p.owner_id, p.id, p.module_code, rv.written_xid::text, rv.digest,
		CASE WHEN rv.lag_revision = rv.revision - 1 THEN rv.lag_digest END,
		COALESCE(a.n, 0)
	FROM (SELECT q.owner_id, q.record_id, q.revision, q.snapshot, q.idempotency_key, q.created_at, q.written_xid, q.digest,
			lag(q.revision) OVER w AS lag_revision, lag(q.digest) OVER w AS lag_digest
		FROM record_revision q WHERE {scope:q}
		WINDOW w AS (PARTITION BY q.owner_id, q.record_id ORDER BY q.revision)) rv
	LEFT JOIN record p ON p.owner_id = rv.owner_id AND p.id = rv.record_id
	LEFT JOIN (SELECT a.owner_id, a.record_id, a.revision, count(*)::int AS n
		FROM audit_event a WHERE {scope:a} AND a.record_id IS NOT NULL AND a.revision IS NOT NULL AND ` + store.RevisionWriteActionSQL("a.action") + `
		GROUP BY a.owner_id, a.record_id, a.revision) a ON a.owner_id = rv.owner_id AND a.record_id = rv.record_id AND a.revision = rv.revision`

// RevisionsScan streams every revision of the scope, as Revisions reads a page.
func RevisionsScan(ctx context.Context, db *store.DB, s Scope, fn func(RevisionRow) error) error {
	return verifyStream(ctx, db, "revisions", s, verifyRevisionsScanSQL, scanVerifyRevision, fn)
}

// verifyExecutionsScanSQL: each execution with its record, its revision, the actions of its
// audit events and its outbox messages (Executions' columns). The audit events are
// grouped per execution first; which of them are its run and its settle depends on its
// feature, so they are counted from the group's actions.
var verifyExecutionsScanSQL = func() string {
	count := func(actions string) string {
		return `(SELECT count(*)::int FROM unnest(au.actions) x WHERE x IN (` + actions + `))`
	}
	return `SELECT ` + store.Prefixed("e.", store.ExecutionColumns) + `, e.written_xid::text, e.digest, v.digest,
		p.id IS NOT NULL, v.revision IS NOT NULL,
		COALESCE(` + count(runActionsSQL) + `, 0), COALESCE(` + count(settleActionsSQL) + `, 0),
		COALESCE((SELECT max(x) FROM unnest(au.actions) x WHERE x IN (` + settleActionsSQL + `)), ''),
		COALESCE(m.n, 0)
	FROM feature_execution e
	LEFT JOIN record p ON p.owner_id = e.owner_id AND p.module_code = e.module_code AND p.id = e.record_id
	LEFT JOIN record_revision v ON v.owner_id = e.owner_id AND v.record_id = e.record_id AND v.revision = e.record_revision
	LEFT JOIN (SELECT a.owner_id, a.record_id, a.execution_id, array_agg(a.action) AS actions
		FROM audit_event a WHERE {scope:a} AND a.execution_id IS NOT NULL AND a.record_id IS NOT NULL
		GROUP BY a.owner_id, a.record_id, a.execution_id) au ON au.owner_id = e.owner_id AND au.record_id = e.record_id AND au.execution_id = e.id
	LEFT JOIN (SELECT m.owner_id, m.execution_id, count(*)::int AS n FROM outbox_message m WHERE {scope:m}
		GROUP BY m.owner_id, m.execution_id) m ON m.owner_id = e.owner_id AND m.execution_id = e.id
	WHERE {scope:e}`
}()

// ExecutionsScan streams every execution of the scope, as Executions reads a page.
func ExecutionsScan(ctx context.Context, db *store.DB, s Scope, fn func(ExecutionRow) error) error {
	return verifyStream(ctx, db, "executions", s, verifyExecutionsScanSQL, scanVerifyExecution, fn)
}

// verifyKeysScanSQL: each key row with the rows its result references, without their content
// (Keys' light columns: the revisions and executions passes judged every one). The
// references are taken out of the envelope once per key, then joined.
// verifyKeysScanSQL is KeysScan's statement for where the results keep their references.
func verifyKeysScanSQL(refs store.ReplayRefs) string {
	return `SELECT k.owner_id, k.idempotency_key, k.operation, k.status, k.response::text, k.expires_at, k.reserved_xid::text,
		` + replay.RevisionColumns + `, ` + replay.ExecutionColumns + `,
		pf_r.id, pf_r.owner_id, pf_r.module_code, pf_r.record_id, pf_r.record_revision, pf_r.verdict, pf_r.comment, pf_r.idempotency_key, pf_r.created_at
	FROM (SELECT k.owner_id, k.idempotency_key, k.operation, k.status, k.response, k.expires_at, k.reserved_xid,
			` + store.RefText(refs.RecordID) + ` AS record_ref,
			` + store.RefInt(refs.Revision) + ` AS revision_ref,
			` + store.RefText(refs.ExecutionID) + ` AS execution_ref, ` + store.RefText(refs.ReviewID) + ` AS review_ref
		FROM idempotency_record k WHERE {scope:k} OFFSET 0) k
	LEFT JOIN (SELECT rv.owner_id, rv.record_id, rv.revision, NULL::jsonb AS snapshot, rv.idempotency_key, rv.created_at,
			p.owner_id AS parent_owner, p.id AS parent_id, p.module_code AS parent_module,
			rv.written_xid::text AS xid, NULL::bytea AS digest, NULL::bytea AS prev_digest
		FROM record_revision rv JOIN record p ON p.owner_id = rv.owner_id AND p.id = rv.record_id
		WHERE {scope:rv}) pf_rv ON pf_rv.owner_id = k.owner_id AND pf_rv.record_id = k.record_ref AND pf_rv.revision = k.revision_ref
	LEFT JOIN (SELECT e.id, e.owner_id, e.module_code, e.record_id, e.feature_id, e.mode, e.status,
			e.record_revision, NULL::jsonb AS input, NULL::jsonb AS output, e.idempotency_key, e.created_at, e.updated_at,
			e.written_xid::text AS xid, NULL::bytea AS digest, NULL::bytea AS revision_digest
		FROM feature_execution e WHERE {scope:e}) pf_e ON pf_e.owner_id = k.owner_id AND pf_e.id = k.execution_ref AND pf_e.record_id = k.record_ref
	LEFT JOIN commitment_review pf_r ON pf_r.owner_id = k.owner_id AND pf_r.record_id = k.record_ref AND pf_r.id = k.review_ref`
}

// KeysScan streams every key row of the scope with the rows its result references at
// refs, as Keys reads a light page.
func KeysScan(ctx context.Context, db *store.DB, refs store.ReplayRefs, s Scope, fn func(KeyRow) error) error {
	return verifyStream(ctx, db, "keys", s, verifyKeysScanSQL(refs), newKeyScanner().scan, fn)
}

const verifyOutboxScanSQL = `SELECT m.owner_id, m.id, m.execution_id, m.status, e.id IS NOT NULL, COALESCE(e.mode, ''), COALESCE(e.status, ''),
		m.idempotency_key, e.idempotency_key, m.payload_ref::text
	FROM outbox_message m LEFT JOIN feature_execution e ON e.owner_id = m.owner_id AND e.id = m.execution_id
	WHERE {scope:m}`

// OutboxScan streams every outbox message of the scope, as Outbox reads a page.
func OutboxScan(ctx context.Context, db *store.DB, s Scope, fn func(OutboxRow) error) error {
	return verifyStream(ctx, db, "outbox messages", s, verifyOutboxScanSQL, scanVerifyOutbox, fn)
}

// verifyAuditScanSQL: each audit event, with a MEM-001 record's contents (the MEM-001 records
// alone are joined, through their (owner_id, module_code, id) index).
const verifyAuditScanSQL = `SELECT a.owner_id, a.id, a.module_code, a.action, a.record_id, a.detail::text, r.orig, r.cur
	FROM audit_event a
	LEFT JOIN (SELECT r.owner_id, r.id, r.payload->>'originalContent' AS orig, r.payload->>'currentContent' AS cur
		FROM record r WHERE {scope:r} AND r.module_code = 'MEM-001') r ON a.module_code = 'MEM-001' AND r.owner_id = a.owner_id AND r.id = a.record_id
	WHERE {scope:a}`

// AuditScan streams every audit event of the scope, as Audit reads a page.
func AuditScan(ctx context.Context, db *store.DB, s Scope, fn func(AuditRow) error) error {
	return verifyStream(ctx, db, "audit events", s, verifyAuditScanSQL, scanVerifyAudit, fn)
}

// verifyLivesScanSQL: every key's lives (verifyLivesSQL's groups over the whole scope), each
// row with its key row's facts (NULL without one), in key order and a key's lives oldest first.
var verifyLivesScanSQL = func() string {
	const scoped = `{scope:t} AND t.idempotency_key IS NOT NULL`
	var parts []string
	for _, t := range verifyLivesTables {
		parts = append(parts, `SELECT t.owner_id, t.idempotency_key, t.written_xid, `+t.counts+`, NULL::text AS action, t.`+t.at+` AS at, NULL::timestamptz AS kx
			FROM `+t.table+` t WHERE `+scoped)
	}
	parts = append(parts, `SELECT t.owner_id, t.idempotency_key, t.written_xid, 0, 0, 0, 0, t.action, t.at, t.key_expires_at
			FROM audit_event t WHERE `+scoped+` AND t.action !~ '`+store.SettleActionPattern+`'`)
	return `SELECT l.owner_id, l.idempotency_key, l.xid, l.rv, l.ex, l.re, l.ms, l.runs, l.actions, l.first, l.last, l.kx,
			k.status, k.operation, k.reserved_xid::text, k.created_at, k.expires_at
		FROM (SELECT owner_id, idempotency_key, written_xid::text AS xid, sum(rv)::int AS rv, sum(ex)::int AS ex, sum(re)::int AS re,
				sum(ms)::int AS ms, count(action)::int AS runs,
				coalesce(array_agg(DISTINCT action) FILTER (WHERE action IS NOT NULL), '{}') AS actions, min(at) AS first, max(at) AS last, max(kx) AS kx
			FROM (` + strings.Join(parts, "\n\t\tUNION ALL ") + `) AS r (owner_id, idempotency_key, written_xid, rv, ex, re, ms, action, at, kx)
			GROUP BY owner_id, idempotency_key, written_xid) l
		LEFT JOIN idempotency_record k ON k.owner_id = l.owner_id AND k.idempotency_key = l.idempotency_key
		ORDER BY l.owner_id, l.idempotency_key, l.first`
}()

// verifyLifeRow is one life with its key's row.
type verifyLifeRow struct {
	owner, key string
	life       Life
	row        *KeyRowFacts
}

func scanVerifyLife(r pgx.CollectableRow) (verifyLifeRow, error) {
	var x verifyLifeRow
	var xid, status, op, rxid pgtype.Text
	var kx, created, expires pgtype.Timestamptz
	l := &x.life
	err := r.Scan(&x.owner, &x.key, &xid, &l.Revisions, &l.Executions, &l.Reviews, &l.Messages, &l.RunAudits, &l.Actions,
		&l.First, &l.Last, &kx, &status, &op, &rxid, &created, &expires)
	l.XID = store.TextPtr(xid)
	if kx.Valid && kx.InfinityModifier == pgtype.Finite {
		t := kx.Time
		l.KeyExpiresAt = &t
	}
	if status.Valid {
		x.row = &KeyRowFacts{Status: status.String, Operation: op.String, ReservedXID: store.TextPtr(rxid), CreatedAt: created.Time, ExpiresAt: expires.Time}
	}
	return x, err
}

// KeyLivesScan streams the lives of every key of the scope with rows written under it, a
// key at a time with its row, as KeyLivesPage reads a page of them. read is the key's audit
// events of a run (what the progress counts).
func KeyLivesScan(ctx context.Context, db *store.DB, s Scope, fn func(k KeyLives, read int) error) error {
	var cur KeyLives
	read := 0
	flush := func() error {
		if len(cur.Lives) == 0 {
			return nil
		}
		k, n := cur, read
		cur, read = KeyLives{}, 0
		return fn(k, n)
	}
	err := verifyStream(ctx, db, "key lives", s, verifyLivesScanSQL, scanVerifyLife, func(x verifyLifeRow) error {
		if len(cur.Lives) > 0 && (cur.OwnerID != x.owner || cur.Key != x.key) {
			if err := flush(); err != nil {
				return err
			}
		}
		if len(cur.Lives) == 0 {
			cur = KeyLives{OwnerID: x.owner, Key: x.key, Row: x.row}
		}
		cur.Lives = append(cur.Lives, x.life)
		read += x.life.RunAudits
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}
