package readmodel

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// Read models serve the CLI's inspection commands, the HTTP reads and the TUI. They read through
// sqlx over the same pool, outside any write transaction, and page with keyset cursors so an
// owner with a million events costs the same per page as one with ten. A search narrows a page
// in the database, never in the caller: a prefix is a range of an index (keys and actions are
// COLLATE "C", migration 0002), so a page of matches reads about one page of rows.

// MaxPage caps a page.
const MaxPage = 500

// Cursor is an opaque keyset position: a time and a tie-breaking id, the kind for timelines, and
// the key (or record id) for pages in key order.
type Cursor struct {
	Key  string    `json:"y,omitempty"`
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

// prefixRange returns the byte-order range [p, upper) holding exactly the strings that start
// with p. p is visible ASCII (checked by the caller), so its last byte can always grow by one.
func prefixRange(p string) (string, string) {
	b := []byte(p)
	b[len(b)-1]++
	return p, string(b)
}

// checkVisiblePrefix is the key rule (SPEC §9: visible ASCII) applied to a search prefix.
func checkVisiblePrefix(field, p string) error {
	if len(p) > 255 {
		return apperr.New(apperr.ValidationFailed, "%s: a prefix of at most 255 characters", field)
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x21 || p[i] > 0x7e {
			return apperr.New(apperr.ValidationFailed, "%s: byte %d (0x%02x) is not visible ASCII, which a key or action never holds", field, i, p[i])
		}
	}
	return nil
}

// NormalizeIDPrefix upper-cases a record id prefix and checks it is made of the characters
// record ids are (ULIDs: digits and upper-case letters), whose order is the same in byte order
// and in every common collation.
func NormalizeIDPrefix(p string) (string, error) {
	p = strings.ToUpper(p)
	if len(p) > 26 {
		return "", apperr.New(apperr.ValidationFailed, "record id prefix: a record id has 26 characters, got %d", len(p))
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z') {
			return "", apperr.New(apperr.ValidationFailed, "record id prefix: %q is not a character of a record id (0-9, A-Z)", c)
		}
	}
	return p, nil
}

// likeContains is an ILIKE pattern matching s anywhere.
func likeContains(s string) string {
	return "%" + strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(s) + "%"
}

// Records lists a page of the records q selects, newest first.
func Records(ctx context.Context, db *store.DB, q model.RecordQuery) ([]model.Record, string, error) {
	limit := clampLimit(q.Limit)
	c, err := DecodeCursor(q.Cursor)
	if err != nil {
		return nil, "", err
	}
	if q.IDPrefix != "" && q.TitleContains != "" {
		return nil, "", apperr.New(apperr.ValidationFailed, "search records by id prefix or by title, not both")
	}
	sqlText, args, err := recordsSQL(q, limit, c)
	if err != nil {
		return nil, "", err
	}
	var rows []model.Record
	if err := db.X.SelectContext(ctx, &rows, sqlText, args...); err != nil {
		return nil, "", fmt.Errorf("list records: %w", err)
	}
	out, next := page(rows, limit, func(r model.Record) Cursor { return Cursor{At: r.CreatedAt, ID: r.ID} })
	return out, next, nil
}

func recordsSQL(q model.RecordQuery, limit int, c *Cursor) (string, []any, error) {
	s := `SELECT ` + store.RecordColumns + ` FROM record WHERE owner_id = $1 AND ($2 = '' OR module_code = $2)`
	args := []any{q.Owner, q.Module}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	if q.IDPrefix != "" {
		p, err := NormalizeIDPrefix(q.IDPrefix)
		if err != nil {
			return "", nil, err
		}
		lo, hi := prefixRange(p)
		// Ids are ULID characters, whose order is byte order in any collation; starts_with keeps
		// the answer exact should a row hold anything else.
		s += ` AND id >= ` + arg(lo) + ` AND id < ` + arg(hi) + ` AND starts_with(id, ` + arg(p) + `)`
		if c != nil {
			s += ` AND id < ` + arg(c.ID)
		}
		return s + fmt.Sprintf(` ORDER BY id DESC LIMIT %d`, limit+1), args, nil
	}
	if q.TitleContains != "" {
		s += ` AND title ILIKE ` + arg(likeContains(q.TitleContains))
	}
	if c != nil {
		s += ` AND (created_at, id) < (` + arg(c.At) + `, ` + arg(c.ID) + `)`
	}
	return s + fmt.Sprintf(` ORDER BY created_at DESC, id DESC LIMIT %d`, limit+1), args, nil
}

