package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"idemwork/apperr"
)

// Read models serve the CLI's inspection commands and the TUI. They read through sqlx over the
// same pool, outside any write transaction, and page with keyset cursors so an owner with a
// million events costs the same per page as one with ten.

// MaxPage caps a page.
const MaxPage = 500

// Cursor is an opaque keyset position: a time and a tie-breaking id (and kind, for timelines).
type Cursor struct {
	At   time.Time `json:"t"`
	Kind string    `json:"k,omitempty"`
	ID   string    `json:"i"`
}

// Encode makes the cursor opaque for users.
func (c Cursor) Encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor parses a cursor from Encode; "" is the start.
func DecodeCursor(s string) (*Cursor, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var c Cursor
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.ID == "" {
		return nil, apperr.New(apperr.ValidationFailed, "cursor: %q is not a cursor printed by idemwork", s)
	}
	return &c, nil
}

func clampLimit(n int) int {
	if n <= 0 {
		return 50
	}
	if n > MaxPage {
		return MaxPage
	}
	return n
}

// page trims a limit+1 result to limit and returns the next cursor. An empty page is an empty
// list, never nil, so JSON shows [] rather than null.
func page[T any](rows []T, limit int, cursorOf func(T) Cursor) ([]T, string) {
	if rows == nil {
		rows = []T{}
	}
	if len(rows) <= limit {
		return rows, ""
	}
	rows = rows[:limit]
	return rows, cursorOf(rows[len(rows)-1]).Encode()
}

// RecordPage lists an owner's records, newest first, optionally of one module.
func (db *DB) RecordPage(ctx context.Context, owner, module string, limit int, cursor string) ([]Record, string, error) {
	limit = clampLimit(limit)
	c, err := DecodeCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	q := `SELECT ` + recordColumns + ` FROM record WHERE owner_id = $1 AND ($2 = '' OR module_code = $2)`
	args := []any{owner, module}
	if c != nil {
		q += ` AND (created_at, id) < ($3, $4)`
		args = append(args, c.At, c.ID)
	}
	q += fmt.Sprintf(` ORDER BY created_at DESC, id DESC LIMIT %d`, limit+1)
	var rows []Record
	if err := db.X.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, "", fmt.Errorf("list records: %w", err)
	}
	out, next := page(rows, limit, func(r Record) Cursor { return Cursor{At: r.CreatedAt, ID: r.ID} })
	return out, next, nil
}

// RecordDetail is one record with its revisions, executions and audit events.
type RecordDetail struct {
	Record     Record       `json:"record"`
	Revisions  []Revision   `json:"revisions"`
	Executions []Execution  `json:"executions"`
	Audit      []AuditEvent `json:"audit"`
}

// detailCap bounds each list of one record's detail (newest kept).
const detailCap = 1000

// GetRecordDetail reads a record of owner and module with its history (each list capped at the
// newest 1000, oldest first).
func (db *DB) GetRecordDetail(ctx context.Context, owner, module, id string) (RecordDetail, error) {
	// Empty lists print as [], never null (SPEC §10.2 shapes).
	d := RecordDetail{Revisions: []Revision{}, Executions: []Execution{}, Audit: []AuditEvent{}}
	err := db.X.GetContext(ctx, &d.Record, `SELECT `+recordColumns+` FROM record WHERE owner_id = $1 AND module_code = $2 AND id = $3`, owner, module, id)
	if errors.Is(err, sql.ErrNoRows) {
		return d, apperr.New(apperr.RecordNotFound, "owner %s has no %s record %s", owner, module, id)
	}
	if err != nil {
		return d, fmt.Errorf("read record: %w", err)
	}
	if err := db.X.SelectContext(ctx, &d.Revisions, `SELECT * FROM (SELECT owner_id, record_id, revision, snapshot, idempotency_key, created_at
		FROM record_revision WHERE owner_id = $1 AND record_id = $2 ORDER BY revision DESC LIMIT $3) r ORDER BY revision`, owner, id, detailCap); err != nil {
		return d, fmt.Errorf("read revisions: %w", err)
	}
	if err := db.X.SelectContext(ctx, &d.Executions, `SELECT * FROM (SELECT `+executionColumns+` FROM feature_execution
		WHERE owner_id = $1 AND record_id = $2 AND module_code = $3 ORDER BY created_at DESC, id DESC LIMIT $4) e ORDER BY created_at, id`, owner, id, module, detailCap); err != nil {
		return d, fmt.Errorf("read executions: %w", err)
	}
	if err := db.X.SelectContext(ctx, &d.Audit, `SELECT * FROM (SELECT `+auditColumns+` FROM audit_event
		WHERE owner_id = $1 AND record_id = $2 ORDER BY at DESC, id DESC LIMIT $3) a ORDER BY at, id`, owner, id, detailCap); err != nil {
		return d, fmt.Errorf("read audit: %w", err)
	}
	return d, nil
}

