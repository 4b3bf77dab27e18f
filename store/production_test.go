package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/migrations"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/readmodel"
)

// poolers are the two pgbouncer pool modes production puts in front of PostgreSQL.
var poolers = []store.Pooler{store.PoolerTransaction, store.PoolerSession}

func openVia(t *testing.T, dsn string, opts store.Options) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), dsn, opts)
	require.NoError(t, err)
	t.Cleanup(db.Close)
	return db
}

func requireCode(t *testing.T, err error, code apperr.Code) string {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, apperr.CodeOf(err), "%v", err)
	return apperr.As(err).Message
}

func tableCount(t *testing.T, database, schema string) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), testdb.DSNOf(t, database))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, schema).Scan(&n))
	return n
}

func TestAReadOnlySessionIsRefusedByTheServerThroughPgBouncerAndLeaksNothing(t *testing.T) {
	t.Parallel()
	for _, mode := range poolers {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			name := testdb.NewDatabase(t)
			b := testdb.PgBouncer(t, mode)
			ctx := context.Background()
			ro := openVia(t, b.DSN(name), store.Options{ReadOnly: true, Pooler: mode, MaxConns: 4})

			// A write statement that reaches the server — here through the querier every
			// repository uses, past the up-front refusal — is refused by PostgreSQL itself.
			_, err := ro.Q(ctx).Exec(ctx, `INSERT INTO data_migration_ledger (name, status) VALUES ('sneaky', 'passed')`)
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr, "the server refused it")
			require.Equal(t, "25006", pgErr.Code, "read_only_sql_transaction")
			requireCode(t, err, apperr.ReadOnly)
			// So is a write hidden in a read model's query.
			var rows []model.Record
			err = ro.X.SelectContext(ctx, &rows, `WITH w AS (UPDATE record SET title = 'x' RETURNING *) SELECT `+
				`id, owner_id, module_code, revision, title, summary, payload, created_at, updated_at FROM w`)
			require.ErrorAs(t, err, &pgErr)
			require.Equal(t, "25006", pgErr.Code)
			// Reads work, and every one ran in a read-only transaction.
			var readOnly string
			require.NoError(t, ro.Q(ctx).QueryRow(ctx, `SELECT current_setting('transaction_read_only')`).Scan(&readOnly))
			require.Equal(t, "on", readOnly)
			_, err = readmodel.Sessions(ctx, ro)
			require.NoError(t, err)

			// The server connections the read-only session used serve a writer next, unchanged:
			// read-only was never a session setting.
			rw := openVia(t, b.DSN(name), store.Options{Pooler: mode, MaxConns: 4})
			for range 2 * testdb.BouncerPoolSize {
				var txRO, defaultRO string
				require.NoError(t, rw.Q(ctx).QueryRow(ctx, `SELECT current_setting('transaction_read_only'), current_setting('default_transaction_read_only')`).
					Scan(&txRO, &defaultRO))
				require.Equal(t, "off", txRO)
				require.Equal(t, "off", defaultRO)
			}
			require.NoError(t, rw.Tx(ctx, func(ctx context.Context) error {
				_, err := rw.Q(ctx).Exec(ctx, `INSERT INTO data_migration_ledger (name, status) VALUES ('writer', 'passed')`)
				return err
			}))
			var n int
			require.NoError(t, rw.Q(ctx).QueryRow(ctx, `SELECT count(*) FROM data_migration_ledger WHERE name IN ('sneaky', 'writer')`).Scan(&n))
			require.Equal(t, 1, n, "only the writer's row")
		})
	}
}

func TestReadingTheSchemaStateOfAnUnmigratedDatabaseCreatesNothing(t *testing.T) {
	t.Parallel()
	name := testdb.NewEmptyDatabase(t)
	dsn := testdb.DSNOf(t, name)
	ctx := context.Background()
	for _, readOnly := range []bool{true, false} {
		_, err := store.Open(ctx, dsn, store.Options{ReadOnly: readOnly})
		msg := requireCode(t, err, apperr.SchemaNotReady)
		require.Contains(t, msg, "not migrated")
		require.Contains(t, msg, "idemwork migrate --allow-writes")
		require.Zero(t, tableCount(t, name, "public"), "read-only %v: reading the state created nothing", readOnly)
	}
	// migrate itself opens whatever the state, and reads it without DDL until told to apply.
	db := openVia(t, dsn, store.Options{AnySchema: true, ReadOnly: true})
	st, err := db.ReadSchemaState(ctx)
	require.NoError(t, err)
	require.False(t, st.HasTable)
	require.Len(t, st.Pending, len(migrations.Known()))
	_, err = db.Migrate(ctx)
	requireCode(t, err, apperr.ReadOnly)
	require.Zero(t, tableCount(t, name, "public"))

	rw := openVia(t, dsn, store.Options{AnySchema: true})
	n, err := rw.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, len(migrations.Known()), n)
	st, err = rw.ReadSchemaState(ctx)
	require.NoError(t, err)
	require.True(t, st.Current())
	openVia(t, dsn, store.Options{ReadOnly: true})
}