// RecordDetail is one record with its revisions, executions and audit events.
type RecordDetail struct {
	Record     model.Record       `json:"record"`
	Revisions  []model.Revision   `json:"revisions"`
	Executions []model.Execution  `json:"executions"`
	Audit      []model.AuditEvent `json:"audit"`
}

// GetRecordDetail reads the record ref names with its history (each list capped at the newest
// 1000, oldest first).
func GetRecordDetail(ctx context.Context, db *store.DB, ref store.RecordRef) (RecordDetail, error) {
	// Empty lists print as [], never null (SPEC §10.2 shapes).
	d := RecordDetail{Revisions: []model.Revision{}}
	o, err := RecordOutline(ctx, db, ref)
	if err != nil {
		return d, err
	}
	d.Record, d.Executions, d.Audit = o.Record, o.Executions, o.Audit
	if err := db.X.SelectContext(ctx, &d.Revisions, `SELECT * FROM (SELECT owner_id, record_id, revision, snapshot, idempotency_key, created_at
		FROM record_revision WHERE owner_id = $1 AND record_id = $2 ORDER BY revision DESC LIMIT $3) r ORDER BY revision`, ref.Owner, ref.ID, model.DetailCap); err != nil {
		return d, fmt.Errorf("read revisions: %w", err)
	}
	return d, nil
}

// RecordOutline reads the record ref names with the heads of its revisions and its executions
// and audit events (each list capped at the newest DetailCap, oldest first).
func RecordOutline(ctx context.Context, db *store.DB, ref store.RecordRef) (model.RecordOutline, error) {
	owner, module, id := ref.Owner, ref.Module, ref.ID
	o := model.RecordOutline{Revisions: []model.RevisionHead{}, Executions: []model.Execution{}, Audit: []model.AuditEvent{}}
	err := db.X.GetContext(ctx, &o.Record, `SELECT `+store.RecordColumns+` FROM record WHERE owner_id = $1 AND module_code = $2 AND id = $3`, owner, module, id)
	if errors.Is(err, sql.ErrNoRows) {
		return o, apperr.New(apperr.RecordNotFound, "owner %s has no %s record %s", owner, module, id)
	}
	if err != nil {
		return o, fmt.Errorf("read record: %w", err)
	}
	if err := db.X.SelectContext(ctx, &o.Revisions, `SELECT * FROM (SELECT revision, idempotency_key, created_at, pg_column_size(snapshot) AS bytes
		FROM record_revision WHERE owner_id = $1 AND record_id = $2 ORDER BY revision DESC LIMIT $3) r ORDER BY revision`, owner, id, model.DetailCap); err != nil {
		return o, fmt.Errorf("read revisions: %w", err)
	}
	if err := db.X.SelectContext(ctx, &o.Executions, `SELECT * FROM (SELECT `+store.ExecutionColumns+` FROM feature_execution
		WHERE owner_id = $1 AND record_id = $2 AND module_code = $3 ORDER BY created_at DESC, id DESC LIMIT $4) e ORDER BY created_at, id`, owner, id, module, model.DetailCap); err != nil {
		return o, fmt.Errorf("read executions: %w", err)
	}
	if err := db.X.SelectContext(ctx, &o.Audit, `SELECT * FROM (SELECT `+auditColumns+` FROM audit_event
		WHERE owner_id = $1 AND record_id = $2 ORDER BY at DESC, id DESC LIMIT $3) a ORDER BY at, id`, owner, id, model.DetailCap); err != nil {
		return o, fmt.Errorf("read audit: %w", err)
	}
	return o, nil
}

