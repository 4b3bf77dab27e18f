package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/migrations"
)

// Options configures Open.
type Options struct {
	// ReadOnly makes every statement of the session run inside a server-enforced read-only
	// transaction (BEGIN READ ONLY), and refuses write transactions up front with READ_ONLY.
	ReadOnly bool
	// MaxConns caps the pool; 0 keeps pgxpool's default (max(4, NumCPU)).
	MaxConns int32
	// Migrate applies pending migrations on connect (the embedded cluster). Without it a
	// database whose schema is unmigrated or older than this binary is refused with
	// SCHEMA_NOT_READY; one migrated by a newer idemwork opens read-only.
	Migrate bool
	// AnySchema opens whatever the schema state (for `idemwork migrate` itself).
	AnySchema bool
	// Pooler says what sits between idemwork and PostgreSQL; "" takes the DSN's pooler=
	// parameter, else none.
	Pooler Pooler
	// Schema puts every table in this schema (search_path); "" takes the DSN's search_path=
	// parameter, else the server's default.
	Schema string
	// Tracer traces the pool's statements (the bench counts round trips with it).
	Tracer pgx.QueryTracer
	// ApplicationName names every session of the pool in pg_stat_activity, over whatever the
	// DSN says (a storm marks its own sessions so it can watch and wait for them); empty keeps
	// the DSN's application_name, else "idemwork".
	ApplicationName string
	// AcquireTimeout bounds the wait for a pooled connection of a transaction or a runner's key
	// read: past it the request fails with OVERLOADED (503, Retry-After). 0: no bound.
	AcquireTimeout time.Duration
}

// Access says whether a session may write, and if not, why.
type Access int

const (
	// Writable sessions write.
	Writable Access = iota
	// ReadOnlyAsked: a database given by URL without --allow-writes.
	ReadOnlyAsked
	// ReadOnlyStandby: the server is a hot standby (pg_is_in_recovery()).
	ReadOnlyStandby
	// ReadOnlyNewerSchema: a newer idemwork migrated the database.
	ReadOnlyNewerSchema
	// ReadOnlyService: the schema holds a service's idempotency keys (the runner library's
	// tables, made by idem.Migrate), not idemwork's records: inspected, never written.
	ReadOnlyService
)

// DB is the one pool of a process. Every statement goes through it (Q, Tx, the read models'
// Reader), so what a session enforces — read-only, the schema, a transaction pooler's rules —
// holds for all of them; no raw pool is handed out.
type DB struct {
	pool *pgxpool.Pool
	// X is the read models' sqlx-style API over the same path.
	X *Reader
	// ReadOnly is true when writes are refused (see Access for why).
	ReadOnly bool

	access Access
	// service: the schema holds a service's keys (see Service).
	service bool
	conn    Connection
	// wrap sends each statement outside a transaction inside one (read-only, or a transaction
	// pooler).
	wrap bool
	// txSearchPath is set per transaction (set_config(…, true)) behind a transaction pooler.
	txSearchPath string
	// dsn is what child processes open to get this session's policy (pooler, search_path).
	dsn    string
	schema migrations.State

	mu sync.Mutex // guards schema after a migration

	acquireTimeout time.Duration
}

// Connection is what a session chose for the database it talks to.
type Connection struct {
	Pooler Pooler `json:"pooler"`
	// ExecMode is pgx's default_query_exec_mode in use.
	ExecMode string `json:"execMode"`
	// SearchPath is the search_path idemwork sets ("" keeps the server's).
	SearchPath string `json:"searchPath,omitempty"`
	// Standby is true on a hot standby.
	Standby bool   `json:"standby"`
	User    string `json:"user"`
	// Schema is current_schema(): where the tables are.
	Schema string `json:"schema"`
}

