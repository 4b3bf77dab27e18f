package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// singleTx is where a statement outside any transaction goes when the session must not let one
// reach the server bare: a read-only session (every statement runs inside BEGIN READ ONLY, so the
// server itself refuses a write, whatever the pooler does with sessions), or a transaction pooler
// (every statement inside BEGIN … COMMIT, so a statement's parts and its transaction-local
// settings meet one server connection). BEGIN, the transaction-local settings, the statement and
// COMMIT travel as one pipelined batch: one round trip, as the bare statement would take.
type singleTx struct {
	db *DB
	// conn, when set, is a connection the caller holds (Conn); else each statement takes one.
	conn *pgxpool.Conn
}

var _ Querier = singleTx{}

// open acquires a connection (or uses the caller's) and sends BEGIN, the settings, the queued
// statements and COMMIT; it reads the BEGIN prefix and leaves the rest to the caller.
func (s singleTx) open(ctx context.Context, queue func(b *pgx.Batch)) (*singleRun, error) {
	conn, own := s.conn, false
	if conn == nil {
		c, err := s.db.acquire(ctx)
		if err != nil {
			return nil, err
		}
		conn, own = c, true
	}
	var b pgx.Batch
	n := s.db.queueBegin(&b, s.db.ReadOnly)
	queue(&b)
	b.Queue("commit")
	run := &singleRun{db: s.db, ctx: ctx, conn: conn, own: own, br: conn.SendBatch(ctx, &b)}
	for range n {
		if _, err := run.br.Exec(); err != nil {
			return nil, run.finish(err)
		}
	}
	return run, nil
}

// singleRun is one statement's transaction in flight.
type singleRun struct {
	db   *DB
	ctx  context.Context
	conn *pgxpool.Conn
	own  bool // release conn when done
	br   pgx.BatchResults
	done bool
	err  error
}

// finish reads what is left (the COMMIT), ends a transaction an error left open and releases
// the connection it took. It returns err, else the first error of the rest, translated.
func (r *singleRun) finish(err error) error {
	if r.done {
		if err == nil {
			err = r.err
		}
		return err
	}
	r.done = true
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	pc := r.conn.Conn().PgConn()
	if !pc.IsClosed() && pc.TxStatus() != 'I' {
		// A failed statement leaves the transaction aborted: end it here rather than make the
		// pool throw the connection away (through pgbouncer that would drop a server link too).
		if _, rerr := r.conn.Exec(context.WithoutCancel(r.ctx), "rollback"); rerr != nil {
			_ = pc.Close(context.WithoutCancel(r.ctx))
		}
	}
	if r.own {
		r.conn.Release()
	}
	r.err = r.db.translate(err)
	return r.err
}

func (s singleTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	run, err := s.open(ctx, func(b *pgx.Batch) { b.Queue(sql, args...) })
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := run.br.Exec()
	return tag, run.finish(err)
}

func (s singleTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	run, err := s.open(ctx, func(b *pgx.Batch) { b.Queue(sql, args...) })
	if err != nil {
		return errRow{err}
	}
	return &singleRow{run: run, row: run.br.QueryRow()}
}

func (s singleTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	run, err := s.open(ctx, func(b *pgx.Batch) { b.Queue(sql, args...) })
	if err != nil {
		return nil, err
	}
	rows, err := run.br.Query()
	if err != nil {
		rows.Close()
		return nil, run.finish(err)
	}
	return &singleRows{Rows: rows, run: run}, nil
}

func (s singleTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	run, err := s.open(ctx, func(nb *pgx.Batch) { nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...) })
	if err != nil {
		return errBatch{err}
	}
	return &singleBatch{run: run}
}

// singleRow scans the statement's row, then finishes its transaction.
type singleRow struct {
	run *singleRun
	row pgx.Row
}

func (r *singleRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		if ferr := r.run.finish(nil); ferr != nil {
			return ferr
		}
		return err
	}
	return r.run.finish(err)
}

// singleRows is the statement's rows; the transaction finishes when they are read or closed.
type singleRows struct {
	pgx.Rows
	run *singleRun
}

func (r *singleRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.end()
	return false
}

func (r *singleRows) Close() {
	r.Rows.Close()
	r.end()
}

func (r *singleRows) end() {
	if !r.run.done {
		_ = r.run.finish(r.Rows.Err())
	}
}

func (r *singleRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return r.run.db.translate(err)
	}
	if r.run.done {
		return r.run.err
	}
	return nil
}

// singleBatch hands out a caller's batch results between BEGIN and COMMIT.
type singleBatch struct{ run *singleRun }

func (b *singleBatch) Exec() (pgconn.CommandTag, error) { return b.run.br.Exec() }
func (b *singleBatch) Query() (pgx.Rows, error)         { return b.run.br.Query() }
func (b *singleBatch) QueryRow() pgx.Row                { return b.run.br.QueryRow() }
func (b *singleBatch) Close() error                     { return b.run.finish(nil) }

// Tx satisfies pgx.BatchResults; the transaction is store's, never the caller's.
func (b *singleBatch) Tx() pgx.Tx { return nil }
