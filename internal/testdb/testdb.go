// Package testdb gives tests a real PostgreSQL: one embedded cluster per test binary (or the
// server of IDEMWORK_TEST_DSN), a template database migrated once, and a fresh database per test
// created with CREATE DATABASE … TEMPLATE and dropped when the test ends. It also starts the
// components production puts in front of PostgreSQL, on loopback: pgbouncer in transaction and
// in session mode (Bouncer) and a hot standby made with pg_basebackup -R (Standby). No test
// skips for want of any of them, but for one case it names: a server of IDEMWORK_TEST_DSN that
// gives no base backup has no standby.
//
// Use it from TestMain so everything it started stops when the binary ends:
//
//	func TestMain(m *testing.M) { testdb.Main(m) }
package testdb

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemwork/idemwork/embedded"
	"github.com/idemwork/idemwork/store"
)

// server is the one cluster of this test binary. Package state is unavoidable here: it is what
// lets every test of a binary share one server; Main tears it down.
type server struct {
	once     sync.Once
	err      error
	cluster  *embedded.Cluster
	tmpDir   string
	adminDSN string
	template string
	// strategy is how CREATE DATABASE copies a template: FILE_COPY where the server has it
	// (PostgreSQL 15 and later, whose default WAL_LOG writes every page of the copy to the WAL
	// and through shared buffers: several times the CPU of a file copy for a test's database).
	strategy string
	seq      atomic.Int64

	mu        sync.Mutex
	templates map[string]string
	tplErr    map[string]error
	bouncers  map[store.Pooler]*Bouncer
	standby   *Standby
	standErr  error
}

var shared server

// Main runs the tests of a package and stops what testdb started afterwards.
func Main(m *testing.M) {
	code := m.Run()
	shared.shutdown()
	os.Exit(code)
}

func (s *server) shutdown() {
	s.mu.Lock()
	for _, b := range s.bouncers {
		b.stop()
	}
	if s.standby != nil {
		s.standby.stop()
	}
	s.mu.Unlock()
	if s.cluster != nil {
		_ = s.cluster.Stop(context.Background())
	} else if s.adminDSN != "" && s.template != "" {
		if conn, err := pgx.Connect(context.Background(), s.adminDSN); err == nil {
			_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{s.template}.Sanitize())
			for _, tpl := range s.templates {
				_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{tpl}.Sanitize())
			}
			conn.Close(context.Background())
		}
	}
	if s.tmpDir != "" {
		_ = os.RemoveAll(s.tmpDir)
	}
}

func (s *server) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "idemwork-test-")
	if err != nil {
		return err
	}
	s.tmpDir = dir
	// As root the servers run as postgres, which must be able to enter the temp dir.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	if dsn := os.Getenv("IDEMWORK_TEST_DSN"); dsn != "" {
		s.adminDSN = dsn
		s.template = fmt.Sprintf("idemwork_tpl_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
	} else {
		// Parallel tests of one binary share the cluster, and a bench or multi-process storm
		// opens a few hundred connections of its own: 300 (the embedded default) is too few.
		// The cluster's socket accepts replication connections, for the standby's pg_basebackup;
		// loopback TCP gives the postgres role the cluster's password, which the standby's copy
		// of the data dir (and of the role) shares.
		c, err := embedded.Start(ctx, embedded.Options{DataDir: filepath.Join(dir, "pg"), Durable: false, TCPPort: -1,
			Settings: map[string]string{"max_connections": "1000", "wal_level": "replica", "max_wal_senders": "10"}})
		if err != nil {
			return fmt.Errorf("testdb: start the embedded cluster: %w", err)
		}
		s.cluster = c
		s.adminDSN = c.DSN("postgres")
		s.template = "idemwork_template"
	}
	conn, err := pgx.Connect(ctx, s.adminDSN)
	if err != nil {
		return fmt.Errorf("testdb: connect to %s: %w", store.RedactDSN(s.adminDSN), err)
	}
	defer conn.Close(ctx)
	var version int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		return err
	}
	if version >= 150000 {
		s.strategy = " STRATEGY FILE_COPY"
	}
	tpl := pgx.Identifier{s.template}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+tpl); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+tpl); err != nil {
		return fmt.Errorf("testdb: create template: %w", err)
	}
	db, err := store.Open(ctx, WithDatabase(s.adminDSN, s.template), store.Options{Migrate: true})
	if err != nil {
		return fmt.Errorf("testdb: migrate template: %w", err)
	}
	db.Close()
	return nil
}

