package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"idemwork/apperr"
	"idemwork/migrations"
)

// Options configures Open.
type Options struct {
	// ReadOnly makes every session read-only in the database (default_transaction_read_only)
	// and refuses write transactions up front with READ_ONLY.
	ReadOnly bool
	// MaxConns caps the pool; 0 keeps pgxpool's default (max(4, NumCPU)).
	MaxConns int32
	// Migrate applies pending migrations on connect (under goose's session lock). A read-only
	// database is never migrated; a pending migration there is reported as an error.
	Migrate bool
	// AcquireTimeout bounds the wait for a pooled connection of a transaction or a runner's key
	// read: past it the request fails with OVERLOADED (503, Retry-After). 0: no bound.
	AcquireTimeout time.Duration
	// ApplicationName names every session of the pool in pg_stat_activity, over whatever the
	// DSN says (a storm marks its own sessions so it can watch and wait for them); empty keeps
	// the DSN's application_name, else "idemwork".
	ApplicationName string
}

// DB is the one pool of a process, with a sqlx handle over the same pool for read models.
type DB struct {
	Pool           *pgxpool.Pool
	X              *sqlx.DB
	ReadOnly       bool
	sqlDB          *sql.DB
	acquireTimeout time.Duration
}

// Querier is what repositories need; both a pool and a transaction satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Open connects to dsn. The caller closes the DB.
func Open(ctx context.Context, dsn string, opts Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, apperr.Wrap(apperr.Usage, err, "the database URL is not valid: %s", RedactDSN(dsn))
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.ReadOnly {
		// Enforced by the server for every transaction of every session, whatever the caller does.
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	if opts.ApplicationName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = opts.ApplicationName
	} else if cfg.ConnConfig.RuntimeParams["application_name"] == "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = "idemwork"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", RedactDSN(dsn), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to %s: %w", RedactDSN(dsn), err)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	db := &DB{Pool: pool, X: sqlx.NewDb(sqlDB, "pgx"), ReadOnly: opts.ReadOnly, sqlDB: sqlDB, acquireTimeout: opts.AcquireTimeout}
	if opts.Migrate {
		if err := db.migrate(ctx); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}

func (db *DB) migrate(ctx context.Context) error {
	if db.ReadOnly {
		pending, err := migrations.Pending(ctx, db.sqlDB)
		if err != nil {
			return err
		}
		if pending {
			return errors.New("the database schema is older than this idemwork and the session is read-only: " +
				"run 'idemwork migrate --allow-writes' against it first")
		}
		return nil
	}
	_, err := migrations.Up(ctx, db.sqlDB)
	return err
}

// Acquire takes a pooled connection, waiting at most the acquire timeout: past it, OVERLOADED.
func (db *DB) Acquire(ctx context.Context) (*pgxpool.Conn, error) {
	if db.acquireTimeout <= 0 {
		return db.Pool.Acquire(ctx)
	}
	actx, cancel := context.WithTimeout(ctx, db.acquireTimeout)
	defer cancel()
	conn, err := db.Pool.Acquire(actx)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return nil, apperr.Wrap(apperr.Overloaded, err, "no database connection became free within %s (all %d of the pool are busy); retry shortly",
			db.acquireTimeout, db.Pool.Config().MaxConns)
	}
	return conn, err
}

// SQL returns the database/sql handle over the pool (for goose and sqlx).
func (db *DB) SQL() *sql.DB { return db.sqlDB }

// Close releases the pool.
func (db *DB) Close() {
	_ = db.sqlDB.Close()
	db.Pool.Close()
}

// RedactDSN hides a password in a DSN so it can appear in messages.
func RedactDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
		return dsn
	}
	if scheme, rest, ok := strings.Cut(dsn, "://"); ok {
		// A URL that does not parse may still carry user:password@: never echo the password.
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if user, _, hasPw := strings.Cut(rest[:at], ":"); hasPw {
				return scheme + "://" + user + ":xxxxx" + rest[at:]
			}
		}
		return dsn
	}
	if strings.Contains(dsn, "password=") {
		parts := strings.Fields(dsn)
		for i, p := range parts {
			if strings.HasPrefix(p, "password=") {
				parts[i] = "password=xxxxx"
			}
		}
		return strings.Join(parts, " ")
	}
	return dsn
}

// TranslateError maps database errors a user can cause to coded errors; anything else is
// returned unchanged (and becomes INTERNAL at the edge).
func TranslateError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "25006": // read_only_sql_transaction
			return apperr.Wrap(apperr.ReadOnly, err, "this session is read-only; reconnect with --allow-writes to write")
		}
	}
	return err
}

// EnsureDatabase creates database name through the admin connection adminDSN when missing.
func EnsureDatabase(ctx context.Context, adminDSN, name string) error {
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", RedactDSN(adminDSN), err)
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
