package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	// RequireSynchronousReplication refuses every write with REPLICATION_UNSAFE while no
	// synchronous standby confirms commits ([database] require_synchronous_replication).
	RequireSynchronousReplication bool
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
// Reader), so what a session enforces — read-only, the schema, every setting idemwork depends
// on, a pooler's rules — holds for all of them; no raw pool is handed out.
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
	// settings is what every transaction sets in the round trip that begins it (settings.go).
	settings txSettings
	// mode is the pgx exec mode of connections the pool opens from now on.
	mode atomic.Int32
	// beginApart: the exec mode describes statements in a round trip of its own before sending
	// them, so BEGIN is sent alone first and the describe runs inside the transaction.
	beginApart bool
	// dsn is what child processes open to get this session's policy (pooler, search_path).
	dsn    string
	schema migrations.State
	pol    policy
	// connCfg is the pool's connection config (for migrate's connection of its own).
	connCfg *pgx.ConnConfig

	mu sync.Mutex // guards schema after a migration

	acquireTimeout time.Duration
	// requireSync refuses writes while no synchronous standby confirms commits (replication.go).
	requireSync bool
	repl        replicationWatch
}

// Connection is what a session chose for the database it talks to, and what it found there.
type Connection struct {
	Pooler Pooler `json:"pooler"`
	// PoolerDeclared: the pooler was named (config, environment or URL); PoolerDetected: one
	// answers (the backend key pgbouncer and its kind hand out is not the server's process id).
	PoolerDeclared bool `json:"poolerDeclared"`
	PoolerDetected bool `json:"poolerDetected"`
	// ExecMode is pgx's default_query_exec_mode in use.
	ExecMode string `json:"execMode"`
	// SearchPath is the search_path every transaction sets.
	SearchPath string `json:"searchPath,omitempty"`
	// Standby is true on a hot standby.
	Standby bool   `json:"standby"`
	User    string `json:"user"`
	// Schema is current_schema(): where the tables are.
	Schema string `json:"schema"`
	// Host and Port are where the session's first connection went (after a multi-host URL's
	// choice; a socket's directory as Host): the pooler's address behind one.
	Host string `json:"host"`
	Port int    `json:"port"`
	// ServerVersion is the server's version string.
	ServerVersion string `json:"serverVersion"`
}

// Querier is what repositories need; both a pool and a transaction satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// DefaultConnectTimeout bounds each host's connection attempt when the URL does not say
// (connect_timeout=N seconds; 0 waits as long as the network does).
const DefaultConnectTimeout = 10 * time.Second

// Open connects to dsn, learns what the server is (a hot standby is read-only) and whether a
// pooler answers (picking the exec mode that works through it), checks the schema (migrating
// it when opts.Migrate) and the role's privileges. The caller closes the DB.
func Open(ctx context.Context, dsn string, opts Options) (*DB, error) {
	pol, err := resolvePolicy(dsn, opts)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, parseError(dsn, err)
	}
	for _, k := range policyParams {
		delete(cfg.ConnConfig.RuntimeParams, k)
	}
	if !dsnSetsConnectTimeout(dsn) {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	provisional := pol.provisional()
	cfg.ConnConfig.DefaultQueryExecMode = provisional
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
	db := &DB{ReadOnly: opts.ReadOnly, dsn: pol.childDSN(dsn), pol: pol, connCfg: cfg.ConnConfig.Copy(),
		acquireTimeout: opts.AcquireTimeout, requireSync: opts.RequireSynchronousReplication}
	db.X = &Reader{db: db}
	db.mode.Store(int32(provisional))
	cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
		cc.DefaultQueryExecMode = db.execMode()
		return nil
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		// Every time read back is in UTC, whatever the process's zone: pgx would return the
		// local one, so a record (built in UTC) and the history event of the same instant would
		// print one timestamp two ways in one JSON shape.
		c.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID,
			Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
		registerRawJSONB(c.TypeMap())
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, connectError(dsn, err)
	}
	db.pool = pool
	if opts.ReadOnly {
		db.access = ReadOnlyAsked
	}
	if err := db.bootstrap(ctx, dsn, opts); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.start(ctx, opts); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

