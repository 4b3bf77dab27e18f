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
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/readmodel"
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
		b.InsertRecord("record", model.Record{OwnerID: "alice", ID: id, ModuleCode: "NOTE", Revision: 1, Title: "t",
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

// A schema behind a transaction pooler nobody declared (the URL a user pastes): the session
// sees the pooler (its backend key is not the server's pid), picks a mode that works through it,
// and sets the schema in every transaction — writes land in the schema, and another client of
// the same pool (here its only server connection) keeps its own default search_path.
func TestASchemaWorksThroughAnUndeclaredTransactionPoolerAndNeverLeaks(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"", "exec", "simple_protocol", "describe_exec", "cache_describe"} {
		t.Run("mode="+mode, func(t *testing.T) {
			t.Parallel()
			name := testdb.NewEmptyDatabase(t)
			migrateInto(t, name, "app")
			b := testdb.NewBouncer(t, store.PoolerTransaction, testdb.BouncerOptions{PoolSize: 1})
			dsn := b.DSN(name)
			if mode != "" {
				dsn = store.WithDSNParams(dsn, [][2]string{{"default_query_exec_mode", mode}})
			}
			db := openVia(t, dsn, store.Options{Schema: "app", MaxConns: 2})
			cn := db.Connection()
			require.True(t, cn.PoolerDetected)
			require.False(t, cn.PoolerDeclared)
			require.Equal(t, map[string]string{"": "exec"}[mode]+mode, cn.ExecMode)
			require.Equal(t, "app", cn.Schema)
			writeRecord(t, db, "r1")
			writeRecord(t, db, "r2")
			require.Equal(t, 2, recordsIn(t, name, "app"))
			path, _ := plainSearchPath(t, b.DSN(name))
			require.Equal(t, `"$user", public`, path, "another client of the pool got idemwork's search_path")
		})
	}
}

// Migrations hold goose's session lock and start their session in the schema: through any
// pooler — declared or not, one that drops startup parameters included — migrate is refused with
// the reason and creates nothing anywhere; and a session told to use a schema that does not exist
// says so (not "run migrate" into another schema).
func TestMigrateThroughAnyPoolerIsRefusedAndCreatesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testdb.NewEmptyDatabase(t)
	b := testdb.NewBouncer(t, store.PoolerTransaction, testdb.BouncerOptions{PoolSize: 1, IgnoreStartupParameters: "options"})

	_, err := store.Open(ctx, b.DSN(name), store.Options{Schema: "app"})
	msg := requireCode(t, err, apperr.SchemaNotReady)
	require.Contains(t, msg, `schema app, the schema idemwork is set to use`)
	require.Contains(t, msg, "does not exist")

	for _, dsn := range []string{b.DSN(name), b.PoolerDSN(name), store.WithDSNParams(b.DSN(name), [][2]string{{"pooler", "session"}})} {
		db, err := store.Open(ctx, dsn, store.Options{Schema: "app", AnySchema: true})
		require.NoError(t, err)
		_, err = db.Migrate(ctx)
		db.Close()
		msg := requireCode(t, err, apperr.Usage)
		require.Contains(t, msg, "reaches PostgreSQL directly")
	}
	require.Zero(t, tableCount(t, name, "public"), "migrate created tables in public")
	require.Zero(t, tableCount(t, name, "app"))
	path, _ := plainSearchPath(t, b.DSN(name))
	require.Equal(t, `"$user", public`, path)
}

// Straight to PostgreSQL, a schema is set in every transaction too (nothing at startup, nothing
// for the session): writes land in it, a user's own options still apply (their value is the
// session's reset value, which every transaction keeps), a schema name with spaces, quotes and
// backslashes survives, and a storm worker opening the session's DSN lands in the same schema.
func TestADirectSessionSetsItsSchemaInEveryTransactionAndNothingForTheSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testdb.NewEmptyDatabase(t)
	const schema = `Tenant "One" \ two	tab`
	migrateInto(t, name, schema)

	trips := &testdb.Trips{}
	dsn := store.WithDSNParams(testdb.DSNOf(t, name), [][2]string{{"options", "-c statement_timeout=4321"}})
	db := openVia(t, dsn, store.Options{Schema: schema, MaxConns: 1, Tracer: trips})
	require.Equal(t, "exec", db.Connection().ExecMode, "a schema is not what a session starts with: no statement is prepared outside a transaction")
	require.Equal(t, schema, db.Connection().Schema)
	writeRecord(t, db, "r1")
	recs, _, err := readmodel.Records(ctx, db, model.RecordQuery{Owner: "alice", Limit: 10})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, 1, recordsIn(t, name, schema))

	var inTx, timeout string
	require.NoError(t, db.Q(ctx).QueryRow(ctx, `SELECT current_setting('search_path'), current_setting('statement_timeout')`).Scan(&inTx, &timeout))
	require.Equal(t, `"Tenant ""One"" \ two	tab", pg_temp`, inTx)
	require.Equal(t, "4321ms", timeout, "the URL's own options still apply")
	for _, s := range trips.Take() {
		require.True(t, strings.HasPrefix(s, "batch[begin; settings; "), "every statement runs in a transaction that set its settings: %s", s)
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
// outright) is POOLER_MISCONFIGURED saying to remove it and where such a setting belongs, not a
// database to retry.
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
			[]string{"options startup parameter", "Remove it", "[database] schema", "ALTER ROLE"}},
		{"options", "-c statement_timeout=5s", store.Options{Schema: "app"},
			[]string{"options startup parameter", "Remove it"}},
		{"statement_timeout", "5s", store.Options{},
			[]string{"startup parameter statement_timeout", "Remove it from the URL", "ALTER ROLE … SET statement_timeout"}},
	} {
		dsn := store.WithDSNParams(b.DSN(name), [][2]string{{c.param, c.value}})
		_, err := store.Open(context.Background(), dsn, c.opts)
		msg := requireCode(t, store.TranslateError(err), apperr.PoolerMisconfigured)
		for _, w := range c.want {
			require.Contains(t, msg, w, "%s=%s %+v", c.param, c.value, c.opts)
		}
		require.NotContains(t, msg, "retry")
		require.True(t, strings.HasPrefix(msg, "connect to postgres://postgres@127.0.0.1:"), msg)
		require.NotContains(t, msg, passwordOf(t, dsn))
	}
}
