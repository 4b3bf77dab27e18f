package readmodel

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// History returns one page of the owner's merged timeline (audit events, executions, keys and
// revisions) in time order, oldest first, or newest first when desc.
func History(ctx context.Context, db *store.DB, owner string, limit int, cursor string, desc bool) ([]model.Event, string, error) {
	return Timeline(ctx, db, model.HistoryQuery{Owner: owner, Limit: limit, Cursor: cursor, Desc: desc})
}

// Timeline returns one page of the timeline entries q selects. Each source is read through an
// index in the page's order with the page's limit, so a page costs the same however long the
// history is.
func Timeline(ctx context.Context, db *store.DB, q model.HistoryQuery) ([]model.Event, string, error) {
	limit := clampLimit(q.Limit)
	c, err := DecodeCursor(q.Cursor)
	if err != nil {
		return nil, "", err
	}
	sources := timelineSources
	if db.Service() {
		// A service's database holds the runner's keys and nothing of idemwork's records.
		if q.ActionPrefix != "" {
			return nil, "", apperr.New(apperr.ValidationFailed, "history: a service's database has no audit events to filter by action (only its idempotency keys)")
		}
		sources = keySources
	}
	sqlText, args, err := timelineSQLOf(q, limit, c, sources)
	if err != nil {
		return nil, "", err
	}
	var rows []model.Event
	if err := db.X.SelectContext(ctx, &rows, sqlText, args...); err != nil {
		return nil, "", fmt.Errorf("read history: %w", err)
	}
	byKey := q.Key != "" || q.KeyPrefix != ""
	out, next := page(rows, limit, func(e model.Event) Cursor {
		cur := Cursor{At: e.At, Kind: e.Kind, ID: e.ID}
		if byKey {
			cur.Key = deref(e.Key)
		}
		return cur
	})
	return out, next, nil
}

// historySQL is the unfiltered timeline (kept for the plan tests).
func historySQL(owner string, limit int, c *Cursor, desc bool) (string, []any) {
	q, args, _ := timelineSQL(model.HistoryQuery{Owner: owner, Desc: desc}, limit, c)
	return q, args
}

// A timeline source: one table's rows as Events.
type timelineSource struct {
	kind, table, timeCol, idExpr, cols string
}

var timelineSources = []timelineSource{
	{"audit", "audit_event", "at", "id",
		`module_code, record_id, revision, execution_id, action, idempotency_key, NULL::text AS status, NULL::text AS operation, NULL::text AS feature_id, NULL::text AS mode,
		written_xid::text AS xid, key_expires_at`},
	{"execution", "feature_execution", "created_at", "id",
		`module_code, record_id, record_revision, id, NULL, idempotency_key, status, NULL, feature_id, mode, written_xid::text, NULL`},
	{"key", "idempotency_record", "created_at", "idempotency_key",
		`NULL, NULL, NULL, NULL, NULL, idempotency_key, status, operation, NULL, NULL, reserved_xid::text, expires_at`},
	{"revision", "record_revision", "created_at", `record_id || ':' || lpad(revision::text, 10, '0')`,
		`snapshot->>'moduleCode', record_id, revision, NULL, NULL, idempotency_key, NULL, NULL, NULL, NULL, written_xid::text, NULL`},
}

// keySources is the timeline of a service's database: its keys alone.
var keySources = slices.DeleteFunc(slices.Clone(timelineSources), func(s timelineSource) bool { return s.kind != "key" })

// timelineSQL builds the merged timeline query: one index-ordered, limited subquery per source,
// merged and limited again.
func timelineSQL(q model.HistoryQuery, limit int, c *Cursor) (string, []any, error) {
	return timelineSQLOf(q, limit, c, timelineSources)
}