func (db *DB) execMode() pgx.QueryExecMode { return pgx.QueryExecMode(db.mode.Load()) }

// bootstrap makes the session's first connection and learns, before any statement of
// idemwork's own, what the transactions' settings must be and whether a pooler answers; then
// it fixes the exec mode (connections already open in another mode are closed) and the settings.
func (db *DB) bootstrap(ctx context.Context, dsn string, opts Options) error {
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		return db.pol.openError(dsn, err)
	}
	f, err := readFirstFacts(ctx, c.Conn().PgConn())
	host, port := remoteOf(c.Conn().PgConn())
	c.Release()
	if err != nil {
		return TranslateError(fmt.Errorf("connect: read the server's settings: %w", err))
	}
	where := host
	if port != 0 {
		where = net.JoinHostPort(host, strconv.Itoa(port))
	}
	startsAsSet := db.pol.schemaPath == "" && f.reset["standard_conforming_strings"] == "on"
	mode, apart, err := db.pol.modeFor(f.pooled, startsAsSet, where)
	if err != nil {
		return err
	}
	if mode != db.execMode() {
		db.mode.Store(int32(mode))
		// The first connection was opened in the provisional mode and sent nothing but the
		// simple protocol's: closed, the next one opens in mode.
		db.pool.Reset()
	}
	db.beginApart = apart
	db.settings = newTxSettings(db.pol.schemaPath, f.reset)
	if f.inRecovery {
		// Before any transaction of idemwork's own: on a standby they must begin READ ONLY.
		db.readOnly(ReadOnlyStandby)
	}
	db.conn = Connection{Pooler: db.pol.pooler, PoolerDeclared: db.pol.declared, PoolerDetected: f.pooled,
		ExecMode: execModeName(mode), SearchPath: db.settings.searchPath, Host: host, Port: port, ServerVersion: f.version}
	return nil
}

// firstFacts is what the session's first connection reads before anything else.
type firstFacts struct {
	// pooled: the backend key the connection got is not the server process's id — a pooler
	// (pgbouncer, and its kind) answered the handshake with one of its own.
	pooled     bool
	inRecovery bool
	reset      map[string]string
	version    string
}

// readFirstFacts reads, in one round trip of pgx's simple protocol (nothing prepared, nothing
// left on a server connection), the backend's process id and the reset values of the settings
// every transaction sets: what RESET would give — the role's, the database's, the server's file
// — which no SET by another client of a pooler changes. Its own transaction sets the timeouts to
// those values, so one a client left behind cannot cancel it.
func readFirstFacts(ctx context.Context, pc *pgconn.PgConn) (firstFacts, error) {
	names := append([]string{"search_path", "standard_conforming_strings"}, resetSettings...)
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "'" + n + "'"
	}
	sql := beginReadOnly + `; set local statement_timeout to default; set local lock_timeout to default;
		select pg_catalog.pg_backend_pid()::text, pg_catalog.current_setting('server_version'), pg_catalog.pg_is_in_recovery()::text;
		select name, reset_val from pg_catalog.pg_settings where name in (` + strings.Join(quoted, ", ") + `);
		commit`
	results, err := pc.Exec(ctx, sql).ReadAll()
	if err != nil {
		return firstFacts{}, err
	}
	f := firstFacts{reset: map[string]string{}}
	if len(results) != 6 || len(results[3].Rows) != 1 {
		return f, fmt.Errorf("unexpected answer to the first read (%d results)", len(results))
	}
	row := results[3].Rows[0]
	pid, err := strconv.ParseUint(string(row[0]), 10, 32)
	if err != nil {
		return f, fmt.Errorf("read the backend's process id: %w", err)
	}
	f.pooled, f.version, f.inRecovery = uint32(pid) != pc.PID(), string(row[1]), string(row[2]) == "true"
	for _, r := range results[4].Rows {
		f.reset[string(r[0])] = string(r[1])
	}
	for _, n := range names {
		if _, ok := f.reset[n]; !ok {
			return f, fmt.Errorf("the server has no setting %s", n)
		}
	}
	return f, nil
}

