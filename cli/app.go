package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/config"
	"github.com/idemwork/idemwork/embedded"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/libinspect"
	"github.com/idemwork/idemwork/store"
)

// globalFlags are the flags every command accepts.
type globalFlags struct {
	dsn         string
	configPath  string
	dataDir     string
	json        bool
	allowWrites bool
	// allowInsecureConfig accepts a config file holding secrets that other users can read.
	allowInsecureConfig bool
	schema              string
}

// app is one invocation: its settings and the database it opened. Nothing here is global;
// tests run many apps in one process.
type app struct {
	flags  globalFlags
	stdout io.Writer
	stderr io.Writer
	getenv config.Getenv

	cfg     config.Config
	cluster *embedded.Cluster
	db      *store.DB
	conn    ConnInfo
	k       *kernel.Kernel
	// warnedDSN: the warning about a password on the command line was given.
	warnedDSN bool
	// plugins restore a service's results (Options.Plugins).
	plugins []libinspect.Plugin
}

// ConnInfo describes the database an app is connected to, for headers and messages.
type ConnInfo struct {
	Embedded bool   `json:"embedded"`
	Display  string `json:"display"` // host:port or "embedded <data dir>"; never a password
	Database string `json:"database"`
	ReadOnly bool   `json:"readOnly"`
	// ReadOnlyReason says why writes are refused: "read-only session", "hot standby", …
	ReadOnlyReason string `json:"readOnlyReason,omitempty"`
	// Pooler and ExecMode are how idemwork talks to the database (README "Production databases").
	Pooler   store.Pooler `json:"pooler"`
	ExecMode string       `json:"execMode"`
	DSN      string       `json:"-"`
}

// Pool ceilings when database.max_conns is 0.
const (
	defaultEmbeddedConns = 64
	defaultRemoteConns   = 10
)

// embeddedDatabase is the database idemwork creates inside its private cluster.
const embeddedDatabase = "idemwork"

func (a *app) loadConfig() error {
	cfg, err := config.LoadWith(a.flags.configPath, a.getenv, config.LoadOptions{AllowInsecure: a.flags.allowInsecureConfig})
	if err != nil {
		// A bad file, key, value or environment variable is the user's to fix (the message
		// names it): USAGE, exit 2.
		return usagef("%v", err)
	}
	if a.flags.dsn != "" {
		cfg.Database.URL = a.flags.dsn
		if config.DSNHasPassword(a.flags.dsn) && !a.warnedDSN {
			a.warnedDSN = true
			fmt.Fprintln(a.stderr, "idemwork: --dsn carries a password other local users can read (ps, /proc, shell history); idemwork hides it from its own process list at once, but set IDEMWORK_DSN or keep the password in ~/.pgpass (PGPASSFILE) instead")
		}
	}
	if a.flags.dataDir != "" {
		cfg.Database.DataDir = a.flags.dataDir
	}
	if a.flags.allowWrites {
		cfg.Database.AllowWrites = true
	}
	if a.flags.schema != "" {
		cfg.Database.Schema = a.flags.schema
	}
	a.cfg = cfg
	return nil
}

func (a *app) dataDir() string {
	if a.cfg.Database.DataDir != "" {
		return a.cfg.Database.DataDir
	}
	return embedded.DefaultDataDir()
}

func (a *app) embeddedOptions(detached bool) embedded.Options {
	return embedded.Options{
		DataDir:  a.dataDir(),
		BinDir:   a.cfg.Database.PGBinDir,
		TCPPort:  a.cfg.Database.TCPPort,
		Durable:  true,
		Detached: detached,
	}
}