// GetRevision reads one stored revision as it is (no integrity check: inspection shows what is
// there, a replay checks it).
func GetRevision(ctx context.Context, db *store.DB, owner, recordID string, revision int) (model.Revision, error) {
	var r model.Revision
	err := db.X.GetContext(ctx, &r, `SELECT owner_id, record_id, revision, snapshot, idempotency_key, created_at
		FROM record_revision WHERE owner_id = $1 AND record_id = $2 AND revision = $3`, owner, recordID, revision)
	if errors.Is(err, sql.ErrNoRows) {
		return r, apperr.New(apperr.RecordNotFound, "owner %s has no revision %d of record %s", owner, revision, recordID)
	}
	if err != nil {
		return r, fmt.Errorf("read revision: %w", err)
	}
	return r, nil
}

// RecordModule finds the module of an owner's record by id alone (a jump to a bare ULID).
func RecordModule(ctx context.Context, db *store.DB, owner, id string) (string, error) {
	var m string
	err := db.Q(ctx).QueryRow(ctx, `SELECT module_code FROM record WHERE owner_id = $1 AND id = $2`, owner, id).Scan(&m)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", apperr.New(apperr.RecordNotFound, "owner %s has no record %s (another owner's records are not visible here)", owner, id)
	}
	if err != nil {
		return "", fmt.Errorf("find record: %w", err)
	}
	return m, nil
}

const auditColumns = `id, owner_id, module_code, record_id, action, revision, execution_id, idempotency_key, detail, at`

const keyColumns = `owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at, reserved_xid::text AS reserved_xid`

// KeyPage lists an owner's idempotency rows, newest first.
func KeyPage(ctx context.Context, db *store.DB, owner string, limit int, cursor string) ([]model.KeyRow, string, error) {
	return Keys(ctx, db, model.KeyQuery{Owner: owner, Limit: limit, Cursor: cursor})
}

// Keys lists a page of the idempotency rows q selects, every status.
func Keys(ctx context.Context, db *store.DB, q model.KeyQuery) ([]model.KeyRow, string, error) {
	limit := clampLimit(q.Limit)
	c, err := DecodeCursor(q.Cursor)
	if err != nil {
		return nil, "", err
	}
	sqlText, args, err := keysSQL(q, limit, c)
	if err != nil {
		return nil, "", err
	}
	// A PROCESSING row's response is NULL (SPEC §4.1): it scans as a nil RawMessage.
	var list []model.KeyRow
	if err := db.X.SelectContext(ctx, &list, sqlText, args...); err != nil {
		return nil, "", fmt.Errorf("list keys: %w", err)
	}
	out, next := page(list, limit, func(r model.KeyRow) Cursor { return Cursor{At: r.CreatedAt, ID: r.Key} })
	return out, next, nil
}

func keysSQL(q model.KeyQuery, limit int, c *Cursor) (string, []any, error) {
	s := `SELECT ` + keyColumns + ` FROM idempotency_record WHERE owner_id = $1`
	args := []any{q.Owner}
	if q.Prefix != "" {
		if err := checkVisiblePrefix("key prefix", q.Prefix); err != nil {
			return "", nil, err
		}
		lo, hi := prefixRange(q.Prefix)
		s += ` AND idempotency_key >= $2 AND idempotency_key < $3`
		args = append(args, lo, hi)
		cmp, order := ">", ""
		if q.Reverse {
			cmp, order = "<", " DESC"
		}
		if c != nil {
			s += ` AND idempotency_key ` + cmp + ` $4`
			args = append(args, c.ID)
		}
		return s + fmt.Sprintf(` ORDER BY idempotency_key%s LIMIT %d`, order, limit+1), args, nil
	}
	if q.Reverse {
		// From the other end: the oldest first, ties by key Z→A (the index read backwards).
		if c != nil {
			s += ` AND (created_at > $2 OR (created_at = $2 AND idempotency_key < $3))`
			args = append(args, c.At, c.ID)
		}
		return s + fmt.Sprintf(` ORDER BY created_at, idempotency_key DESC LIMIT %d`, limit+1), args, nil
	}
	if c != nil {
		s += ` AND (created_at < $2 OR (created_at = $2 AND idempotency_key > $3))`
		args = append(args, c.At, c.ID)
	}
	return s + fmt.Sprintf(` ORDER BY created_at DESC, idempotency_key LIMIT %d`, limit+1), args, nil
}