const auditColumns = `id, owner_id, module_code, record_id, action, revision, execution_id, idempotency_key, detail, at`

// KeyPage lists an owner's idempotency rows, newest first.
func (db *DB) KeyPage(ctx context.Context, owner string, limit int, cursor string) ([]KeyRow, string, error) {
	limit = clampLimit(limit)
	c, err := DecodeCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	q := `SELECT owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at
		FROM idempotency_record WHERE owner_id = $1`
	args := []any{owner}
	if c != nil {
		q += ` AND (created_at < $2 OR (created_at = $2 AND idempotency_key > $3))`
		args = append(args, c.At, c.ID)
	}
	q += fmt.Sprintf(` ORDER BY created_at DESC, idempotency_key LIMIT %d`, limit+1)
	var rows []KeyRow
	if err := db.X.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, "", fmt.Errorf("list keys: %w", err)
	}
	out, next := page(rows, limit, func(r KeyRow) Cursor { return Cursor{At: r.CreatedAt, ID: r.Key} })
	return out, next, nil
}

// GetKey reads one idempotency row.
func (db *DB) GetKey(ctx context.Context, owner, key string) (KeyRow, error) {
	var r KeyRow
	err := db.X.GetContext(ctx, &r, `SELECT owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at
		FROM idempotency_record WHERE owner_id = $1 AND idempotency_key = $2`, owner, key)
	if errors.Is(err, sql.ErrNoRows) {
		return r, apperr.New(apperr.NotFound, "owner %s has no idempotency key %q", owner, key)
	}
	if err != nil {
		return r, fmt.Errorf("read key: %w", err)
	}
	return r, nil
}

// AuditForKey lists the audit events a key's requests wrote (at most 100).
func (db *DB) AuditForKey(ctx context.Context, owner, key string) ([]AuditEvent, error) {
	var rows []AuditEvent
	err := db.X.SelectContext(ctx, &rows, `SELECT `+auditColumns+` FROM audit_event
		WHERE owner_id = $1 AND idempotency_key = $2 ORDER BY at, id LIMIT 100`, owner, key)
	if err != nil {
		return nil, fmt.Errorf("read audit of key: %w", err)
	}
	return rows, nil
}

// LatestRecord reads the current row of a record of owner and module.
func (db *DB) LatestRecord(ctx context.Context, owner, module, id string) (Record, error) {
	var r Record
	err := db.X.GetContext(ctx, &r, `SELECT `+recordColumns+` FROM record WHERE owner_id = $1 AND module_code = $2 AND id = $3`, owner, module, id)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	return r, err
}

// ExecutionPage lists an owner's executions, newest first.
func (db *DB) ExecutionPage(ctx context.Context, owner string, limit int, cursor string) ([]Execution, string, error) {
	limit = clampLimit(limit)
	c, err := DecodeCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	q := `SELECT ` + executionColumns + ` FROM feature_execution WHERE owner_id = $1`
	args := []any{owner}
	if c != nil {
		q += ` AND (created_at, id) < ($2, $3)`
		args = append(args, c.At, c.ID)
	}
	q += fmt.Sprintf(` ORDER BY created_at DESC, id DESC LIMIT %d`, limit+1)
	var rows []Execution
	if err := db.X.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, "", fmt.Errorf("list executions: %w", err)
	}
	out, next := page(rows, limit, func(e Execution) Cursor { return Cursor{At: e.CreatedAt, ID: e.ID} })
	return out, next, nil
}

// AuditPage lists an owner's audit events, newest first; action filters by a prefix.
func (db *DB) AuditPage(ctx context.Context, owner, actionPrefix string, limit int, cursor string) ([]AuditEvent, string, error) {
	limit = clampLimit(limit)
	c, err := DecodeCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	q, args := auditPageSQL(owner, actionPrefix, limit, c)
	var rows []AuditEvent
	if err := db.X.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, "", fmt.Errorf("list audit: %w", err)
	}
	out, next := page(rows, limit, func(a AuditEvent) Cursor { return Cursor{At: a.At, ID: a.ID} })
	return out, next, nil
}

func auditPageSQL(owner, actionPrefix string, limit int, c *Cursor) (string, []any) {
	q := `SELECT ` + auditColumns + ` FROM audit_event WHERE owner_id = $1 AND ($2 = '' OR action LIKE $2 || '%')`
	args := []any{owner, strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(actionPrefix)}
	if c != nil {
		q += ` AND (at, id) < ($3, $4)`
		args = append(args, c.At, c.ID)
	}
	q += fmt.Sprintf(` ORDER BY at DESC, id DESC LIMIT %d`, limit+1)
	return q, args
}