// Querier is what repositories need; both a pool and a transaction satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Open connects to dsn, learns what the server is (a hot standby is read-only), checks the
// schema (migrating it when opts.Migrate) and the role's privileges. The caller closes the DB.
func Open(ctx context.Context, dsn string, opts Options) (*DB, error) {
	pol, err := resolvePolicy(dsn, opts)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's own message may quote the string it could not parse: never show it.
		return nil, apperr.New(apperr.Usage, "the database URL is not valid: %s; see README \"The database\" for the forms idemwork reads", parseHint(dsn))
	}
	for _, k := range policyParams {
		delete(cfg.ConnConfig.RuntimeParams, k)
	}
	userOptions := cfg.ConnConfig.RuntimeParams["options"]
	if o := pol.startupOptions(userOptions); o != "" {
		cfg.ConnConfig.RuntimeParams["options"] = o
	}
	cfg.ConnConfig.DefaultQueryExecMode = pol.mode
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.ApplicationName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = opts.ApplicationName
	} else if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "idemwork"
	}
	if opts.Tracer != nil {
		cfg.ConnConfig.Tracer = opts.Tracer
	}
	startupPath, sessionPath := pol.startupSearchPath(), pol.sessionSearchPath()
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		// Every time read back is in UTC, whatever the process's zone: pgx would return the
		// local one, so a record (built in UTC) and the history event of the same instant would
		// print one timestamp two ways in one JSON shape.
		c.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID,
			Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
		switch {
		case startupPath != "":
			// Sent at startup: a pooler told to ignore the options parameter drops it silently,
			// and the session would look for the tables elsewhere (and migrate create them there).
			var got string
			if err := c.QueryRow(ctx, "SELECT pg_catalog.current_setting('search_path')", pgx.QueryExecModeSimpleProtocol).Scan(&got); err != nil {
				return err
			}
			if got != startupPath {
				return searchPathDropped(startupPath, got)
			}
		case sessionPath != "":
			// Behind a session pooler a client connection keeps one server session for its whole
			// life, and the pooler's DISCARD ALL resets the path when the client leaves.
			_, err := c.Exec(ctx, "SELECT pg_catalog.set_config('search_path', $1, false)", sessionPath)
			return err
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, connectError(dsn, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, pol.openError(dsn, userOptions, err)
	}
	db := &DB{pool: pool, ReadOnly: opts.ReadOnly, wrap: opts.ReadOnly || pol.pooler == PoolerTransaction,
		dsn: pol.childDSN(dsn), conn: Connection{Pooler: pol.pooler, ExecMode: execModeName(pol.mode), SearchPath: pol.searchPath}}
	db.X = &Reader{db: db}
	db.acquireTimeout = opts.AcquireTimeout
	if opts.ReadOnly {
		db.access = ReadOnlyAsked
	}
	db.txSearchPath = pol.txSearchPath()
	if err := db.start(ctx, opts); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// start learns the server's role (primary or standby), then checks schema and privileges.
func (db *DB) start(ctx context.Context, opts Options) error {
	var standby bool
	if err := db.Q(ctx).QueryRow(ctx, `SELECT pg_is_in_recovery(), current_user, coalesce(current_schema(), '')`).
		Scan(&standby, &db.conn.User, &db.conn.Schema); err != nil {
		return TranslateError(fmt.Errorf("connect: read the server's state: %w", err))
	}
	if standby {
		db.conn.Standby = true
		db.readOnly(ReadOnlyStandby)
	}
	if !opts.AnySchema {
		// Before anything else reads idemwork's tables: a missing privilege is named up front.
		if err := db.checkPrivileges(ctx); err != nil {
			return err
		}
	}
	st, err := migrations.ReadState(ctx, db.Q(ctx))
	if err != nil {
		return TranslateError(err)
	}
	if !st.HasTable && !opts.AnySchema {
		service, err := db.holdsServiceKeys(ctx)
		if err != nil {
			return TranslateError(err)
		}
		if service {
			db.service = true
			db.readOnly(ReadOnlyService)
			db.schema = st
			return nil
		}
	}
	switch {
	case st.Current():
	case st.Newer() && !opts.AnySchema:
		db.readOnly(ReadOnlyNewerSchema)
	case opts.AnySchema:
	case opts.Migrate && db.access == Writable:
		if _, err := db.Migrate(ctx); err != nil {
			return err
		}
		st = db.SchemaState()
	default:
		return db.schemaError(ctx, st)
	}
	db.schema = st
	return nil
}

func (db *DB) readOnly(why Access) {
	if db.access == Writable || why == ReadOnlyStandby || why == ReadOnlyService && db.access != ReadOnlyStandby {
		db.access = why
	}
	db.ReadOnly, db.wrap = true, true
}

// schemaError is SCHEMA_NOT_READY for st, pointing a standby's user at the primary, and a role
// that may not create tables (a support role, say) at someone who may: advice to run migrate
// that can only end in PERMISSION_DENIED helps nobody.
func (db *DB) schemaError(ctx context.Context, st migrations.State) error {
	msg := st.Problem()
	switch {
	case db.conn.Standby:
		msg = strings.Replace(msg, "against it", "against the primary (this is a hot standby; it replays what the primary has)", 1)
	case strings.Contains(msg, "run 'idemwork migrate") && st.Schema != "":
		var user string
		var canCreate bool
		// Only on this error path: one more read, to give advice the reader can follow.
		if err := db.Q(ctx).QueryRow(ctx, `SELECT current_user, coalesce(has_schema_privilege(current_schema(), 'CREATE'), false)`).
			Scan(&user, &canCreate); err == nil && !canCreate {
			msg += fmt.Sprintf(" — by a role that may create tables in schema %s (role %s may not: ask the database's owner)", ident(st.Schema), ident(user))
		}
	}
	return apperr.New(apperr.SchemaNotReady, "%s", msg)
}

// Access says whether this session may write, and if not, why.
func (db *DB) Access() Access { return db.access }

// Service reports whether the session's schema holds a service's keys (the runner library's
// tables) rather than idemwork's records: only the keys are there to read.
func (db *DB) Service() bool { return db.service }

// holdsServiceKeys reports whether the session's schema holds the runner library's tables
// (idem.Migrate's) and no idemwork schema: a service's database.
func (db *DB) holdsServiceKeys(ctx context.Context) (bool, error) {
	var service bool
	err := db.Q(ctx).QueryRow(ctx, `SELECT to_regclass('idempotency_record') IS NOT NULL AND to_regclass('idem_migration') IS NOT NULL`).Scan(&service)
	return service, err
}

// Connection describes what this session chose and found.
func (db *DB) Connection() Connection { return db.conn }

// DSN is the connection string that reproduces this session's policy (pooler, search_path) in
// another process; it carries the password of the DSN it came from, so never print it.
func (db *DB) DSN() string { return db.dsn }

// SchemaState is the schema state read when the session opened (or after Migrate).
func (db *DB) SchemaState() migrations.State {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.schema
}

// ReadSchemaState reads the schema state again (it only reads).
func (db *DB) ReadSchemaState(ctx context.Context) (migrations.State, error) {
	return migrations.ReadState(ctx, db.Q(ctx))
}

// WriteRefusal is the coded error a write gets on this session, nil when it may write.
func (db *DB) WriteRefusal() error {
	switch db.access {
	case ReadOnlyStandby:
		return apperr.New(apperr.ReadOnly, "this is a hot standby; writes go to the primary (connect to it with --allow-writes to write)")
	case ReadOnlyNewerSchema:
		return apperr.New(apperr.SchemaNotReady, "%s", db.SchemaState().Problem())
	case ReadOnlyAsked:
		return apperr.New(apperr.ReadOnly, "this session is read-only; reconnect with --allow-writes (or allow_writes = true) to write")
	case ReadOnlyService:
		return apperr.New(apperr.ReadOnly, "schema %s holds a service's idempotency keys (the runner library's tables), not idemwork's records: "+
			"idemwork inspects it (keys, key, history, verify, the Keys view) and writes nothing there", ident(db.conn.Schema))
	}
	return nil
}

// ReadOnlyReason is a short phrase for headers: "" when writable.
func (db *DB) ReadOnlyReason() string {
	switch db.access {
	case ReadOnlyStandby:
		return "hot standby"
	case ReadOnlyNewerSchema:
		return "schema newer than this idemwork"
	case ReadOnlyAsked:
		return "read-only session"
	case ReadOnlyService:
		return "a service's keys (runner library)"
	}
	return ""
}

// Migrate applies this binary's pending migrations (goose, under its session lock) and returns
// how many ran. It needs a writable session on a primary, a role that may create tables in the
// schema (which it creates when [database] schema names one that does not exist yet), and no
// transaction pooler (a session lock cannot live there).
func (db *DB) Migrate(ctx context.Context) (int, error) {
	if err := db.WriteRefusal(); err != nil {
		return 0, err
	}
	if db.conn.Pooler == PoolerTransaction {
		return 0, apperr.New(apperr.Usage, "migrations cannot run through a transaction pooler (goose holds a session lock while "+
			"it migrates, and a transaction pooler moves the session between server connections): run "+
			"'idemwork migrate --allow-writes' with a URL that reaches PostgreSQL directly, or a session-pooling port")
	}
	if err := db.prepareSchema(ctx); err != nil {
		return 0, err
	}
	sqlDB := stdlib.OpenDBFromPool(db.pool)
	n, err := migrations.Up(ctx, sqlDB)
	_ = sqlDB.Close()
	if err != nil {
		return n, TranslateError(err)
	}
	st, err := db.ReadSchemaState(ctx)
	if err != nil {
		return n, err
	}
	db.mu.Lock()
	db.schema = st
	db.mu.Unlock()
	if err := db.refreshSchema(ctx); err != nil {
		return n, err
	}
	return n, nil
}

// refreshSchema rereads current_schema() (a migration may have created the schema).
func (db *DB) refreshSchema(ctx context.Context) error {
	return db.Q(ctx).QueryRow(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&db.conn.Schema)
}

// prepareSchema makes sure the tables have a schema to go to that the role may create in.
func (db *DB) prepareSchema(ctx context.Context) error {
	var schema, user, database string
	var canCreate, canCreateSchema bool
	if err := db.Q(ctx).QueryRow(ctx, `SELECT coalesce(current_schema(), ''), current_user, current_database(),
			coalesce(has_schema_privilege(current_schema(), 'CREATE'), false),
			has_database_privilege(current_database(), 'CREATE')`).
		Scan(&schema, &user, &database, &canCreate, &canCreateSchema); err != nil {
		return fmt.Errorf("migrate: read privileges: %w", err)
	}
	if schema == "" {
		name := firstPathSchema(db.conn.SearchPath)
		if name == "" {
			return apperr.New(apperr.SchemaNotReady, "no schema of the session's search_path exists: set [database] schema to the schema idemwork should use")
		}
		if !canCreateSchema {
			return apperr.New(apperr.PermissionDenied, "role %s lacks CREATE on database %s, so it cannot create schema %s: "+
				"ask for CREATE SCHEMA %s AUTHORIZATION %s (or GRANT CREATE ON DATABASE %s TO %s)",
				ident(user), ident(database), ident(name), ident(name), ident(user), ident(database), ident(user))
		}
		if _, err := db.Q(ctx).Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
			return TranslateError(fmt.Errorf("migrate: create schema %s: %w", name, err))
		}
		return nil
	}
	if !canCreate {
		return apperr.New(apperr.PermissionDenied, "role %s lacks CREATE on schema %s, so it cannot create idemwork's tables there "+
			"(PostgreSQL 15 and later grant CREATE on public only to the database owner): ask for GRANT CREATE ON SCHEMA %s TO %s, "+
			"or give idemwork a schema of its own (CREATE SCHEMA idemwork AUTHORIZATION %s) and set [database] schema = \"idemwork\"",
			ident(user), ident(schema), ident(schema), ident(user), ident(user))
	}
	return nil
}