// timelineSQLOf is timelineSQL over the given sources.
func timelineSQLOf(q model.HistoryQuery, limit int, c *Cursor, sources []timelineSource) (string, []any, error) {
	args := []any{q.Owner}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	cmp, order := ">", "ASC"
	if q.Desc {
		cmp, order = "<", "DESC"
	}
	n := 0
	for _, set := range []bool{q.Key != "", q.KeyPrefix != "", q.ActionPrefix != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return "", nil, apperr.New(apperr.ValidationFailed, "history: choose one of a key, a key prefix or an action prefix")
	}
	if q.ActionPrefix != "" {
		if err := checkVisiblePrefix("action prefix", q.ActionPrefix); err != nil {
			return "", nil, err
		}
		lo, hi := prefixRange(q.ActionPrefix)
		cols := `e.at AS at, 'audit' AS kind, e.id AS id, e.module_code, e.record_id, e.revision, e.execution_id, e.action, e.idempotency_key,
			NULL::text AS status, NULL::text AS operation, NULL::text AS feature_id, NULL::text AS mode, e.written_xid::text AS xid, e.key_expires_at`
		return actionPageSQL(cols, arg(lo), arg(hi), c, q.Desc, limit, arg), args, nil
	}

	// The key filter and order, when listing by key.
	keyWhere, byKey := "", false
	switch {
	case q.Key != "":
		keyWhere, byKey = ` AND idempotency_key = `+arg(q.Key), true
	case q.KeyPrefix != "":
		if err := checkVisiblePrefix("key prefix", q.KeyPrefix); err != nil {
			return "", nil, err
		}
		lo, hi := prefixRange(q.KeyPrefix)
		keyWhere, byKey = ` AND idempotency_key >= `+arg(lo)+` AND idempotency_key < `+arg(hi), true
	}
	var ck, ct, ckind, cid string
	if c != nil {
		if byKey {
			ck = arg(c.Key)
		}
		ct, ckind, cid = arg(c.At), arg(c.Kind), arg(c.ID)
	}
	// after is the keyset condition (key, time, kind, id) beyond the cursor, written so that its
	// leading column bounds the index range.
	after := func(s timelineSource) string {
		if c == nil {
			return ""
		}
		tie := fmt.Sprintf(`(%[1]s %[2]s %[3]s OR '%[4]s' %[2]s %[5]s OR ('%[4]s' = %[5]s AND %[6]s %[2]s %[7]s))`,
			s.timeCol, cmp, ct, s.kind, ckind, s.idExpr, cid)
		if byKey {
			return fmt.Sprintf(` AND idempotency_key %[1]s= %[2]s AND (idempotency_key %[1]s %[2]s OR (%[3]s %[1]s= %[4]s AND %[5]s))`,
				cmp, ck, s.timeCol, ct, tie)
		}
		return fmt.Sprintf(` AND %[1]s %[2]s= %[3]s AND %[4]s`, s.timeCol, cmp, ct, tie)
	}
	parts := make([]string, 0, len(sources))
	for _, s := range sources {
		orderBy := fmt.Sprintf(`%[1]s %[3]s, %[2]s %[3]s`, s.timeCol, s.idExpr, order)
		if byKey {
			orderBy = `idempotency_key ` + order + `, ` + orderBy
		}
		parts = append(parts, fmt.Sprintf(`(SELECT %[1]s AS at, '%[2]s' AS kind, %[3]s AS id, %[4]s FROM %[5]s WHERE owner_id = $1%[6]s%[7]s ORDER BY %[8]s LIMIT %[9]d)`,
			s.timeCol, s.kind, s.idExpr, s.cols, s.table, keyWhere, after(s), orderBy, limit+1))
	}
	outer := fmt.Sprintf(` ORDER BY at %[1]s, kind %[1]s, id %[1]s LIMIT %[2]d`, order, limit+1)
	if byKey {
		outer = fmt.Sprintf(` ORDER BY idempotency_key %[1]s, at %[1]s, kind %[1]s, id %[1]s LIMIT %[2]d`, order, limit+1)
	}
	if len(parts) == 1 {
		// One source (a service's keys): its own ORDER BY and LIMIT stay inside a subquery.
		// The columns take their names from the audit source in a union: named here.
		return `SELECT * FROM ` + parts[0] + ` AS only_source (at, kind, id, module_code, record_id, revision, execution_id, action,
			idempotency_key, status, operation, feature_id, mode, xid, key_expires_at)` + outer, args, nil
	}
	return strings.Join(parts, " UNION ALL ") + outer, args, nil
}