// OutboxPage lists an owner's outbox messages, newest first.
func (db *DB) OutboxPage(ctx context.Context, owner string, limit int, cursor string) ([]OutboxMessage, string, error) {
	limit = clampLimit(limit)
	c, err := DecodeCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	q := `SELECT id, owner_id, execution_id, provider, payload_ref, idempotency_id, status, attempts, next_attempt_at, last_error, created_at, updated_at
		FROM outbox_message WHERE owner_id = $1`
	args := []any{owner}
	if c != nil {
		q += ` AND (created_at, id) < ($2, $3)`
		args = append(args, c.At, c.ID)
	}
	q += fmt.Sprintf(` ORDER BY created_at DESC, id DESC LIMIT %d`, limit+1)
	var rows []OutboxMessage
	if err := db.X.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, "", fmt.Errorf("list outbox: %w", err)
	}
	out, next := page(rows, limit, func(m OutboxMessage) Cursor { return Cursor{At: m.CreatedAt, ID: m.ID} })
	return out, next, nil
}

// Event is one entry of an owner's merged timeline.
type Event struct {
	At          time.Time `json:"at" db:"at"`
	Kind        string    `json:"kind" db:"kind"` // audit | execution | key | revision
	ID          string    `json:"id" db:"id"`
	ModuleCode  *string   `json:"moduleCode,omitempty" db:"module_code"`
	RecordID    *string   `json:"recordId,omitempty" db:"record_id"`
	Revision    *int      `json:"revision,omitempty" db:"revision"`
	ExecutionID *string   `json:"executionId,omitempty" db:"execution_id"`
	Action      *string   `json:"action,omitempty" db:"action"`
	Key         *string   `json:"key,omitempty" db:"idempotency_key"`
	Status      *string   `json:"status,omitempty" db:"status"`
	Operation   *string   `json:"operation,omitempty" db:"operation"`
	FeatureID   *string   `json:"featureId,omitempty" db:"feature_id"`
	Mode        *string   `json:"mode,omitempty" db:"mode"`
}

// History returns one page of the owner's merged timeline (audit events, executions, keys and
// revisions) in time order, oldest first, or newest first when desc. Each source is read through
// its (owner_id, time) index with the page's limit, so a page costs the same however long the
// history is.
func (db *DB) History(ctx context.Context, owner string, limit int, cursor string, desc bool) ([]Event, string, error) {
	limit = clampLimit(limit)
	c, err := DecodeCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	q, args := historySQL(owner, limit, c, desc)
	var rows []Event
	if err := db.X.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, "", fmt.Errorf("read history: %w", err)
	}
	out, next := page(rows, limit, func(e Event) Cursor { return Cursor{At: e.At, Kind: e.Kind, ID: e.ID} })
	return out, next, nil
}

// historySQL builds the merged timeline query: one index-ordered, limited subquery per source,
// merged and limited again.
func historySQL(owner string, limit int, c *Cursor, desc bool) (string, []any) {
	cmp, order := ">", "ASC"
	if desc {
		cmp, order = "<", "DESC"
	}
	// after(kind, timeCol, idExpr) is the keyset condition (time, kind, id) beyond the cursor.
	after := func(kind, timeCol, idExpr string) string {
		if c == nil {
			return ""
		}
		return fmt.Sprintf(` AND %[1]s %[2]s= $2 AND (%[1]s %[2]s $2 OR '%[3]s' %[2]s $3 OR ('%[3]s' = $3 AND %[4]s %[2]s $4))`,
			timeCol, cmp, kind, idExpr)
	}
	sub := func(kind, timeCol, idExpr, cols, table string) string {
		return fmt.Sprintf(`(SELECT %[1]s AS at, '%[2]s' AS kind, %[3]s AS id, %[4]s FROM %[5]s WHERE owner_id = $1%[6]s ORDER BY %[1]s %[7]s, %[3]s %[7]s LIMIT %[8]d)`,
			timeCol, kind, idExpr, cols, table, after(kind, timeCol, idExpr), order, limit+1)
	}
	revID := `record_id || ':' || lpad(revision::text, 10, '0')`
	q := strings.Join([]string{
		sub("audit", "at", "id", `module_code, record_id, revision, execution_id, action, idempotency_key, NULL::text AS status, NULL::text AS operation, NULL::text AS feature_id, NULL::text AS mode`, "audit_event"),
		sub("execution", "created_at", "id", `module_code, record_id, record_revision, id, NULL, idempotency_key, status, NULL, feature_id, mode`, "feature_execution"),
		sub("key", "created_at", "idempotency_key", `NULL, NULL, NULL, NULL, NULL, idempotency_key, status, operation, NULL, NULL`, "idempotency_record"),
		sub("revision", "created_at", revID, `snapshot->>'moduleCode', record_id, revision, NULL, NULL, idempotency_key, NULL, NULL, NULL, NULL`, "record_revision"),
	}, " UNION ALL ") + fmt.Sprintf(` ORDER BY at %[1]s, kind %[1]s, id %[1]s LIMIT %[2]d`, order, limit+1)
	args := []any{owner}
	if c != nil {
		args = append(args, c.At, c.Kind, c.ID)
	}
	return q, args
}