// GetKey reads one idempotency row, whatever its status.
func GetKey(ctx context.Context, db *store.DB, owner, key string) (model.KeyRow, error) {
	var r model.KeyRow
	err := db.X.GetContext(ctx, &r, `SELECT `+keyColumns+` FROM idempotency_record WHERE owner_id = $1 AND idempotency_key = $2`, owner, key)
	if errors.Is(err, sql.ErrNoRows) {
		return r, apperr.New(apperr.NotFound, "owner %s has no idempotency key %q", owner, key)
	}
	if err != nil {
		return r, fmt.Errorf("read key: %w", err)
	}
	return r, nil
}

// AuditForKey lists the audit events a key's requests wrote (at most 100).
func AuditForKey(ctx context.Context, db *store.DB, owner, key string) ([]model.AuditEvent, error) {
	var rows []model.AuditEvent
	err := db.X.SelectContext(ctx, &rows, `SELECT `+auditColumns+` FROM audit_event
		WHERE owner_id = $1 AND idempotency_key = $2 ORDER BY at, id LIMIT 100`, owner, key)
	if err != nil {
		return nil, fmt.Errorf("read audit of key: %w", err)
	}
	return rows, nil
}

// LatestRecord reads the current row of the record ref names.
func LatestRecord(ctx context.Context, db *store.DB, ref store.RecordRef) (model.Record, error) {
	owner, module, id := ref.Owner, ref.Module, ref.ID
	var r model.Record
	err := db.X.GetContext(ctx, &r, `SELECT `+store.RecordColumns+` FROM record WHERE owner_id = $1 AND module_code = $2 AND id = $3`, owner, module, id)
	if errors.Is(err, sql.ErrNoRows) {
		// Coded for whoever shows it (a storm's target after an owner switch); still ErrNotFound.
		return r, apperr.Wrap(apperr.RecordNotFound, store.ErrNotFound, "owner %s has no %s record %s", owner, module, id)
	}
	if err != nil {
		return r, fmt.Errorf("read the latest record: %w", err)
	}
	return r, nil
}

// ExecutionPage lists an owner's executions, newest first.
func ExecutionPage(ctx context.Context, db *store.DB, owner string, limit int, cursor string) ([]model.Execution, string, error) {
	return Executions(ctx, db, model.ExecutionQuery{Owner: owner, Limit: limit, Cursor: cursor})
}

