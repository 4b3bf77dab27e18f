package testdb

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// PlanRows sums the rows every scan node of an EXPLAIN ANALYZE plan actually produced. With
// generic, the statement is prepared and planned once for any parameters, as a connection's
// cached statement may be: the app runs every read through pgx's statement cache.
func PlanRows(t *testing.T, db *DB, q string, args []any, generic bool) (rows float64, seqScans []string) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	explain := "EXPLAIN (ANALYZE, FORMAT JSON) " + q
	if generic {
		_, err = conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = conn.Exec(ctx, `DEALLOCATE plan_probe; RESET plan_cache_mode`) }()
		_, err = conn.Exec(ctx, "PREPARE plan_probe AS "+q)
		if err != nil {
			t.Fatal(err)
		}
		params := make([]string, len(args))
		for i, a := range args {
			params[i] = sqlLiteral(t, a)
		}
		// EXPLAIN EXECUTE takes no bind parameters: the values go in as literals.
		explain = "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE plan_probe(" + strings.Join(params, ", ") + ")"
		args = nil
	}
	var raw []byte
	if err := conn.QueryRow(ctx, explain, args...).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var plans []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &plans); err != nil {
		t.Fatal(err)
	}
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

// sqlLiteral writes a statement's argument as an SQL literal.
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