func TestASchemaBehindIsRefusedAndOneNewerIsBrowsableReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	known := migrations.Known()
	last := known[len(known)-1]

	behind := testdb.NewDatabase(t)
	testdb.AdminIn(t, behind, `DELETE FROM goose_db_version WHERE version_id = $1`, last.Version)
	for _, readOnly := range []bool{true, false} {
		_, err := store.Open(ctx, testdb.DSNOf(t, behind), store.Options{ReadOnly: readOnly})
		msg := requireCode(t, err, apperr.SchemaNotReady)
		require.Contains(t, msg, "behind this idemwork")
		require.Contains(t, msg, last.Name)
		require.Contains(t, msg, "idemwork migrate --allow-writes")
		require.NotContains(t, msg, "partial")
	}

	newer := testdb.NewDatabase(t)
	testdb.AdminIn(t, newer, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, true)`)
	db := openVia(t, testdb.DSNOf(t, newer), store.Options{})
	require.True(t, db.ReadOnly)
	require.Equal(t, store.ReadOnlyNewerSchema, db.Access())
	err := db.Tx(ctx, func(context.Context) error { t.Fatal("no write may start"); return nil })
	msg := requireCode(t, err, apperr.SchemaNotReady)
	require.Contains(t, msg, "newer than this idemwork")
	require.Contains(t, msg, "9999")
	_, err = db.Q(ctx).Exec(ctx, `INSERT INTO data_migration_ledger (name, status) VALUES ('x', 'passed')`)
	requireCode(t, err, apperr.SchemaNotReady)
	_, _, err = readmodel.KeyPage(ctx, db, "alice", 10, "")
	require.NoError(t, err, "browsing works")
}

func TestAHotStandbyIsReadOnlyWithItsOwnMessage(t *testing.T) {
	t.Parallel()
	standby := testdb.HotStandby(t)
	ctx := context.Background()
	name := testdb.NewDatabase(t)
	testdb.AdminIn(t, name, `INSERT INTO data_migration_ledger (name, status) VALUES ('from-the-primary', 'passed')`)
	standby.WaitCaughtUp(t)

	// Asked for writes (--allow-writes), the session still finds out what the server is.
	db := openVia(t, standby.DSN(name), store.Options{})
	require.True(t, db.ReadOnly)
	require.Equal(t, store.ReadOnlyStandby, db.Access())
	require.True(t, db.Connection().Standby)
	err := db.Tx(ctx, func(context.Context) error { t.Fatal("no write may start"); return nil })
	msg := requireCode(t, err, apperr.ReadOnly)
	require.Contains(t, msg, "this is a hot standby; writes go to the primary")
	require.NotContains(t, msg, "--allow-writes (or")

	_, err = db.Q(ctx).Exec(ctx, `INSERT INTO data_migration_ledger (name, status) VALUES ('x', 'passed')`)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "25006", pgErr.Code)
	require.Contains(t, requireCode(t, err, apperr.ReadOnly), "hot standby")

	var n int
	require.NoError(t, db.Q(ctx).QueryRow(ctx, `SELECT count(*) FROM data_migration_ledger WHERE name = 'from-the-primary'`).Scan(&n))
	require.Equal(t, 1, n, "it reads what the primary wrote")
}

func TestAStandbyOneMigrationBehindSaysSoAndPointsAtThePrimary(t *testing.T) {
	t.Parallel()
	standby := testdb.HotStandby(t)
	known := migrations.Known()
	name := testdb.NewDatabase(t)
	testdb.AdminIn(t, name, `DELETE FROM goose_db_version WHERE version_id = $1`, known[len(known)-1].Version)
	standby.WaitCaughtUp(t)
	_, err := store.Open(context.Background(), standby.DSN(name), store.Options{ReadOnly: true})
	msg := requireCode(t, err, apperr.SchemaNotReady)
	require.Contains(t, msg, "one migration behind")
	require.Contains(t, msg, "against the primary")
	require.NotContains(t, msg, "partial migration")
}

func TestARoleWithoutCreateOnPublicGetsTheHintAndASchemaOfItsOwnWorks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testdb.NewEmptyDatabase(t)
	role := testdb.NewRole(t, "app", name)
	asRole := store.WithDSNParams(testdb.DSNOf(t, name), [][2]string{{"user", role}})

	db := openVia(t, asRole, store.Options{AnySchema: true})
	_, err := db.Migrate(ctx)
	msg := requireCode(t, err, apperr.PermissionDenied)
	require.Contains(t, msg, `lacks CREATE on schema public`)
	require.Contains(t, msg, `GRANT CREATE ON SCHEMA public TO `+role)
	require.Contains(t, msg, `[database] schema = "idemwork"`)
	require.Zero(t, tableCount(t, name, "public"))

	// The hint, followed: a schema the role owns.
	testdb.AdminIn(t, name, "CREATE SCHEMA idemwork AUTHORIZATION "+pgx.Identifier{role}.Sanitize())
	mig := openVia(t, asRole, store.Options{AnySchema: true, Schema: "idemwork"})
	_, err = mig.Migrate(ctx)
	require.NoError(t, err)
	require.Equal(t, tableCount(t, name, "idemwork"), len(tablesOf(t, name, "idemwork")))
	require.NotZero(t, tableCount(t, name, "idemwork"))
	require.Zero(t, tableCount(t, name, "public"))
	db = openVia(t, asRole, store.Options{Schema: "idemwork"})
	require.Equal(t, "idemwork", db.Connection().Schema)
}

func tablesOf(t *testing.T, database, schema string) []string {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), testdb.DSNOf(t, database))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY 1`, schema)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return names
}

