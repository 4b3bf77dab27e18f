package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"idemwork/config"
	"idemwork/embedded"
	"idemwork/kernel"
	"idemwork/store"
)

// globalFlags are the flags every command accepts.
type globalFlags struct {
	dsn         string
	configPath  string
	dataDir     string
	json        bool
	allowWrites bool
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
}

// ConnInfo describes the database an app is connected to, for headers and messages.
type ConnInfo struct {
	Embedded bool   `json:"embedded"`
	Display  string `json:"display"` // host or "embedded <data dir>"; never a password
	Database string `json:"database"`
	ReadOnly bool   `json:"readOnly"`
	DSN      string `json:"-"`
}

// Pool ceilings when database.max_conns is 0.
const (
	defaultEmbeddedConns = 64
	defaultRemoteConns   = 10
)

// embeddedDatabase is the database idemwork creates inside its private cluster.
const embeddedDatabase = "idemwork"

func (a *app) loadConfig() error {
	cfg, err := config.Load(a.flags.configPath, a.getenv)
	if err != nil {
		// A bad file, key, value or environment variable is the user's to fix (the message
		// names it): USAGE, exit 2.
		return usagef("%v", err)
	}
	if a.flags.dsn != "" {
		cfg.Database.URL = a.flags.dsn
	}
	if a.flags.dataDir != "" {
		cfg.Database.DataDir = a.flags.dataDir
	}
	if a.flags.allowWrites {
		cfg.Database.AllowWrites = true
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
func (a *app) openDB(ctx context.Context, migrate bool) (*store.DB, error) {
	if a.db != nil {
		return a.db, nil
	}
	if err := a.loadConfig(); err != nil {
		return nil, err
	}
	opts := store.Options{Migrate: migrate, MaxConns: int32(a.cfg.Database.MaxConns), AcquireTimeout: a.cfg.Idempotency.AcquireTimeout.Duration}
	if opts.MaxConns == 0 {
		// Connections open lazily; the ceiling is what lets a storm of C concurrent requests
		// really reach the database (and queue on its unique index) instead of on the pool.
		opts.MaxConns = defaultEmbeddedConns
		if a.cfg.Database.URL != "" {
			opts.MaxConns = defaultRemoteConns
		}
	}
	if a.cfg.Database.URL != "" {
		opts.ReadOnly = !a.cfg.Database.AllowWrites
		a.conn = ConnInfo{Display: describeDSN(a.cfg.Database.URL), Database: databaseOf(a.cfg.Database.URL),
			ReadOnly: opts.ReadOnly, DSN: a.cfg.Database.URL}
	} else {
		c, err := embedded.Start(ctx, a.embeddedOptions(false))
		if err != nil {
			return nil, &setupError{fmt.Errorf("embedded PostgreSQL: %w", err)}
		}
		a.cluster = c
		if err := store.EnsureDatabase(ctx, c.DSN("postgres"), embeddedDatabase); err != nil {
			a.close()
			return nil, &setupError{err}
		}
		a.conn = ConnInfo{Embedded: true, Display: "embedded " + c.DataDir, Database: embeddedDatabase, DSN: c.DSN(embeddedDatabase)}
	}
	db, err := store.Open(ctx, a.conn.DSN, opts)
	if err != nil {
		a.close()
		return nil, &setupError{err}
	}
	a.db = db
	return db, nil
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

// describeDSN names host and port of a DSN without credentials.
func describeDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		host := u.Host
		if host == "" {
			host = u.Query().Get("host")
		}
		return host
	}
	for _, f := range strings.Fields(dsn) {
		if strings.HasPrefix(f, "host=") {
			return strings.TrimPrefix(f, "host=")
		}
	}
	return "server"
}

func databaseOf(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		return strings.TrimPrefix(u.Path, "/")
	}
	for _, f := range strings.Fields(dsn) {
		if strings.HasPrefix(f, "dbname=") {
			return strings.TrimPrefix(f, "dbname=")
		}
	}
	return ""
}