// remoteOf is the address a connection went to: host and port over TCP, the socket's directory
// (and its port) over a Unix socket.
func remoteOf(pc *pgconn.PgConn) (string, int) {
	switch a := pc.Conn().RemoteAddr().(type) {
	case *net.TCPAddr:
		return a.IP.String(), a.Port
	case *net.UnixAddr:
		dir, file := filepath.Split(a.Name)
		port, _ := strconv.Atoi(strings.TrimPrefix(file, ".s.PGSQL."))
		return strings.TrimSuffix(dir, "/"), port
	}
	return pc.Conn().RemoteAddr().String(), 0
}

// start learns the server's role (primary or standby), then checks schema and privileges.
func (db *DB) start(ctx context.Context, opts Options) error {
	// One statement: who the session is, where the tables are, and the replication state.
	repl, err := scanReplication(func(dest ...any) error {
		row := db.Q(ctx).QueryRow(ctx, `SELECT current_user, coalesce(current_schema(), ''), r.* FROM (`+replicationSQL+`) r`)
		return row.Scan(append([]any{&db.conn.User, &db.conn.Schema}, dest...)...)
	})
	if err != nil {
		return TranslateError(fmt.Errorf("connect: read the server's state: %w", err))
	}
	repl.Host, repl.Port = db.conn.Host, db.conn.Port
	db.repl.last, db.repl.read = repl, true
	if repl.InRecovery {
		db.conn.Standby = true
		db.readOnly(ReadOnlyStandby)
	}
	if err := db.checkSchema(ctx, opts.AnySchema); err != nil {
		return err
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
	db.ReadOnly = true
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
			msg += fmt.Sprintf(" — by a role that may create tables in schema %s (role %s may not: ask the database's owner)", Ident(st.Schema), Ident(user))
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

// WriteRefusal is the coded error a write gets on this session, nil when it may write: the
// session's read-only reason, else REPLICATION_UNSAFE while require_synchronous_replication is
// set and no synchronous standby confirms commits.
func (db *DB) WriteRefusal() error {
	if err := db.accessRefusal(); err != nil {
		return err
	}
	return db.replicationRefusal()
}

// accessRefusal is the session's read-only reason as a coded error, nil when writable.
func (db *DB) accessRefusal() error {
	switch db.access {
	case ReadOnlyStandby:
		return apperr.New(apperr.ReadOnly, "this is a hot standby; writes go to the primary (connect to it with --allow-writes to write)")
	case ReadOnlyNewerSchema:
		return apperr.New(apperr.SchemaNotReady, "%s", db.SchemaState().Problem())
	case ReadOnlyAsked:
		return apperr.New(apperr.ReadOnly, "this session is read-only; reconnect with --allow-writes (or allow_writes = true) to write")
	case ReadOnlyService:
		return apperr.New(apperr.ReadOnly, "schema %s holds a service's idempotency keys (the runner library's tables), not idemwork's records: "+
			"idemwork inspects it (keys, key, history, verify, the Keys view) and writes nothing there", Ident(db.conn.Schema))
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
// schema (which it creates when [database] schema names one that does not exist yet), and a
// direct connection: goose's session lock, and the schema its connection starts with, are
// session state a pooler would move between server connections or hand to other clients.
func (db *DB) Migrate(ctx context.Context) (int, error) {
	if err := db.WriteRefusal(); err != nil {
		return 0, err
	}
	if db.conn.Pooler == PoolerTransaction {
		return 0, apperr.New(apperr.Usage, "migrations cannot run through a transaction pooler (goose holds a session lock while "+
			"it migrates, and a transaction pooler moves the session between server connections): run "+
			"'idemwork migrate --allow-writes' with a URL that reaches PostgreSQL directly")
	}
	if db.conn.PoolerDetected || db.conn.Pooler == PoolerSession {
		return 0, apperr.New(apperr.Usage, "migrations need a connection straight to PostgreSQL, and a pooler answers at %s: goose holds "+
			"a session lock while it migrates, and its session starts in the schema; a pooler hands sessions and server connections to other "+
			"clients. Run 'idemwork migrate --allow-writes' with a URL that reaches PostgreSQL directly (the server's own host and port)", db.conn.where())
	}
	if err := db.prepareSchema(ctx); err != nil {
		return 0, err
	}
	// A connection of migrate's own, straight to the server: the schema travels in its startup
	// packet (no SET), so every statement goose runs, inside its transactions or not, is in it.
	cc := db.connCfg.Copy()
	cc.DefaultQueryExecMode = pgx.QueryExecModeExec
	cc.RuntimeParams["search_path"] = db.settings.searchPath
	sqlDB := stdlib.OpenDB(*cc)
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

// Where names the node the session's first connection reached, for headers and messages.
func (c Connection) Where() string { return c.where() }

// where names the address the session connects to, for messages.
func (c Connection) where() string {
	if c.Port == 0 {
		return c.Host
	}
	if strings.HasPrefix(c.Host, "/") {
		return fmt.Sprintf("%s (port %d)", c.Host, c.Port)
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
}

// refreshSchema rereads current_schema() (a migration may have created the schema).
func (db *DB) refreshSchema(ctx context.Context) error {
	return db.Q(ctx).QueryRow(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&db.conn.Schema)
}

// checkSchema refuses up front a schema the session was told to use ([database] schema,
// search_path=) that the role may not use, saying which GRANT fixes it, and — unless the session
// opens for migrate, which creates it — one that does not exist. (Either would otherwise read as
// a search_path with no schema on it, and the advice would be to set the schema that is set.)
func (db *DB) checkSchema(ctx context.Context, anySchema bool) error {
	name := firstPathSchema(db.pol.schemaPath)
	if name == "" {
		return nil
	}
	var exists, usage, create bool
	var user, database string
	if err := db.Q(ctx).QueryRow(ctx, `SELECT n.oid IS NOT NULL, coalesce(pg_catalog.has_schema_privilege(n.oid, 'USAGE'), false),
			coalesce(pg_catalog.has_schema_privilege(n.oid, 'CREATE'), false), current_user, pg_catalog.current_database()
		FROM (SELECT $1::text AS name) q LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = q.name`, name).
		Scan(&exists, &usage, &create, &user, &database); err != nil {
		return TranslateError(fmt.Errorf("connect: read the schema's privileges: %w", err))
	}
	switch {
	case exists && !usage:
		grant := "USAGE"
		if anySchema && !db.ReadOnly && !create {
			grant = "USAGE, CREATE"
		}
		return apperr.New(apperr.PermissionDenied, "role %s lacks USAGE on schema %s, the schema idemwork is set to use "+
			"([database] schema, or search_path= in the URL), so it cannot see the tables there: ask for GRANT %s ON SCHEMA %s TO %s",
			Ident(user), Ident(name), grant, Ident(name), Ident(user))
	case !exists && !anySchema:
		return apperr.New(apperr.SchemaNotReady, "schema %s, the schema idemwork is set to use ([database] schema, or search_path= in "+
			"the URL), does not exist in database %s: run 'idemwork migrate --allow-writes' (it creates the schema when the role may), "+
			"or set the schema that holds idemwork's tables", Ident(name), Ident(database))
	}
	return nil
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
	if strings.HasPrefix(schema, "pg_temp") {
		// The path's schema is missing and the connection has a temporary schema, listed last.
		schema = ""
	}
	if schema == "" {
		name := firstPathSchema(db.pol.schemaPath)
		if name == "" {
			return apperr.New(apperr.SchemaNotReady, "no schema of the session's search_path exists: set [database] schema to the schema idemwork should use")
		}
		if !canCreateSchema {
			return apperr.New(apperr.PermissionDenied, "role %s lacks CREATE on database %s, so it cannot create schema %s: "+
				"ask for CREATE SCHEMA %s AUTHORIZATION %s (or GRANT CREATE ON DATABASE %s TO %s)",
				Ident(user), Ident(database), Ident(name), Ident(name), Ident(user), Ident(database), Ident(user))
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
			Ident(user), Ident(schema), Ident(schema), Ident(user), Ident(user))
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

// Ident writes a name as SQL would need it: bare when it is a plain lower-case identifier,
// double-quoted otherwise (messages show GRANT statements a user can paste).
func Ident(s string) string {
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
		Ident(db.conn.User), strings.Join(lacks, "; "), grant, Ident(db.conn.Schema), Ident(db.conn.User), hint)
}

// Warm opens up to n connections of the pool before a burst, so the burst's requests meet on
// the database instead of queueing for handshakes. It opens a few at a time: the server starts a
// process for each, one after another, and a burst of hundreds at once (a storm's processes
// warming together) would make the last ones wait past the connect timeout on a busy server.
func (db *DB) Warm(ctx context.Context, n int) error {
	const atOnce = 8
	n = min(n, int(db.pool.Config().MaxConns))
	conns := make([]*pgxpool.Conn, 0, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	slots := make(chan struct{}, atOnce)
	for range n {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
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
		return translateConnectError(err, connect, pgErr)
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
	case pgErr.Code == "42501" && strings.Contains(pgErr.Message, `"session_replication_role"`):
		return apperr.Wrap(apperr.PermissionDenied, err, "the session's session_replication_role is not \"origin\" (\"replica\" turns off "+
			"foreign keys and triggers, which idemwork's integrity rests on), and this role may not set it back for its transactions: "+
			"nothing was written; ask for it to be reset where it was set (ALTER ROLE … RESET session_replication_role, or ALTER "+
			"DATABASE … RESET session_replication_role), or for GRANT SET ON PARAMETER session_replication_role TO the role")
	case pgErr.Code == "42501": // insufficient_privilege
		return apperr.Wrap(apperr.PermissionDenied, err, "the server refused: %s; grant idemwork's role that privilege "+
			"(README \"Production databases\" lists what each mode needs)", pgErr.Message)
	case pgErr.Code == "42P01" || pgErr.Code == "3F000": // undefined_table, invalid_schema_name
		return apperr.Wrap(apperr.SchemaNotReady, err, "%s: the database is not migrated for this idemwork; run 'idemwork migrate --allow-writes' against it", pgErr.Message)
	case (pgErr.Code == "42P05" || pgErr.Code == "26000") && strings.Contains(pgErr.Message, "stmtcache_"):
		// idemwork prepares named statements only where no pooler answers or a session pooler is
		// declared: this is a pooler that runs transactions, not sessions, declared as the other.
		return apperr.Wrap(apperr.PoolerMisconfigured, err, "the database lost or mixed up this session's prepared statements (SQLSTATE %s), "+
			"the mark of a transaction-pooling pgbouncer where a session pooler was declared: set [database] pooler = \"transaction\" "+
			"(or pooler=transaction in the URL) and remove default_query_exec_mode=cache_statement, then restart; nothing was committed "+
			"by the statement that failed", pgErr.Code)
	case pgErr.Code == "57014" && strings.Contains(pgErr.Message, "statement timeout"): // query_canceled
		return apperr.Wrap(apperr.DatabaseUnavailable, err, "the database cancelled the statement when it reached statement_timeout (SQLSTATE %s); "+
			"the transaction rolled back: retry; if it keeps happening, look for a transaction holding the rows' locks (the Locks view) "+
			"or raise statement_timeout for idemwork's role; behind a pooler, another client may have left a very short "+
			"SET statement_timeout on the server connection, which holds until the first statement of idemwork's transaction "+
			"resets it (docs/databases.md): fix that client, or have the pooler reset sessions (server_reset_query)", pgErr.Code)
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

// authRefused reports whether the server (or a pooler in front of it) refused to log the session
// in: a wrong password or user, no pg_hba.conf entry. pgbouncer reports its own authentication
// failures as 08P01, a protocol violation, in the connection_exception class.
func authRefused(e *pgconn.PgError) bool {
	switch e.Code {
	case "28P01", "28000":
		return true
	case "08P01":
		return strings.Contains(e.Message, "authentication failed")
	}
	return false
}

// translateConnectError codes Open's own failure to connect, already worded for users (the
// redacted URL, the cause, a hint): a refusal the user must fix (credentials, the database's
// name, a URL parameter the server does not know, one a pooler refuses) has its own code and
// is not to be retried; an unreachable server is DATABASE_UNAVAILABLE with what to check.
func translateConnectError(err error, connect *ConnectError, pgErr *pgconn.PgError) error {
	if pgErr != nil {
		switch {
		case startupRefused(pgErr):
			return apperr.Wrap(apperr.PoolerMisconfigured, err, "%s", connect.Error())
		case authRefused(pgErr):
			return apperr.Wrap(apperr.AuthFailed, err, "%s", connect.Error())
		case pgErr.Code == "3D000": // invalid_catalog_name
			return apperr.Wrap(apperr.DatabaseNotFound, err, "%s", connect.Error())
		case pgErr.Code == "42704" && strings.Contains(pgErr.Message, "configuration parameter"): // undefined_object
			name := pgErr.Message
			if _, after, ok := strings.Cut(name, "parameter "); ok {
				name = strings.Trim(after, `"`)
			}
			return apperr.Wrap(apperr.Usage, err, "the database URL's parameter %s is neither a connection setting nor a PostgreSQL "+
				"setting (the server refused it as a startup parameter): remove it from the URL, or correct its name (see README "+
				"\"The database\" for what idemwork reads itself: pooler, search_path)", printable(name))
		case unavailableState(pgErr.Code):
			return apperr.Wrap(apperr.DatabaseUnavailable, err, "%s; retry in a moment, or check that the database is running and reachable", connect.Error())
		}
		// A failure of Open's own first statements (a missing privilege) has the code it would
		// have later.
		if known := translatePgError(err, pgErr); known != err {
			return known
		}
		return apperr.Wrap(apperr.Internal, err, "%s", connect.Error())
	}
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns):
		return apperr.Wrap(apperr.DatabaseUnavailable, err, "connect to %s: the host name %s does not resolve (%s): check the host in the URL",
			connect.Where, printable(dns.Name), printable(dns.Err))
	case errors.Is(err, syscall.ECONNREFUSED):
		return apperr.Wrap(apperr.DatabaseUnavailable, err, "connect to %s: nothing listens there (connection refused): check "+
			"that PostgreSQL (or the pooler) runs and that the URL's host and port are right; retry once it does", connect.Where)
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return apperr.Wrap(apperr.DatabaseUnavailable, err, "connect to %s: the server did not answer within the connect timeout (%s "+
			"unless the URL sets connect_timeout=N seconds): check that PostgreSQL (or the pooler) runs there and that nothing drops the "+
			"connection on the way; retry in a moment", connect.Where, DefaultConnectTimeout)
	}
	return apperr.Wrap(apperr.DatabaseUnavailable, err, "%s; retry in a moment, or check that the database is running and reachable", connect.Error())
}

// isTimeout reports whether err is a network timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// unavailableState reports whether a SQLSTATE says the server cannot serve the session now: it
// is shutting down or starting up, refuses more connections, or the connection failed.
func unavailableState(code string) bool {
	return code == "57P01" || code == "57P02" || code == "57P03" || code == "53300" || code == "53400" || strings.HasPrefix(code, "08")
}

// translate is TranslateError with this session's own read-only reason. A session that opened
// writable on a primary and meets a read-only server (a failover demoted the node its
// connections reach) is told so, and how to follow the primary.
func (db *DB) translate(err error) error {
	if err == nil {
		return nil // before the errors.As targets, which escape: no allocation on every success
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "25006" {
		if refusal := db.accessRefusal(); refusal != nil {
			ae := refusal.(*apperr.Error)
			ae.Err = err
			return ae
		}
		return apperr.Wrap(apperr.ReadOnly, err, "the server refused a write as read-only although this session opened on a primary: "+
			"a failover may have made the node it reaches a standby; list every node in the URL with target_session_attrs=read-write "+
			"(postgres://a,b/db?target_session_attrs=read-write) so new connections follow the primary, and retry (a write with the "+
			"same Idempotency-Key is safe to retry)")
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