// firstPathSchema is the first explicit schema of a search_path value ("" for none).
func firstPathSchema(path string) string {
	for _, part := range strings.Split(path, ",") {
		p := strings.TrimSpace(part)
		if p == "" || p == `"$user"` || p == "$user" {
			continue
		}
		if strings.HasPrefix(p, `"`) && strings.HasSuffix(p, `"`) && len(p) >= 2 {
			return strings.ReplaceAll(p[1:len(p)-1], `""`, `"`)
		}
		return p
	}
	return ""
}

// ident writes a name as SQL would need it: bare when it is a plain lower-case identifier,
// double-quoted otherwise (messages show GRANT statements a user can paste).
func ident(s string) string {
	if plainIdent.MatchString(s) {
		return s
	}
	return pgx.Identifier{s}.Sanitize()
}

var plainIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// checkPrivileges refuses up front a role that lacks what the session needs on idemwork's
// tables (those in the schema of the version table, which itself needs SELECT): SELECT to
// browse, and INSERT, UPDATE, DELETE too to write.
func (db *DB) checkPrivileges(ctx context.Context) error {
	privs := []string{"SELECT"}
	if !db.ReadOnly {
		privs = append(privs, "INSERT", "UPDATE", "DELETE")
	}
	rows, err := db.Q(ctx).Query(ctx, `SELECT c.relname, p.priv
		FROM pg_catalog.pg_class c CROSS JOIN unnest($1::text[]) AS p(priv)
		WHERE c.relnamespace = (SELECT relnamespace FROM pg_catalog.pg_class WHERE oid = to_regclass($2))
			AND c.relkind IN ('r', 'p') AND (c.relname <> $2 OR p.priv = 'SELECT') AND NOT has_table_privilege(c.oid, p.priv)
		ORDER BY array_position($1::text[], p.priv), c.relname`, privs, migrations.VersionTable)
	if err != nil {
		return fmt.Errorf("connect: read privileges: %w", err)
	}
	missing := map[string][]string{}
	var order []string
	for rows.Next() {
		var table, priv string
		if err := rows.Scan(&table, &priv); err != nil {
			rows.Close()
			return fmt.Errorf("connect: read privileges: %w", err)
		}
		if _, ok := missing[priv]; !ok {
			order = append(order, priv)
		}
		missing[priv] = append(missing[priv], table)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("connect: read privileges: %w", err)
	}
	if len(order) == 0 {
		return nil
	}
	// Privileges missing on the same tables are named together.
	var lacks []string
	var groups []string
	byTables := map[string][]string{}
	for _, p := range order {
		tables := strings.Join(missing[p], ", ")
		if _, ok := byTables[tables]; !ok {
			groups = append(groups, tables)
		}
		byTables[tables] = append(byTables[tables], p)
	}
	for _, tables := range groups {
		noun := "table"
		if strings.Contains(tables, ",") {
			noun = "tables"
		}
		lacks = append(lacks, fmt.Sprintf("%s on %s %s", strings.Join(byTables[tables], ", "), noun, tables))
	}
	grant := strings.Join(order, ", ")
	hint := ""
	if db.ReadOnly {
		hint = " (browsing needs SELECT; writing also needs INSERT, UPDATE, DELETE)"
	} else if len(missing["SELECT"]) == 0 {
		hint = "; or browse read-only (without --allow-writes), which needs only SELECT"
	}
	return apperr.New(apperr.PermissionDenied, "role %s lacks %s: ask for GRANT %s ON ALL TABLES IN SCHEMA %s TO %s%s",
		ident(db.conn.User), strings.Join(lacks, "; "), grant, ident(db.conn.Schema), ident(db.conn.User), hint)
}

