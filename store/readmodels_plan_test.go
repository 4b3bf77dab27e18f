package store_test

// These tests explain the exact SQL the read models run (exposed by export_test.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"idemwork/internal/testdb"
	"idemwork/store"
)

// planRows sums the rows every scan node of an EXPLAIN ANALYZE plan actually produced. With
// generic, the statement is prepared and planned once for any parameters, as a connection's
// cached statement may be: the app runs every read through pgx's statement cache.
func planRows(t *testing.T, db *testdb.DB, q string, args []any, generic bool) (rows float64, seqScans []string) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	explain := "EXPLAIN (ANALYZE, FORMAT JSON) " + q
	if generic {
		_, err = conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`)
		require.NoError(t, err)
		defer func() { _, _ = conn.Exec(ctx, `DEALLOCATE plan_probe; RESET plan_cache_mode`) }()
		_, err = conn.Exec(ctx, "PREPARE plan_probe AS "+q)
		require.NoError(t, err)
		params := make([]string, len(args))
		for i, a := range args {
			params[i] = sqlLiteral(t, a)
		}
		// EXPLAIN EXECUTE takes no bind parameters: the values go in as literals.
		explain = "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE plan_probe(" + strings.Join(params, ", ") + ")"
		args = nil
	}
	var raw []byte
	require.NoError(t, conn.QueryRow(ctx, explain, args...).Scan(&raw))
	var plans []struct {
		Plan map[string]any `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(raw, &plans))
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if rel, ok := n["Relation Name"].(string); ok {
			rows += n["Actual Rows"].(float64) * n["Actual Loops"].(float64)
			if n["Node Type"] == "Seq Scan" {
				seqScans = append(seqScans, rel)
			}
		}
		if kids, ok := n["Plans"].([]any); ok {
			for _, k := range kids {
				walk(k.(map[string]any))
			}
		}
	}
	walk(plans[0].Plan)
	return rows, seqScans
}

func TestBrowsingAMillionAuditEventsReadsOnePageNotTheHistory(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `INSERT INTO audit_event (owner_id, id, module_code, record_id, action, revision, idempotency_key, detail, at)
		SELECT 'big', lpad(g::text, 26, '0'), 'NOTE', 'r' || (g % 1000), 'RECORD_PATCHED', 1, 'k' || g, '{}',
			timestamptz '2026-01-01 00:00:00+00' + g * interval '1 second'
		FROM generate_series(1, 1000000) g`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `INSERT INTO audit_event (owner_id, id, module_code, action, detail, at)
		SELECT 'small', lpad(g::text, 26, '0'), 'NOTE', 'RECORD_CREATED', '{}', now() FROM generate_series(1, 1000) g`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `ANALYZE`)
	require.NoError(t, err)

	const limit = 100
	middle := &store.Cursor{At: time.Date(2026, 1, 6, 18, 53, 20, 0, time.UTC), Kind: "audit", ID: lpad26(500000)}
	cases := map[string]func() (string, []any){
		"audit first page":            func() (string, []any) { return store.AuditPageSQL("big", "", limit, nil) },
		"audit page in the middle":    func() (string, []any) { return store.AuditPageSQL("big", "", limit, middle) },
		"audit by action prefix":      func() (string, []any) { return store.AuditPageSQL("big", "RECORD_", limit, middle) },
		"timeline newest first":       func() (string, []any) { return store.HistorySQL("big", limit, nil, true) },
		"timeline oldest first":       func() (string, []any) { return store.HistorySQL("big", limit, nil, false) },
		"timeline page in the middle": func() (string, []any) { return store.HistorySQL("big", limit, middle, true) },
	}
	for name, build := range cases {
		for _, generic := range []bool{false, true} {
			q, args := build()
			rows, seq := planRows(t, db, q, args, generic)
			require.NotContains(t, seq, "audit_event", "%s (generic plan %v): no sequential scan of the million rows", name, generic)
			// Each source reads at most one page (+1 to know there is more) through its index.
			require.LessOrEqual(t, rows, float64(4*(limit+1)), "%s (generic plan %v) read %v rows", name, generic, rows)
			require.Positive(t, rows, "%s (generic plan %v) found its page", name, generic)
		}
	}

	// And the pages are right: the page after the cursor starts just past it.
	got, next, err := db.AuditPage(ctx, "big", "", limit, middle.Encode())
	require.NoError(t, err)
	require.Len(t, got, limit)
	require.Equal(t, lpad26(499999), got[0].ID)
	require.NotEmpty(t, next)
}

// sqlLiteral writes a read model's argument as an SQL literal.
func sqlLiteral(t *testing.T, v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case string:
		return "'" + strings.ReplaceAll(x, "'", "''") + "'"
	case int, int32, int64:
		return fmt.Sprint(x)
	case time.Time:
		return "'" + x.UTC().Format(time.RFC3339Nano) + "'"
	}
	t.Fatalf("sqlLiteral: no literal for %T", v)
	return ""
}

func lpad26(n int) string {
	s := []byte("00000000000000000000000000")
	for i := len(s) - 1; n > 0; i-- {
		s[i] = byte('0' + n%10)
		n /= 10
	}
	return string(s)
}