func (s *server) ensure(t testing.TB) {
	t.Helper()
	s.once.Do(func() { s.err = s.start() })
	if s.err != nil {
		t.Fatalf("testdb: %v", s.err)
	}
}

// WithDatabase swaps the database name of a URL or keyword=value DSN.
func WithDatabase(dsn, name string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		u.Path = "/" + name
		u.RawPath = ""
		return u.String()
	}
	// In keyword=value form the last setting of a key wins.
	return store.WithDSNParams(dsn, [][2]string{{"dbname", name}})
}

// WithParam sets a connection parameter (a run-time setting such as statement_timeout, or
// application_name) in a URL or key=value DSN.
func WithParam(dsn, name, value string) string {
	return store.WithDSNParams(dsn, [][2]string{{name, value}})
}

// DB is a fresh, migrated database of one test.
type DB struct {
	*store.DB
	// Pool is a raw pool on the same database for what a test does behind the store's back on
	// purpose: plant rows, hold a lock in a transaction of its own, read plans.
	Pool *pgxpool.Pool
	// DSN reaches this database (for child processes and a second pool).
	DSN  string
	Name string
}

// Options tunes New.
type Options struct {
	ReadOnly       bool
	MaxConns       int32
	AcquireTimeout time.Duration
}

// New returns a fresh migrated database that is dropped when t ends.
func New(t testing.TB) *DB { return NewWith(t, Options{}) }

// NewWith is New with options for the pool.
func NewWith(t testing.TB, opts Options) *DB {
	t.Helper()
	name := NewDatabase(t)
	dsn := WithDatabase(shared.adminDSN, name)
	db, err := store.Open(context.Background(), dsn, store.Options{ReadOnly: opts.ReadOnly, MaxConns: opts.MaxConns, AcquireTimeout: opts.AcquireTimeout})
	if err != nil {
		t.Fatalf("testdb: open: %v", err)
	}
	t.Cleanup(db.Close)
	raw, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatalf("testdb: open: %v", err)
	}
	t.Cleanup(raw.Close)
	return &DB{DB: db, Pool: raw, DSN: dsn, Name: name}
}

// NewDatabase creates a fresh migrated database, dropped when t ends, and returns its name
// (for tests that open it themselves: through a pooler, on the standby, with other options).
func NewDatabase(t testing.TB) string {
	t.Helper()
	shared.ensure(t)
	return createDatabase(t, shared.template)
}

// NewDatabaseFrom creates a database, dropped when t ends, as a copy of the template key names:
// made once per test binary by build (given the template's name; it must leave no connection
// open), and dropped when the binary ends. A test that needs a database set up in a way of its
// own (migrated into two schemas, say) pays for the set-up once, not once per test.
func NewDatabaseFrom(t testing.TB, key string, build func(t testing.TB, name string)) string {
	t.Helper()
	shared.ensure(t)
	shared.mu.Lock()
	tpl, made := shared.templates[key]
	err := shared.tplErr[key]
	if !made && err == nil {
		tpl = fmt.Sprintf("tpl_%s_%d", key, os.Getpid())
		Admin(t, "DROP DATABASE IF EXISTS "+pgx.Identifier{tpl}.Sanitize())
		Admin(t, createSQL(tpl, "template0"))
		if shared.templates == nil {
			shared.templates, shared.tplErr = map[string]string{}, map[string]error{}
		}
		shared.templates[key] = tpl
		ok := false
		func() {
			defer func() {
				if !ok {
					shared.tplErr[key] = fmt.Errorf("building template %s failed", key)
				}
			}()
			build(t, tpl)
			ok = !t.Failed()
		}()
		err = shared.tplErr[key]
	}
	shared.mu.Unlock()
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	return createDatabase(t, tpl)
}

// NewEmptyDatabase creates a database without idemwork's schema, dropped when t ends.
func NewEmptyDatabase(t testing.TB) string {
	t.Helper()
	return createDatabase(t, "template0")
}

func createDatabase(t testing.TB, template string) string {
	t.Helper()
	shared.ensure(t)
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), shared.seq.Add(1))
	Admin(t, createSQL(name, template))
	t.Cleanup(func() { dropDatabase(name) })
	return name
}

// createSQL creates database name as a copy of template.
func createSQL(name, template string) string {
	return "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{template}.Sanitize() + shared.strategy
}

func dropDatabase(name string) {
	ctx := context.Background()
	if conn, err := pgx.Connect(ctx, shared.adminDSN); err == nil {
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		conn.Close(ctx)
	}
}