func TestAMissingPrivilegeIsNamedWithItsObjectAndTheGrant(t *testing.T) {
	t.Parallel()
	name := testdb.NewDatabase(t)
	role := testdb.NewRole(t, "support", name)
	dsn := store.WithDSNParams(testdb.DSNOf(t, name), [][2]string{{"user", role}})
	ctx := context.Background()

	_, err := store.Open(ctx, dsn, store.Options{ReadOnly: true})
	msg := requireCode(t, err, apperr.PermissionDenied)
	require.Contains(t, msg, "lacks SELECT on tables ")
	require.Contains(t, msg, "idempotency_record")
	require.Contains(t, msg, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO "+role)

	testdb.AdminIn(t, name, "GRANT SELECT ON ALL TABLES IN SCHEMA public TO "+pgx.Identifier{role}.Sanitize())
	openVia(t, dsn, store.Options{ReadOnly: true}) // browsing needs only SELECT
	_, err = store.Open(ctx, dsn, store.Options{})
	msg = requireCode(t, err, apperr.PermissionDenied)
	require.Contains(t, msg, "lacks INSERT, UPDATE, DELETE on tables ")
	require.Contains(t, msg, "GRANT INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public")
	require.Contains(t, msg, "browse read-only")
}

func TestASchemaSettingPutsEveryTableInItAndHoldsThroughPoolers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testdb.NewEmptyDatabase(t)
	const schema = `Tenant "One"` // quoting matters
	mig := openVia(t, testdb.DSNOf(t, name), store.Options{AnySchema: true, Schema: schema})
	_, err := mig.Migrate(ctx)
	require.NoError(t, err, "migrate creates the schema it is told to use")
	require.NotZero(t, tableCount(t, name, schema))
	require.Zero(t, tableCount(t, name, "public"))

	dsns := map[string]string{"direct": testdb.DSNOf(t, name)}
	for _, p := range poolers {
		dsns["pgbouncer-"+string(p)] = testdb.PgBouncer(t, p).PoolerDSN(name)
	}
	for route, dsn := range dsns {
		db := openVia(t, dsn, store.Options{Schema: schema, MaxConns: 3})
		require.Equal(t, schema, db.Connection().Schema, route)
		for i := range 3 {
			writeRecord(t, db, route+"-"+string(rune('a'+i)))
		}
		recs, _, err := readmodel.Records(ctx, db, model.RecordQuery{Owner: "alice", Limit: 50})
		require.NoError(t, err, route)
		require.NotEmpty(t, recs, route)
	}
	require.Equal(t, 3*len(dsns), recordsIn(t, name, schema), "every write landed in the schema")

	// The path is set per transaction: a plain client of the same pgbouncer afterwards sees the
	// server's default on every server connection.
	for range 2 * testdb.BouncerPoolSize {
		path, _ := plainSearchPath(t, testdb.PgBouncer(t, store.PoolerTransaction).DSN(name))
		require.Equal(t, `"$user", public`, path)
	}
}