// Warm opens up to n connections of the pool before a burst, so the burst's requests meet on
// the database instead of queueing for handshakes.
func (db *DB) Warm(ctx context.Context, n int) error {
	n = min(n, int(db.pool.Config().MaxConns))
	conns := make([]*pgxpool.Conn, 0, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	for range n {
		wg.Go(func() {
			c, err := db.pool.Acquire(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = connectError(db.dsn, err)
				}
				return
			}
			conns = append(conns, c)
		})
	}
	wg.Wait()
	for _, c := range conns {
		c.Release()
	}
	return firstErr
}

// MaxConns is the pool's ceiling.
func (db *DB) MaxConns() int {
	if db == nil || db.pool == nil {
		return 0
	}
	return int(db.pool.Config().MaxConns)
}

// Close releases the pool.
func (db *DB) Close() { db.pool.Close() }

// parseHint says in general terms why a DSN did not parse, without quoting it.
func parseHint(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return "it is not a well-formed postgres:// URL (check brackets around IPv6 hosts and percent-encode special characters in the password)"
	}
	return "it is neither a postgres:// URL nor keyword=value settings (check quotes around values with spaces)"
}

// TranslateError maps database errors with a known cause to coded errors whose message says
// what happened and what to do: a refusal a user can act on (read-only, a missing privilege, a
// missing schema), a database that is unavailable for now (unreachable, the session ended by a
// shutdown or pg_terminate_backend, the statement cancelled by statement_timeout, lock_timeout
// or a cancel request, too many connections: DATABASE_UNAVAILABLE, retried after Retry-After),
// and prepared statements lost behind an undeclared transaction pooler (POOLER_MISCONFIGURED).
// An error that is already coded, or of no known cause, is returned unchanged (and becomes
// INTERNAL at the edge, apperr.As, without the driver's text).
func TranslateError(err error) error {
	var ae *apperr.Error
	if err == nil || errors.As(err, &ae) || errors.Is(err, context.Canceled) {
		// A cancelled context is the caller's own decision (a client gone, ctrl+c), not a cause
		// to report: the edge that cancelled knows.
		return err
	}
	var pgErr *pgconn.PgError
	isPg := errors.As(err, &pgErr)
	var connect *ConnectError
	if errors.As(err, &connect) {
		if isPg && startupRefused(pgErr) {
			return apperr.Wrap(apperr.PoolerMisconfigured, err, "%s", connect.Error())
		}
		// Open's own failure, already worded for users (the redacted URL, the cause, a hint): an
		// unreachable server is DATABASE_UNAVAILABLE in those words; a refusal (authentication,
		// no such database) is INTERNAL in them — retrying would only be refused again.
		if isPg && loginRefused(pgErr) {
			return apperr.Wrap(apperr.Internal, err, "%s", connect.Error())
		}
		if !isPg || unavailableState(pgErr.Code) {
			return apperr.Wrap(apperr.DatabaseUnavailable, err, "%s; retry in a moment, or check that the database is running and reachable", connect.Error())
		}
		// A failure of Open's own first statements (the schema check through a misconfigured
		// pooler, a missing privilege) has the code it would have later.
		if known := translatePgError(err, pgErr); known != err {
			return known
		}
		return apperr.Wrap(apperr.Internal, err, "%s", connect.Error())
	}
	if isPg {
		return translatePgError(err, pgErr)
	}
	if Unreachable(err) {
		return apperr.Wrap(apperr.DatabaseUnavailable, err, "the connection to the database was lost or could not be made before the answer "+
			"arrived; retry in a moment (a write with the same Idempotency-Key is safe to retry); if it persists, check that the database is "+
			"running and reachable (idemwork db status for the embedded one)")
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return apperr.Wrap(apperr.DatabaseUnavailable, err, "the database did not answer within the time allowed; retry in a moment")
	}
	return err
}

