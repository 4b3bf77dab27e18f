package cli_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/store"
)

// rowsPerSchema counts table's rows in every schema that has one (temporary schemas aside:
// another session's temporary table cannot be read), as psql would over all schemas.
func rowsPerSchema(t *testing.T, name, table string) map[string]int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.DSNOf(t, name))
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relname = $1 AND c.relkind = 'r' AND n.nspname NOT LIKE 'pg_temp%' ORDER BY 1`, table)
	require.NoError(t, err)
	schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	out := map[string]int{}
	for _, s := range schemas {
		var n int
		require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{s, table}.Sanitize()).Scan(&n))
		out[s] = n
	}
	return out
}

// SPEC §10.1, issue 21: through a real transaction-pooling pgbouncer whose every server
// connection another client left with every session setting changed (the other schema's
// search_path, read-only and serializable defaults, short timeouts, synchronous_commit off,
// session_replication_role replica, a SET ROLE, other text formats, temporary tables named like
// idemwork's, a prepared statement), idemwork — the pooler declared or not, with a schema or
// without, in every pgx exec mode the URL can ask for — creates, replays, patches, writes without
// a key and storms 200 requests from 2 processes: exactly one EXECUTED per key, every row in the
// intended schema (counted over all schemas), nothing in the temporary tables, no answer but the
// documented ones; a mode that cannot work there (cache_statement) is refused before anything is
// written with POOLER_MISCONFIGURED.
func TestEveryExecModeThroughAPoolerAnotherClientLeftSettingsOn(t *testing.T) {
	t.Parallel()
	for _, declared := range []bool{false, true} {
		for _, schema := range []string{"", "app"} {
			for _, mode := range append([]string{""}, store.ExecModes()...) {
				label := fmt.Sprintf("declared=%v/schema=%s/mode=%s", declared, schema, mode)
				t.Run(label, func(t *testing.T) {
					t.Parallel()
					pooledCell(t, declared, schema, mode)
				})
			}
		}
	}
}

func pooledCell(t *testing.T, declared bool, schema, mode string) {
	name := testdb.NewDatabaseFrom(t, "twoschemas", func(t testing.TB, name string) {
		tt := t.(*testing.T)
		prodDB{name: name, dsn: testdb.DSNOf(t, name)}.ok(tt, "--allow-writes", "migrate")
		prodDB{name: name, dsn: testdb.DSNOf(t, name), env: map[string]string{"IDEMWORK_SCHEMA": "app"}}.ok(tt, "--allow-writes", "migrate")
	})
	// The test server commits with synchronous_commit = off: this database's sessions start with
	// on, so the off left behind is a change.
	testdb.Admin(t, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" SET synchronous_commit = on")
	intended, other := "public", "app"
	if schema != "" {
		intended, other = "app", "public"
	}
	b := testdb.NewBouncer(t, store.PoolerTransaction, testdb.BouncerOptions{PoolSize: 4})
	lb := testdb.EveryGUC(other)
	lb.Role = testdb.NewRole(t, "other", name)
	require.Equal(t, b.PoolSize, testdb.Pollute(t, b, name, lb))

	dsn := b.DSN(name)
	if declared {
		dsn = b.PoolerDSN(name)
	}
	if mode != "" {
		dsn = store.WithDSNParams(dsn, [][2]string{{"default_query_exec_mode", mode}})
	}
	env := map[string]string{}
	if schema != "" {
		env["IDEMWORK_SCHEMA"] = schema
	}
	p := prodDB{name: name, dsn: dsn, env: env}
	w := func(args ...string) map[string]any { return p.ok(t, append([]string{"--allow-writes"}, args...)...) }

	if mode == "cache_statement" {
		for _, args := range [][]string{{"keys", "--owner", "o"}, {"--allow-writes", "create", "--owner", "o", "--module", "NOTE", "--key", "k1", "--title", "t"}} {
			code, out, _ := p.run(t, append(args, "--json")...)
			require.Equal(t, 4, code, "%v: %s", args, out)
			e := errorOf(t, out)
			require.Equal(t, "POOLER_MISCONFIGURED", e["code"], out)
			require.Contains(t, e["message"], "default_query_exec_mode")
		}
		require.Equal(t, map[string]int{"public": 0, "app": 0}, rowsPerSchema(t, name, "record"), "nothing was written")
		return
	}

	created := w("create", "--owner", "o", "--module", "NOTE", "--key", "k1", "--title", "t", "--payload", `{"n":1}`)
	require.Equal(t, "EXECUTED", created["outcome"])
	id := created["record"].(map[string]any)["id"].(string)
	replayed := w("create", "--owner", "o", "--module", "NOTE", "--key", "k1", "--title", "t", "--payload", `{"n":1}`)
	require.Equal(t, "REPLAYED", replayed["outcome"])
	require.Equal(t, id, replayed["record"].(map[string]any)["id"])
	patched := w("patch", "--owner", "o", "--module", "NOTE", "--record", id, "--expect-revision", "1", "--key", "p1", "--title", "t2")
	require.Equal(t, "EXECUTED", patched["outcome"])
	require.EqualValues(t, 2, patched["record"].(map[string]any)["revision"])
	require.Equal(t, "REPLAYED", w("patch", "--owner", "o", "--module", "NOTE", "--record", id, "--expect-revision", "1", "--key", "p1",
		"--title", "t2")["outcome"])
	require.Equal(t, "EXECUTED", w("create", "--owner", "o", "--module", "NOTE", "--title", "unkeyed")["outcome"])

	s := w("storm", "--n", "200", "--processes", "2", "create", "--owner", "o", "--module", "NOTE", "--key", "s1", "--title", "storm")
	outcomes := s["outcomes"].(map[string]any)
	require.Equal(t, float64(1), outcomes["EXECUTED"], "%v", outcomes)
	total := 0.0
	for o, n := range outcomes {
		require.Contains(t, []string{"EXECUTED", "REPLAYED", "JOINED"}, o, "only the documented answers: %v", outcomes)
		total += n.(float64)
	}
	require.Equal(t, float64(200), total)
	require.Equal(t, true, s["verified"].(map[string]any)["agrees"], "%v", s["verified"])

	require.Equal(t, map[string]int{intended: 3, other: 0}, rowsPerSchema(t, name, "record"))
	require.Equal(t, map[string]int{intended: 4, other: 0}, rowsPerSchema(t, name, "record_revision"))
	require.Equal(t, map[string]int{intended: 3, other: 0}, rowsPerSchema(t, name, "idempotency_record"))
	keys := p.ok(t, "keys", "--owner", "o")["keys"].([]any)
	require.Len(t, keys, 3, "the keys idemwork lists are the intended schema's")

	paths, tempRows := testdb.ServerPaths(t, b, name, lb.TempTables)
	polluted := 0
	for _, path := range paths {
		require.Contains(t, []string{other, `"$user", public`}, path, "a server connection carries what the other client left, or "+
			"a fresh one's default (a client that went away mid-statement costs its server connection): never idemwork's")
		if path == other {
			polluted++
		}
	}
	require.GreaterOrEqual(t, polluted, b.PoolSize-1, "idemwork ran over connections the other client had left its settings on: %v", paths)
	require.Zero(t, tempRows, "nothing went into the temporary tables named like idemwork's")
}
