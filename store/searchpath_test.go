package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/store"
)

// migrateInto migrates database name directly, with every table in schema.
func migrateInto(t *testing.T, name, schema string) {
	t.Helper()
	db := openVia(t, testdb.DSNOf(t, name), store.Options{AnySchema: true, Schema: schema, MaxConns: 2})
	_, err := db.Migrate(context.Background())
	require.NoError(t, err)
	db.Close()
}

// plainSearchPath is what a client of the pooler that knows nothing of idemwork sees as its
// search_path (another application sharing the pool), and where the setting came from.
func plainSearchPath(t *testing.T, dsn string) (path, source string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, store.WithDSNParams(dsn, [][2]string{{"default_query_exec_mode", "simple_protocol"}}))
	require.NoError(t, err)
	defer conn.Close(ctx)
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('search_path'), source FROM pg_settings WHERE name = 'search_path'`).
		Scan(&path, &source))
	return path, source
}

func writeRecord(t *testing.T, db *store.DB, id string) {
	t.Helper()
	now := time.Now()
	require.NoError(t, db.TxBatch(context.Background(), func(_ context.Context, b *store.Batch) error {
		b.InsertRecord("record", store.Record{OwnerID: "alice", ID: id, ModuleCode: "NOTE", Revision: 1, Title: "t",
			Payload: json.RawMessage(`{}`), CreatedAt: now, UpdatedAt: now})
		return nil
	}))
}

func recordsIn(t *testing.T, name, schema string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.DSNOf(t, name))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "record"}.Sanitize()).Scan(&n))
	return n
}

// A schema behind a transaction pooler nobody declared: the session's search_path cannot be
// handed to the pooler's shared server connection, so the session is refused with
// POOLER_MISCONFIGURED saying to declare the pooler, and another client of the same pool (here
// its only server connection) keeps its own default search_path.
func TestASchemaNeverLeaksThroughAnUndeclaredTransactionPooler(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			name := testdb.NewEmptyDatabase(t)
			migrateInto(t, name, "app")
			b := testdb.NewBouncer(t, store.PoolerTransaction, testdb.BouncerOptions{PoolSize: 1})
			dsn := store.WithDSNParams(b.DSN(name), [][2]string{{"default_query_exec_mode", mode}})

			db, err := store.Open(context.Background(), dsn, store.Options{Schema: "app", MaxConns: 2})
			if err == nil {
				db.Close()
			}
			path, _ := plainSearchPath(t, b.DSN(name))
			require.Equal(t, `"$user", public`, path, "another client of the pool got idemwork's search_path")
			msg := requireCode(t, err, apperr.PoolerMisconfigured)
			require.Contains(t, msg, `pooler = "transaction"`)
			require.Contains(t, msg, "search_path")
			require.NotContains(t, msg, "migrate")
		})
	}
}

// A pooler told to drop the options startup parameter (ignore_startup_parameters = options)
// would leave the session on the server's default path, where the tables are not: it is
// POOLER_MISCONFIGURED naming that setting — never SCHEMA_NOT_READY's "run idemwork migrate" —
// and migrate through it creates nothing anywhere.
func TestAPoolerThatDropsTheSchemaIsRefusedAndMigrateCreatesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testdb.NewEmptyDatabase(t)
	b := testdb.NewBouncer(t, store.PoolerTransaction, testdb.BouncerOptions{PoolSize: 1, IgnoreStartupParameters: "options"})
	dsn := store.WithDSNParams(b.DSN(name), [][2]string{{"default_query_exec_mode", "exec"}})

	_, err := store.Open(ctx, dsn, store.Options{Schema: "app"})
	msg := requireCode(t, err, apperr.PoolerMisconfigured)
	require.Contains(t, msg, "ignore_startup_parameters")
	require.Contains(t, msg, `pooler = "transaction"`)
	require.NotContains(t, msg, "migrate")

	// idemwork migrate --allow-writes opens the same way, with any schema state.
	db, err := store.Open(ctx, dsn, store.Options{Schema: "app", AnySchema: true})
	if err == nil {
		_, err = db.Migrate(ctx)
		db.Close()
	}
	requireCode(t, err, apperr.PoolerMisconfigured)
	require.Zero(t, tableCount(t, name, "public"), "migrate created tables in public")
	require.Zero(t, tableCount(t, name, "app"))
	path, _ := plainSearchPath(t, b.DSN(name))
	require.Equal(t, `"$user", public`, path)
}

// Straight to PostgreSQL, the schema arrives with the session (a startup parameter, no SET):
// pgx's cache_statement mode prepares every statement under it, writes land in the schema, a
// user's own options travel beside it, and a schema name with spaces, quotes and backslashes
// survives libpq's escaping.
func TestADirectSessionGetsItsSchemaAtStartup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testdb.NewEmptyDatabase(t)
	const schema = `Tenant "One" \ two	tab`
	migrateInto(t, name, schema)

	trips := &testdb.Trips{}
	dsn := store.WithDSNParams(testdb.DSNOf(t, name), [][2]string{{"options", "-c statement_timeout=4321"}})
	db := openVia(t, dsn, store.Options{Schema: schema, MaxConns: 2, Tracer: trips})
	require.Equal(t, "cache_statement", db.Connection().ExecMode)
	require.Equal(t, schema, db.Connection().Schema)
	writeRecord(t, db, "r1")
	recs, _, err := db.RecordPage(ctx, "alice", "", 10, "")
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, 1, recordsIn(t, name, schema))

	var source, timeout string
	require.NoError(t, db.Q(ctx).QueryRow(ctx, `SELECT (SELECT source FROM pg_settings WHERE name = 'search_path'), current_setting('statement_timeout')`).
		Scan(&source, &timeout))
	require.Equal(t, "client", source, "the path came with the session's startup packet, not from a SET")
	require.Equal(t, "4321ms", timeout, "the URL's own options still apply")
	for _, s := range trips.Take() {
		require.NotContains(t, s, "set_config")
	}

	// A storm worker opens the session's DSN in another process and lands in the same schema.
	child := openVia(t, db.DSN(), store.Options{MaxConns: 1})
	require.Equal(t, schema, child.Connection().Schema)
	writeRecord(t, child, "r2")
	require.Equal(t, 2, recordsIn(t, name, schema))
}

// Declared poolers keep working with a schema, their own way: behind a session pooler the path
// is set once per connection and pgbouncer's DISCARD ALL resets it when the client leaves;
// behind a transaction pooler it is set in each transaction. Either way the pool's next client
// (on the same, only server connection) starts on its own default, and a storm worker opening
// the session's DSN lands in the same schema.
func TestDeclaredPoolersCarryTheSchemaAndLeaveNothingBehind(t *testing.T) {
	t.Parallel()
	for _, mode := range poolers {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			name := testdb.NewEmptyDatabase(t)
			migrateInto(t, name, "app")
			b := testdb.NewBouncer(t, mode, testdb.BouncerOptions{PoolSize: 1})

			db, err := store.Open(context.Background(), b.PoolerDSN(name), store.Options{Schema: "app", MaxConns: 1})
			require.NoError(t, err)
			require.Equal(t, "app", db.Connection().Schema)
			writeRecord(t, db, "r1")
			childDSN := db.DSN()
			// A session pooler's only server connection is db's for its whole life: close it first.
			db.Close()
			child, err := store.Open(context.Background(), childDSN, store.Options{MaxConns: 1})
			require.NoError(t, err)
			require.Equal(t, "app", child.Connection().Schema)
			writeRecord(t, child, "r2")
			child.Close()
			require.Equal(t, 2, recordsIn(t, name, "app"))

			path, _ := plainSearchPath(t, b.DSN(name))
			require.Equal(t, `"$user", public`, path, "the next client of the pool inherited idemwork's search_path")
		})
	}
}

// A pooler that refuses a startup parameter of the URL's own (pgbouncer 1.18 refuses options
// outright) is POOLER_MISCONFIGURED saying to remove it, not a database to retry.
func TestAStartupParameterThePoolerRefusesSaysWhatToRemove(t *testing.T) {
	t.Parallel()
	name := testdb.NewDatabase(t)
	b := testdb.PgBouncer(t, store.PoolerTransaction)
	for _, c := range []struct {
		param, value string
		opts         store.Options
		want         []string
	}{
		{"options", "-c statement_timeout=5s", store.Options{Pooler: store.PoolerTransaction},
			[]string{"options startup parameter", "Remove it", "[database] schema"}},
		{"options", "-c statement_timeout=5s", store.Options{},
			[]string{"options startup parameter", "Remove it", `pooler = "transaction"`}},
		{"options", "-c statement_timeout=5s", store.Options{Schema: "app"},
			[]string{"the schema's search_path", `pooler = "transaction"`, "remove options="}},
		{"statement_timeout", "5s", store.Options{Pooler: store.PoolerTransaction},
			[]string{"startup parameter statement_timeout", "Remove it from the URL"}},
	} {
		dsn := store.WithDSNParams(b.DSN(name), [][2]string{{c.param, c.value}})
		_, err := store.Open(context.Background(), dsn, c.opts)
		msg := requireCode(t, err, apperr.PoolerMisconfigured)
		for _, w := range c.want {
			require.Contains(t, msg, w, "%s=%s %+v", c.param, c.value, c.opts)
		}
		require.NotContains(t, msg, "retry")
		require.True(t, strings.HasPrefix(msg, "connect to postgres://postgres@127.0.0.1:"), msg)
		require.NotContains(t, msg, passwordOf(t, dsn))
	}
}