// The exec mode follows what answers: cache_statement on a connection of idemwork's own that
// starts as every transaction sets it (no pooler declared or detected, no schema), exec anywhere
// else; a mode the URL asks for is kept, but cache_statement is refused with
// POOLER_MISCONFIGURED wherever a pooler may move the session between server connections.
func TestThePoolerDecidesTheExecMode(t *testing.T) {
	t.Parallel()
	const base = "postgres://u@h/db"
	cases := []struct {
		dsn        string
		opts       store.Options
		detected   bool
		pooler     store.Pooler
		mode, path string
		code       apperr.Code
		problem    string
	}{
		{dsn: base, pooler: store.PoolerNone, mode: "cache_statement"},
		{dsn: base, detected: true, pooler: store.PoolerNone, mode: "exec"},
		{dsn: base + "?pooler=none", detected: true, pooler: store.PoolerNone, mode: "exec"},
		{dsn: base, opts: store.Options{Pooler: store.PoolerSession}, detected: true, pooler: store.PoolerSession, mode: "exec"},
		{dsn: base, opts: store.Options{Pooler: store.PoolerTransaction}, pooler: store.PoolerTransaction, mode: "exec"},
		{dsn: base + "?pooler=transaction", detected: true, pooler: store.PoolerTransaction, mode: "exec"},
		{dsn: "host=h dbname=db pooler=transaction", pooler: store.PoolerTransaction, mode: "exec"},
		{dsn: base, opts: store.Options{Pooler: store.PoolerTransaction, Schema: "s"}, pooler: store.PoolerTransaction, mode: "exec", path: `"s"`},
		{dsn: base + "?search_path=s", detected: true, pooler: store.PoolerNone, mode: "exec", path: "s"},
		{dsn: base + "?search_path=s", pooler: store.PoolerNone, mode: "exec", path: "s"},
		{dsn: base + "?pooler=transaction&default_query_exec_mode=simple_protocol", pooler: store.PoolerTransaction, mode: "simple_protocol"},
		{dsn: base + "?pooler=transaction&default_query_exec_mode=describe_exec", pooler: store.PoolerTransaction, mode: "describe_exec"},
		{dsn: base + "?search_path=s&default_query_exec_mode=cache_describe", detected: true, pooler: store.PoolerNone, mode: "cache_describe", path: "s"},
		{dsn: base + "?default_query_exec_mode=exec", pooler: store.PoolerNone, mode: "exec"},
		{dsn: base + "?default_query_exec_mode=cache_statement", pooler: store.PoolerNone, mode: "cache_statement"},
		{dsn: base + "?pooler=session&default_query_exec_mode=cache_statement", detected: true, pooler: store.PoolerSession, mode: "cache_statement"},
		{dsn: base + "?pooler=transaction&default_query_exec_mode=cache_statement", code: apperr.PoolerMisconfigured,
			problem: "cannot work through a transaction pooler"},
		{dsn: base + "?default_query_exec_mode=cache_statement", detected: true, code: apperr.PoolerMisconfigured,
			problem: `a connection pooler answers at 127.0.0.1:6432`},
		{dsn: base + "?pooler=session", opts: store.Options{Pooler: store.PoolerTransaction}, code: apperr.Usage, problem: "keep one"},
		{dsn: base + "?search_path=a", opts: store.Options{Schema: "b"}, code: apperr.Usage, problem: "keep one"},
		{dsn: base + "?options=-c%20search_path%3Da", opts: store.Options{Schema: "b"}, code: apperr.Usage, problem: "keep one"},
		{dsn: base + "?options=--search-path%3Da&search_path=b", code: apperr.Usage, problem: "keep one"},
		{dsn: "host=h dbname=db options='-csearch_path=a'", opts: store.Options{Schema: "b"}, code: apperr.Usage, problem: "keep one"},
		{dsn: base + "?options=-c%20statement_timeout%3D5s", opts: store.Options{Schema: "b"}, pooler: store.PoolerNone, mode: "exec", path: `"b"`},
		{dsn: base + "?options=-c%20search_path%3Da", pooler: store.PoolerNone, mode: "cache_statement"},
		{dsn: base + "?pooler=statement", code: apperr.Usage, problem: "want none, session or transaction"},
		{dsn: base + "?default_query_exec_mode=fast", code: apperr.Usage, problem: "want cache_statement"},
	}
	for _, c := range cases {
		pooler, mode, path, err := store.PolicyOf(c.dsn, c.opts, c.detected)
		if c.problem != "" {
			require.Contains(t, requireCode(t, err, c.code), c.problem, c.dsn)
			continue
		}
		require.NoError(t, err, c.dsn)
		require.Equal(t, c.pooler, pooler, c.dsn)
		require.Equal(t, c.mode, mode, "%s detected=%v", c.dsn, c.detected)
		require.Equal(t, c.path, path, c.dsn)
	}
}