// ForExample is New for a runnable example, which has no *testing.T: it returns the database
// and the function that drops it, and panics when the test server cannot give one.
func ForExample(opts Options) (*DB, func()) {
	shared.once.Do(func() { shared.err = shared.start() })
	if shared.err != nil {
		panic(fmt.Sprintf("testdb: %v", shared.err))
	}
	ctx := context.Background()
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), shared.seq.Add(1))
	conn, err := pgx.Connect(ctx, shared.adminDSN)
	if err != nil {
		panic(fmt.Sprintf("testdb: %v", err))
	}
	_, err = conn.Exec(ctx, createSQL(name, shared.template))
	conn.Close(ctx)
	if err != nil {
		panic(fmt.Sprintf("testdb: %v", err))
	}
	dsn := WithDatabase(shared.adminDSN, name)
	db, err := store.Open(ctx, dsn, store.Options{ReadOnly: opts.ReadOnly, MaxConns: opts.MaxConns, AcquireTimeout: opts.AcquireTimeout})
	if err != nil {
		dropDatabase(name)
		panic(fmt.Sprintf("testdb: open: %v", err))
	}
	raw, err := pgxpool.New(ctx, dsn)
	if err != nil {
		db.Close()
		dropDatabase(name)
		panic(fmt.Sprintf("testdb: open: %v", err))
	}
	return &DB{DB: db, Pool: raw, DSN: dsn, Name: name}, func() {
		raw.Close()
		db.Close()
		dropDatabase(name)
	}
}

// EmptyForExample is NewEmptyDatabase for a runnable example, which has no *testing.T: it
// returns the DSN of a fresh database without idemwork's schema and the function that drops it,
// and panics when the test server cannot give one.
func EmptyForExample() (dsn string, drop func()) {
	shared.once.Do(func() { shared.err = shared.start() })
	if shared.err != nil {
		panic(fmt.Sprintf("testdb: %v", shared.err))
	}
	ctx := context.Background()
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), shared.seq.Add(1))
	conn, err := pgx.Connect(ctx, shared.adminDSN)
	if err != nil {
		panic(fmt.Sprintf("testdb: %v", err))
	}
	_, err = conn.Exec(ctx, createSQL(name, "template0"))
	conn.Close(ctx)
	if err != nil {
		panic(fmt.Sprintf("testdb: %v", err))
	}
	return WithDatabase(shared.adminDSN, name), func() { dropDatabase(name) }
}

// DSNOf is a direct DSN of database name on the test server, as its superuser.
func DSNOf(t testing.TB, name string) string {
	t.Helper()
	shared.ensure(t)
	return WithDatabase(shared.adminDSN, name)
}

// Admin runs statements as the test server's superuser on its maintenance database.
func Admin(t testing.TB, sql string, args ...any) {
	t.Helper()
	AdminIn(t, "postgres", sql, args...)
}

// AdminIn runs statements as the test server's superuser in database name.
func AdminIn(t testing.TB, name, sql string, args ...any) {
	t.Helper()
	shared.ensure(t)
	ctx := context.Background()
	dsn := shared.adminDSN
	if name != "postgres" {
		dsn = WithDatabase(dsn, name)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("testdb: connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("testdb: %s: %v", strings.Join(strings.Fields(sql), " "), err)
	}
}

// AdminDSN is the maintenance connection of the test server (for tests that create databases).
func AdminDSN(t testing.TB) string {
	t.Helper()
	shared.ensure(t)
	return shared.adminDSN
}

// NewRole creates a LOGIN role with no privileges beyond PUBLIC's (as a production DBA would
// hand out), dropped with what it owns in database when t ends. It logs in over the test
// server's socket without a password.
func NewRole(t testing.TB, prefix, database string) string {
	t.Helper()
	role := prefix + "_" + database
	Admin(t, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN")
	t.Cleanup(func() {
		AdminIn(t, database, "DROP OWNED BY "+pgx.Identifier{role}.Sanitize())
		Admin(t, "DROP ROLE "+pgx.Identifier{role}.Sanitize())
	})
	return role
}

// Deadline bounds every test that waits (on a lock, a flight, a goroutine, a server): a
// regression that blocks fails that test with context.DeadlineExceeded instead of hanging the
// binary until go test's own timeout, minutes later and without saying which wait it was.
const Deadline = 2 * time.Minute

// Context is the context of a test that waits: t's own (ended when t ends), with Deadline.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), Deadline)
	t.Cleanup(cancel)
	return ctx
}