// translatePgError codes a server error of a known cause; any other comes back as it is.
func translatePgError(err error, pgErr *pgconn.PgError) error {
	switch {
	case pgErr.Code == "25006": // read_only_sql_transaction
		return apperr.Wrap(apperr.ReadOnly, err, "this session is read-only; reconnect with --allow-writes to write")
	case pgErr.Code == "42501": // insufficient_privilege
		return apperr.Wrap(apperr.PermissionDenied, err, "the server refused: %s; grant idemwork's role that privilege "+
			"(README \"Production databases\" lists what each mode needs)", pgErr.Message)
	case pgErr.Code == "42P01" || pgErr.Code == "3F000": // undefined_table, invalid_schema_name
		return apperr.Wrap(apperr.SchemaNotReady, err, "%s: the database is not migrated for this idemwork; run 'idemwork migrate --allow-writes' against it", pgErr.Message)
	case (pgErr.Code == "42P05" || pgErr.Code == "26000") && strings.Contains(pgErr.Message, "stmtcache_"):
		return apperr.Wrap(apperr.PoolerMisconfigured, err, "the database lost or mixed up this session's prepared statements (SQLSTATE %s), "+
			"the mark of a transaction-pooling pgbouncer between idemwork and PostgreSQL: set [database] pooler = \"transaction\" in the "+
			"config (or add pooler=transaction to the database URL) and restart; nothing was committed by the statement that failed", pgErr.Code)
	case pgErr.Code == "57014" && strings.Contains(pgErr.Message, "statement timeout"): // query_canceled
		return apperr.Wrap(apperr.DatabaseUnavailable, err, "the database cancelled the statement when it reached statement_timeout (SQLSTATE %s); "+
			"the transaction rolled back: retry; if it keeps happening, look for a transaction holding the rows' locks (the Locks view) "+
			"or raise statement_timeout for idemwork's role", pgErr.Code)
	case pgErr.Code == "57014":
		return apperr.Wrap(apperr.DatabaseUnavailable, err, "the database cancelled the statement at someone's request (SQLSTATE %s, "+
			"pg_cancel_backend or an operator); the transaction rolled back: retry", pgErr.Code)
	case pgErr.Code == "55P03": // lock_not_available
		return apperr.Wrap(apperr.DatabaseUnavailable, err, "the statement waited longer than lock_timeout for a lock (SQLSTATE %s); "+
			"the transaction rolled back: retry; the Locks view shows who holds it", pgErr.Code)
	case pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
		return apperr.Wrap(apperr.DatabaseUnavailable, err, "the database ended the session (SQLSTATE %s: terminated by an administrator, "+
			"pg_terminate_backend, or a server shutting down or starting up); retry in a moment (a write with the same Idempotency-Key "+
			"is safe to retry)", pgErr.Code)
	case pgErr.Code == "53300" || pgErr.Code == "53400": // too_many_connections, configuration_limit_exceeded
		return apperr.Wrap(apperr.DatabaseUnavailable, err, "the database refuses more connections (SQLSTATE %s); retry in a moment, "+
			"or lower [database] max_conns", pgErr.Code)
	case strings.HasPrefix(pgErr.Code, "08"): // connection_exception
		return apperr.Wrap(apperr.DatabaseUnavailable, err, "the connection to the database failed (SQLSTATE %s); retry in a moment "+
			"(a write with the same Idempotency-Key is safe to retry)", pgErr.Code)
	}
	return err
}