func TestOneTransactionPoolerSessionAfterAnotherWorks(t *testing.T) {
	t.Parallel()
	name := testdb.NewDatabase(t)
	b := testdb.PgBouncer(t, store.PoolerTransaction)
	ctx := context.Background()
	read := func(dsn string, opts store.Options) error {
		db, err := store.Open(ctx, dsn, opts)
		if err != nil {
			return err
		}
		defer db.Close()
		_, _, err = readmodel.KeyPage(ctx, db, "alice", 10, "")
		return err
	}
	// One command after another, as a user runs them: each is a new client of pgbouncer that
	// meets server connections an earlier one used.
	for range 3 {
		require.NoError(t, read(b.DSN(name), store.Options{Pooler: store.PoolerTransaction, ReadOnly: true}))
		require.NoError(t, read(b.PoolerDSN(name), store.Options{}))
	}
	// Told nothing, the session sees the pooler and uses exec: one command after another works.
	for range 5 {
		require.NoError(t, read(b.DSN(name), store.Options{}))
	}
}

func TestConnectionErrorsLeadWithTheRealCause(t *testing.T) {
	t.Parallel()
	b := testdb.PgBouncer(t, store.PoolerTransaction)
	u := strings.Replace(b.DSN("postgres"), "sslmode=disable", "sslmode=prefer", 1)
	wrong := strings.Replace(u, ":"+passwordOf(t, u)+"@", ":Wr0ng-SECRET@", 1)
	_, err := store.Open(context.Background(), wrong, store.Options{Pooler: store.PoolerTransaction})
	require.Error(t, err)
	msg := err.Error()
	require.True(t, strings.HasPrefix(msg, "connect to postgres://postgres@127.0.0.1:"), msg)
	require.Contains(t, msg, "authentication failed (SQLSTATE")
	require.Contains(t, msg, "check the user and password")
	require.NotContains(t, msg, "tls error", "pgx's sslmode=prefer fallback noise is dropped")
	require.NotContains(t, msg, "SECRET")
}

func passwordOf(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	require.NoError(t, err)
	return cfg.Password
}

// tripCounter counts what pgx sends: each query, batch and prepare is one round trip.
type tripCounter struct {
	mu    sync.Mutex
	trips []string
}

func (c *tripCounter) add(s string) {
	c.mu.Lock()
	c.trips = append(c.trips, s)
	c.mu.Unlock()
}

func (c *tripCounter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.trips
	c.trips = nil
	return t
}

func (c *tripCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.add(d.SQL)
	return ctx
}
func (c *tripCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *tripCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var parts []string
	for _, q := range d.Batch.QueuedQueries {
		parts = append(parts, strings.Fields(q.SQL)[0])
	}
	c.add("batch[" + strings.Join(parts, "; ") + "]")
	return ctx
}
func (c *tripCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *tripCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (c *tripCounter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	c.add("prepare " + d.SQL)
	return ctx
}
func (c *tripCounter) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

// TestAReadOnlyStatementTravelsInOneRoundTrip: BEGIN (READ ONLY on a read-only session), the
// transaction's settings, the statement and COMMIT go as one pipelined batch — the read-only
// guarantee and the settings cost no round trip, straight to PostgreSQL or through a pooler.
func TestAReadOnlyStatementTravelsInOneRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testdb.NewDatabase(t)
	for _, c := range []struct {
		dsn   string
		opts  store.Options
		batch string
	}{
		{testdb.DSNOf(t, name), store.Options{ReadOnly: true}, "batch[begin; select; SELECT; commit]"},
		{testdb.DSNOf(t, name), store.Options{}, "batch[begin; select; SELECT; commit]"},
		{testdb.PgBouncer(t, store.PoolerTransaction).PoolerDSN(name), store.Options{ReadOnly: true, Schema: "public"},
			"batch[begin; select; SELECT; commit]"},
		{testdb.PgBouncer(t, store.PoolerTransaction).DSN(name), store.Options{}, "batch[begin; select; SELECT; commit]"},
	} {
		tr := &tripCounter{}
		c.opts.Tracer, c.opts.MaxConns = tr, 1
		db := openVia(t, c.dsn, c.opts)
		read := func() {
			_, _, err := readmodel.KeyPage(ctx, db, "alice", 10, "")
			require.NoError(t, err)
		}
		read() // warm: statements described or prepared on the connection
		tr.take()
		read()
		require.Equal(t, []string{c.batch}, tr.take(), "%s %+v", c.dsn, c.opts)
	}
}
