package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemwork/idemwork/apperr"
)

// acquire takes a pooled connection, waiting at most the acquire timeout: past it, OVERLOADED.
func (db *DB) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	if db.acquireTimeout <= 0 {
		return db.pool.Acquire(ctx)
	}
	actx, cancel := context.WithTimeout(ctx, db.acquireTimeout)
	defer cancel()
	conn, err := db.pool.Acquire(actx)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return nil, apperr.Wrap(apperr.Overloaded, err, "no database connection became free within %s (all %d of the pool are busy); retry shortly",
			db.acquireTimeout, db.MaxConns())
	}
	return conn, err
}

// Conn is one pooled connection taken within the acquire timeout (OVERLOADED past it), for a
// caller that runs a few statements in a row on it (the runner's success-cache read). Its
// statements follow the session's rules exactly as Q's do: each inside a transaction of its own
// that sets the session's settings (READ ONLY on a read-only session).
type Conn struct {
	db *DB
	c  *pgxpool.Conn
}

var _ Querier = (*Conn)(nil)

// Acquire takes a connection within the acquire timeout; the caller releases it.
func (db *DB) Acquire(ctx context.Context) (*Conn, error) {
	c, err := db.acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &Conn{db: db, c: c}, nil
}

// Release gives the connection back to the pool.
func (c *Conn) Release() { c.c.Release() }

func (c *Conn) q() Querier { return singleTx{db: c.db, conn: c.c} }

func (c *Conn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return c.q().Exec(ctx, sql, args...)
}

func (c *Conn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return c.q().Query(ctx, sql, args...)
}

func (c *Conn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return c.q().QueryRow(ctx, sql, args...)
}

func (c *Conn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return c.q().SendBatch(ctx, b)
}

// Ping checks that the database answers (for /readyz); why not is coded and worded as Open's
// failure to connect would be (nothing listening, a host name that does not resolve, …).
func (db *DB) Ping(ctx context.Context) error {
	err := db.pool.Ping(ctx)
	if err == nil {
		return nil
	}
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) && ctx.Err() == nil {
		// An idle connection the server (or the network) had dropped: the pool throws it away,
		// and a new one says whether the database answers now, and if not why.
		if err = db.pool.Ping(ctx); err == nil {
			return nil
		}
	}
	if errors.As(err, &ce) {
		return TranslateError(connectError(db.dsn, err))
	}
	return TranslateError(err)
}

// Stat is the pool's statistics (for /metrics).
func (db *DB) Stat() *pgxpool.Stat { return db.pool.Stat() }

// SendBatchAsIs sends b on a connection of the pool exactly as it is, outside any transaction
// of store's: b begins and ends its own, and sets what its transaction needs itself (TxSettings).
// It is for a caller that measures what the runner's statements cost on the wire (the bench's
// limit side); everything else goes through Q.
func (db *DB) SendBatchAsIs(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return db.pool.SendBatch(ctx, b)
}

// AcquireAsIs is a connection of the pool on which statements go exactly as they are (see
// SendBatchAsIs), for a caller whose transaction spans more than one batch; Release it.
func (db *DB) AcquireAsIs(ctx context.Context) (*pgxpool.Conn, error) { return db.pool.Acquire(ctx) }

// QueryRowAsIs runs one statement on a connection of the pool exactly as it is, autocommit,
// outside any transaction of store's (see SendBatchAsIs).
func (db *DB) QueryRowAsIs(ctx context.Context, sql string, args ...any) pgx.Row {
	return db.pool.QueryRow(ctx, sql, args...)
}

// TxSettings is the statement every transaction of this session sends after BEGIN, and its
// arguments (settings.go).
func (db *DB) TxSettings() (sql string, args []any) {
	return db.settings.sql, append([]any(nil), db.settings.args...)
}