// KeyHistory is every timeline entry of one key, oldest first (at most max, the newest kept).
func KeyHistory(ctx context.Context, db *store.DB, owner, key string, max int) ([]model.Event, error) {
	var all []model.Event
	cursor := ""
	for {
		rows, next, err := Timeline(ctx, db, model.HistoryQuery{Owner: owner, Key: key, Limit: MaxPage, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		all = append(all, rows...)
		if len(all) > max {
			all = all[len(all)-max:]
		}
		if next == "" {
			return all, nil
		}
		cursor = next
	}
}

// ParseExportFormat checks a --format value.
func ParseExportFormat(s string) (model.ExportFormat, error) {
	switch f := model.ExportFormat(strings.ToLower(s)); f {
	case model.ExportJSON, model.ExportCSV:
		return f, nil
	}
	return "", apperr.New(apperr.ValidationFailed, "format: %q is not json or csv", s)
}

// ExportColumns are the CSV columns, in order.
var ExportColumns = []string{"at", "kind", "id", "moduleCode", "recordId", "revision", "executionId", "action", "key", "status", "operation", "featureId", "mode", "xid"}

// ExportHistory writes the timeline entries q selects — the whole owner when q names no cursor —
// to w, reading keyset pages of MaxPage and writing each before the next is read, so memory stays
// one page however long the history. JSON is one object, {"events": [...], "next": null}, as
// `history --json` prints a page; CSV has a header line. max > 0 stops after max entries (and
// "next" then says where to continue). progress, when set, hears the count after each page.
func ExportHistory(ctx context.Context, db *store.DB, q model.HistoryQuery, format model.ExportFormat, w io.Writer, max int, progress func(int)) (int, error) {
	if format != model.ExportCSV && format != model.ExportJSON {
		return 0, apperr.New(apperr.ValidationFailed, "format: %q is not json or csv", format)
	}
	var cw *csv.Writer
	// The head goes out with the first page, so a query that fails at once leaves w untouched.
	head := func() error {
		if format == model.ExportCSV {
			cw = csv.NewWriter(w)
			return cw.Write(ExportColumns)
		}
		_, err := io.WriteString(w, `{"events": [`)
		return err
	}
	n, next, first := 0, "", q.Cursor
	for {
		q.Limit = MaxPage
		if max > 0 && max-n < MaxPage {
			q.Limit = max - n
		}
		rows, more, err := Timeline(ctx, db, q)
		if err != nil {
			return n, err
		}
		if q.Cursor == first {
			if err := head(); err != nil {
				return n, err
			}
		}
		for _, e := range rows {
			if cw != nil {
				err = cw.Write(csvRecord(e))
			} else {
				var b []byte
				b, err = json.Marshal(e)
				if err == nil {
					sep := ",\n  "
					if n == 0 {
						sep = "\n  "
					}
					_, err = io.WriteString(w, sep+string(b))
				}
			}
			if err != nil {
				return n, err
			}
			n++
		}
		if cw != nil {
			cw.Flush()
			if err := cw.Error(); err != nil {
				return n, err
			}
		}
		if progress != nil {
			progress(n)
		}
		if more == "" || (max > 0 && n >= max) {
			next = more
			break
		}
		q.Cursor = more
	}
	if format == model.ExportJSON {
		tail := "], \"next\": null}\n"
		if next != "" {
			tail = fmt.Sprintf("], \"next\": %q}\n", next)
		}
		if n > 0 {
			tail = "\n" + tail
		}
		if _, err := io.WriteString(w, tail); err != nil {
			return n, err
		}
	}
	return n, nil
}

// csvRecord is e as a CSV row. Every stored string passes through termsafe.CSVCell: no control
// byte leaves raw (a ticket attachment someone cats cannot run a terminal sequence or split a
// row) and no cell reads as a spreadsheet formula.
func csvRecord(e model.Event) []string {
	rev := ""
	if e.Revision != nil {
		rev = strconv.Itoa(*e.Revision)
	}
	row := []string{e.At.UTC().Format(time.RFC3339Nano), e.Kind, e.ID, deref(e.ModuleCode), deref(e.RecordID), rev, deref(e.ExecutionID),
		deref(e.Action), deref(e.Key), deref(e.Status), deref(e.Operation), deref(e.FeatureID), deref(e.Mode), deref(e.XID)}
	for i, c := range row {
		row[i] = termsafe.CSVCell(c)
	}
	return row
}