// Executions lists a page of the executions q selects.
func Executions(ctx context.Context, db *store.DB, q model.ExecutionQuery) ([]model.Execution, string, error) {
	limit := clampLimit(q.Limit)
	c, err := DecodeCursor(q.Cursor)
	if err != nil {
		return nil, "", err
	}
	sqlText, args, err := executionsSQL(q, limit, c)
	if err != nil {
		return nil, "", err
	}
	var rows []model.Execution
	if err := db.X.SelectContext(ctx, &rows, sqlText, args...); err != nil {
		return nil, "", fmt.Errorf("list executions: %w", err)
	}
	cursorOf := func(e model.Execution) Cursor { return Cursor{At: e.CreatedAt, ID: e.ID} }
	switch {
	case q.KeyPrefix != "":
		cursorOf = func(e model.Execution) Cursor { return Cursor{Key: deref(e.IdempotencyKey), At: e.CreatedAt, ID: e.ID} }
	case q.RecordPrefix != "":
		cursorOf = func(e model.Execution) Cursor { return Cursor{Key: e.RecordID, At: e.CreatedAt, ID: e.ID} }
	}
	out, next := page(rows, limit, cursorOf)
	return out, next, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func executionsSQL(q model.ExecutionQuery, limit int, c *Cursor) (string, []any, error) {
	s := `SELECT ` + store.ExecutionColumns + ` FROM feature_execution WHERE owner_id = $1`
	args := []any{q.Owner}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	switch {
	case q.KeyPrefix != "" && q.RecordPrefix != "":
		return "", nil, apperr.New(apperr.ValidationFailed, "search executions by key or by record, not both")
	case q.KeyPrefix != "":
		if err := checkVisiblePrefix("key prefix", q.KeyPrefix); err != nil {
			return "", nil, err
		}
		lo, hi := prefixRange(q.KeyPrefix)
		s += ` AND idempotency_key >= ` + arg(lo) + ` AND idempotency_key < ` + arg(hi)
		if c != nil {
			s += ` AND (idempotency_key, created_at, id) > (` + arg(c.Key) + `, ` + arg(c.At) + `, ` + arg(c.ID) + `)`
		}
		return s + fmt.Sprintf(` ORDER BY idempotency_key, created_at, id LIMIT %d`, limit+1), args, nil
	case q.RecordPrefix != "":
		p, err := NormalizeIDPrefix(q.RecordPrefix)
		if err != nil {
			return "", nil, err
		}
		lo, hi := prefixRange(p)
		s += ` AND record_id >= ` + arg(lo) + ` AND record_id < ` + arg(hi) + ` AND starts_with(record_id, ` + arg(p) + `)`
		if c != nil {
			s += ` AND (record_id, created_at, id) < (` + arg(c.Key) + `, ` + arg(c.At) + `, ` + arg(c.ID) + `)`
		}
		return s + fmt.Sprintf(` ORDER BY record_id DESC, created_at DESC, id DESC LIMIT %d`, limit+1), args, nil
	}
	if c != nil {
		s += ` AND (created_at, id) < (` + arg(c.At) + `, ` + arg(c.ID) + `)`
	}
	return s + fmt.Sprintf(` ORDER BY created_at DESC, id DESC LIMIT %d`, limit+1), args, nil
}

// Audit lists a page of the audit events q selects.
func Audit(ctx context.Context, db *store.DB, q model.AuditQuery) ([]model.AuditEvent, string, error) {
	limit := clampLimit(q.Limit)
	c, err := DecodeCursor(q.Cursor)
	if err != nil {
		return nil, "", err
	}
	sqlText, args, err := auditSQL(q, limit, c)
	if err != nil {
		return nil, "", err
	}
	var rows []model.AuditEvent
	if err := db.X.SelectContext(ctx, &rows, sqlText, args...); err != nil {
		return nil, "", fmt.Errorf("list audit: %w", err)
	}
	cursorOf := func(a model.AuditEvent) Cursor { return Cursor{At: a.At, ID: a.ID} }
	if q.KeyPrefix != "" {
		cursorOf = func(a model.AuditEvent) Cursor { return Cursor{Key: deref(a.IdempotencyKey), At: a.At, ID: a.ID} }
	}
	out, next := page(rows, limit, cursorOf)
	return out, next, nil
}

func auditSQL(q model.AuditQuery, limit int, c *Cursor) (string, []any, error) {
	args := []any{q.Owner}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	switch {
	case q.ActionPrefix != "" && q.KeyPrefix != "":
		return "", nil, apperr.New(apperr.ValidationFailed, "search audit events by action or by key, not both")
	case q.ActionPrefix != "":
		if err := checkVisiblePrefix("action prefix", q.ActionPrefix); err != nil {
			return "", nil, err
		}
		lo, hi := prefixRange(q.ActionPrefix)
		return actionPageSQL(store.Prefixed("e.", auditColumns), arg(lo), arg(hi), c, !q.Reverse, limit, arg), args, nil
	case q.KeyPrefix != "":
		if err := checkVisiblePrefix("key prefix", q.KeyPrefix); err != nil {
			return "", nil, err
		}
		lo, hi := prefixRange(q.KeyPrefix)
		s := `SELECT ` + auditColumns + ` FROM audit_event WHERE owner_id = $1 AND idempotency_key >= ` + arg(lo) + ` AND idempotency_key < ` + arg(hi)
		cmp, order := ">", ""
		if q.Reverse {
			cmp, order = "<", " DESC"
		}
		if c != nil {
			s += ` AND (idempotency_key, at, id) ` + cmp + ` (` + arg(c.Key) + `, ` + arg(c.At) + `, ` + arg(c.ID) + `)`
		}
		return s + fmt.Sprintf(` ORDER BY idempotency_key%[1]s, at%[1]s, id%[1]s LIMIT %[2]d`, order, limit+1), args, nil
	}
	s := `SELECT ` + auditColumns + ` FROM audit_event WHERE owner_id = $1`
	cmp, order := "<", "DESC"
	if q.Reverse {
		cmp, order = ">", "ASC"
	}
	if c != nil {
		s += ` AND (at, id) ` + cmp + ` (` + arg(c.At) + `, ` + arg(c.ID) + `)`
	}
	return s + fmt.Sprintf(` ORDER BY at %[1]s, id %[1]s LIMIT %[2]d`, order, limit+1), args, nil
}

// actionPageSQL is one time-ordered page of the owner's audit events whose action lies in
// [lo, hi): a skip scan lists the distinct matching actions (a handful, each found with one
// index probe), and each action contributes its own index-ordered page; the pages are merged.
// So the rows read are about (actions × page), however many events match.
// cols is the select list over alias e.
func actionPageSQL(cols, lo, hi string, c *Cursor, desc bool, limit int, arg func(any) string) string {
	cmp, order := ">", "ASC"
	if desc {
		cmp, order = "<", "DESC"
	}
	after := ""
	if c != nil {
		after = ` AND (e.at, e.id) ` + cmp + ` (` + arg(c.At) + `, ` + arg(c.ID) + `)`
	}
	return fmt.Sprintf(`WITH RECURSIVE acts(action) AS (
			SELECT min(action) FROM audit_event WHERE owner_id = $1 AND action >= %[1]s AND action < %[2]s
			UNION ALL
			SELECT (SELECT min(action) FROM audit_event WHERE owner_id = $1 AND action > acts.action AND action < %[2]s)
			FROM acts WHERE acts.action IS NOT NULL)
		SELECT p.* FROM acts CROSS JOIN LATERAL (
			SELECT %[3]s FROM audit_event e WHERE e.owner_id = $1 AND e.action = acts.action%[4]s
			ORDER BY e.at %[5]s, e.id %[5]s LIMIT %[6]d) p
		WHERE acts.action IS NOT NULL
		ORDER BY p.at %[5]s, p.id %[5]s LIMIT %[6]d`, lo, hi, cols, after, order, limit+1)
}

// OutboxPage lists an owner's outbox messages, newest first.
func OutboxPage(ctx context.Context, db *store.DB, owner string, limit int, cursor string) ([]model.OutboxMessage, string, error) {
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
	var rows []model.OutboxMessage
	if err := db.X.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, "", fmt.Errorf("list outbox: %w", err)
	}
	out, next := page(rows, limit, func(m model.OutboxMessage) Cursor { return Cursor{At: m.CreatedAt, ID: m.ID} })
	return out, next, nil
}