// openDB connects per SPEC §10.1's precedence: --dsn > IDEMWORK_DSN > DATABASE_URL > config
// url > the embedded cluster (started here, and stopped by close, if it was not running).
// checkSchema is true for every command but migrate: the embedded cluster is then migrated, and
// a database given by URL whose schema is not this binary's is refused with SCHEMA_NOT_READY
// (one a newer idemwork migrated opens read-only). A database given by URL is never migrated
// here: only 'idemwork migrate --allow-writes' does that.
func (a *app) openDB(ctx context.Context, checkSchema bool) (*store.DB, error) {
	if a.db != nil {
		return a.db, nil
	}
	if err := a.loadConfig(); err != nil {
		return nil, err
	}
	opts := store.Options{MaxConns: int32(a.cfg.Database.MaxConns), Schema: a.cfg.Database.Schema, AnySchema: !checkSchema,
		AcquireTimeout: a.cfg.Idempotency.AcquireTimeout.Duration, RequireSynchronousReplication: a.cfg.Database.RequireSynchronousReplication}
	if opts.MaxConns == 0 {
		// Connections open lazily; the ceiling is what lets a storm of C concurrent requests
		// really reach the database (and queue on its unique index) instead of on the pool.
		opts.MaxConns = defaultEmbeddedConns
		if a.cfg.Database.URL != "" {
			opts.MaxConns = defaultRemoteConns
		}
	}
	var dsn string
	if a.cfg.Database.URL != "" {
		dsn = a.cfg.Database.URL
		opts.ReadOnly = !a.cfg.Database.AllowWrites
		opts.Pooler = store.Pooler(a.cfg.Database.Pooler)
		where, database := store.DescribeDSN(dsn)
		a.conn = ConnInfo{Display: where, Database: database}
	} else {
		if a.cfg.Database.Pooler != "" && a.cfg.Database.Pooler != string(store.PoolerNone) {
			return nil, usagef("database.pooler = %q applies to a database given by URL; the embedded cluster has no pooler", a.cfg.Database.Pooler)
		}
		c, err := embedded.Start(ctx, a.embeddedOptions(false))
		if err != nil {
			return nil, &setupError{fmt.Errorf("embedded PostgreSQL: %w", err)}
		}
		a.cluster = c
		if err := store.EnsureDatabase(ctx, c.DSN("postgres"), embeddedDatabase); err != nil {
			a.close()
			return nil, &setupError{err}
		}
		opts.Migrate = checkSchema
		dsn = c.DSN(embeddedDatabase)
		a.conn = ConnInfo{Embedded: true, Display: "embedded " + c.DataDir, Database: embeddedDatabase}
	}
	db, err := store.Open(ctx, dsn, opts)
	if err != nil {
		a.close()
		// A known cause (an unreachable server, a pooler idemwork was not told about, a missing
		// privilege) gets its code and its words, as it would on any later statement.
		err = store.TranslateError(err)
		var ae *apperr.Error
		if errors.As(err, &ae) {
			return nil, err
		}
		return nil, &setupError{err}
	}
	a.db = db
	cn := db.Connection()
	if !a.conn.Embedded {
		// The node actually reached (after a multi-host URL's choice), not the URL's first host.
		a.conn.Display = cn.Where()
	}
	a.conn.DSN, a.conn.ReadOnly, a.conn.ReadOnlyReason = db.DSN(), db.ReadOnly, db.ReadOnlyReason()
	a.conn.Pooler, a.conn.ExecMode = cn.Pooler, cn.ExecMode
	return db, nil
}

// service returns the inspector of a service's database (one the runner library wrote: see
// store.DB.Service), or nil when the database is idemwork's own.
func (a *app) service(ctx context.Context) (*libinspect.Inspector, error) {
	k, err := a.kernel(ctx)
	if err != nil {
		return nil, err
	}
	if !k.DB().Service() {
		return nil, nil
	}
	return libinspect.New(k.DB(), k.Runner().Clock(), a.plugins), nil
}

// close releases the pool and stops the embedded cluster if this invocation started it.
func (a *app) close() {
	if a.db != nil {
		a.db.Close()
		a.db = nil
	}
	if a.cluster != nil {
		_ = a.cluster.Stop(context.Background())
		a.cluster = nil
	}
}