// loginRefused reports whether the server (or a pooler in front of it) refused to log the session
// in: a wrong password or user, no pg_hba.conf entry, no such database. pgbouncer reports its own
// authentication failures as 08P01, a protocol violation, in the connection_exception class.
func loginRefused(e *pgconn.PgError) bool {
	switch e.Code {
	case "28P01", "28000", "3D000":
		return true
	case "08P01":
		return strings.Contains(e.Message, "authentication failed")
	}
	return false
}

// unavailableState reports whether a SQLSTATE says the server cannot serve the session now: it
// is shutting down or starting up, refuses more connections, or the connection failed.
func unavailableState(code string) bool {
	return code == "57P01" || code == "57P02" || code == "57P03" || code == "53300" || code == "53400" || strings.HasPrefix(code, "08")
}

// translate is TranslateError with this session's own read-only reason.
func (db *DB) translate(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "25006" {
		if refusal := db.WriteRefusal(); refusal != nil {
			ae := refusal.(*apperr.Error)
			ae.Err = err
			return ae
		}
	}
	return TranslateError(err)
}

// EnsureDatabase creates database name through the admin connection adminDSN when missing.
func EnsureDatabase(ctx context.Context, adminDSN, name string) error {
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return connectError(adminDSN, err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // created concurrently by another process
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}
