// Package testdb gives tests a real PostgreSQL: one embedded cluster per test binary (or the
// server of IDEMWORK_TEST_DSN), a template database migrated once, and a fresh database per test
// created with CREATE DATABASE … TEMPLATE and dropped when the test ends. No test skips for want
// of a database.
//
// Use it from TestMain so the cluster stops when the binary ends:
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

	"idemwork/embedded"
	"idemwork/migrations"
	"idemwork/store"
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
	seq      atomic.Int64
}

var shared server

// Main runs the tests of a package and stops the cluster afterwards.
func Main(m *testing.M) {
	code := m.Run()
	shared.shutdown()
	os.Exit(code)
}

func (s *server) shutdown() {
	if s.cluster != nil {
		_ = s.cluster.Stop(context.Background())
	} else if s.adminDSN != "" && s.template != "" {
		if conn, err := pgx.Connect(context.Background(), s.adminDSN); err == nil {
			_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{s.template}.Sanitize())
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
	if dsn := os.Getenv("IDEMWORK_TEST_DSN"); dsn != "" {
		s.adminDSN = dsn
		s.template = fmt.Sprintf("idemwork_tpl_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
	} else {
		dir, err := os.MkdirTemp("", "idemwork-test-")
		if err != nil {
			return err
		}
		s.tmpDir = dir
		// As root the server runs as postgres, which must be able to enter the temp dir.
		if err := os.Chmod(dir, 0o755); err != nil {
			return err
		}
		// Parallel tests of one binary share the cluster, and a bench or multi-process storm
		// opens a few hundred connections of its own: 300 (the embedded default) is too few.
		c, err := embedded.Start(ctx, embedded.Options{DataDir: filepath.Join(dir, "pg"), Durable: false,
			Settings: map[string]string{"max_connections": "1000"}})
		if err != nil {
			return fmt.Errorf("testdb: start the embedded cluster: %w", err)
		}
		s.cluster = c
		s.adminDSN = c.DSN("postgres")
		s.template = "idemwork_template"
	}
	conn, err := pgx.Connect(ctx, s.adminDSN)
	if err != nil {
		return fmt.Errorf("testdb: connect: %w", err)
	}
	defer conn.Close(ctx)
	tpl := pgx.Identifier{s.template}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+tpl); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+tpl); err != nil {
		return fmt.Errorf("testdb: create template: %w", err)
	}
	db, err := store.Open(ctx, withDatabase(s.adminDSN, s.template), store.Options{})
	if err != nil {
		return err
	}
	_, err = migrations.Up(ctx, db.SQL())
	db.Close()
	if err != nil {
		return fmt.Errorf("testdb: migrate template: %w", err)
	}
	return nil
}

// withDatabase swaps the database name of a URL or key=value DSN.
func withDatabase(dsn, name string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		u.Path = "/" + name
		return u.String()
	}
	var parts []string
	for _, f := range strings.Fields(dsn) {
		if !strings.HasPrefix(f, "dbname=") {
			parts = append(parts, f)
		}
	}
	return strings.Join(append(parts, "dbname="+name), " ")
}

// WithParam sets a connection parameter (a run-time setting such as statement_timeout, or
// application_name) in a URL or key=value DSN.
func WithParam(dsn, name, value string) string {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		q := u.Query()
		q.Set(name, value)
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx reads '+' as itself
		return u.String()
	}
	return fmt.Sprintf("%s %s='%s'", dsn, name, strings.ReplaceAll(value, "'", `\'`))
}

// DB is a fresh, migrated database of one test.
type DB struct {
	*store.DB
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
	shared.once.Do(func() { shared.err = shared.start() })
	if shared.err != nil {
		t.Fatalf("testdb: %v", shared.err)
	}
	ctx := context.Background()
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), shared.seq.Add(1))
	conn, err := pgx.Connect(ctx, shared.adminDSN)
	if err != nil {
		t.Fatalf("testdb: connect: %v", err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{shared.template}.Sanitize())
	conn.Close(ctx)
	if err != nil {
		t.Fatalf("testdb: create database: %v", err)
	}
	dsn := withDatabase(shared.adminDSN, name)
	db, err := store.Open(ctx, dsn, store.Options{ReadOnly: opts.ReadOnly, MaxConns: opts.MaxConns, AcquireTimeout: opts.AcquireTimeout})
	if err != nil {
		t.Fatalf("testdb: open: %v", err)
	}
	t.Cleanup(func() {
		db.Close()
		if conn, err := pgx.Connect(ctx, shared.adminDSN); err == nil {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
			conn.Close(ctx)
		}
	})
	return &DB{DB: db, DSN: dsn, Name: name}
}

// AdminDSN is the maintenance connection of the test server (for tests that create databases).
func AdminDSN(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() { shared.err = shared.start() })
	if shared.err != nil {
		t.Fatalf("testdb: %v", shared.err)
	}
	return shared.adminDSN
}
