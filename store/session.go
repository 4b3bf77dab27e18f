package store

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/failedpgx"
)

// singleTx is where a statement outside any transaction goes: never bare onto a pooled
// connection, whose session may carry what another client of a pooler left there, but inside a
// transaction of its own that sets what idemwork depends on (BEGIN's access mode and isolation,
// then the session's settings: see settings.go). On a read-only session that transaction is READ
// ONLY, so the server itself refuses a write whatever the pooler does with sessions. BEGIN, the
// settings, the statement and COMMIT travel as one pipelined batch: one round trip, as the bare
// statement would take. (An exec mode that describes statements before sending them sends BEGIN
// and COMMIT in round trips of their own: see beginApart.)
type singleTx struct {
	db *DB
	// conn, when set, is a connection the caller holds (Conn); else each statement takes one.
	conn *pgxpool.Conn
}

var _ Querier = singleTx{}

// open acquires a connection (or uses the caller's) and sends BEGIN, the settings, the queued
// statements and COMMIT; it reads the BEGIN prefix and leaves the rest to the caller. mayWrite
// says whether the statements may write (see mayWrite): a lost COMMIT then leaves the outcome
// unknown.
func (s singleTx) open(ctx context.Context, mayWrite bool, queue func(b *pgx.Batch)) (*singleRun, error) {
	conn, own := s.conn, false
	if conn == nil {
		c, err := s.db.acquire(ctx)
		if err != nil {
			return nil, err
		}
		conn, own = c, true
	}
	begin := s.db.beginFor(false)
	run := &singleRun{db: s.db, ctx: ctx, conn: conn, own: own, apart: s.db.beginApart,
		mayWrite: mayWrite && begin == beginReadWrite}
	var b pgx.Batch
	n := 0
	if run.apart {
		if err := s.db.sendBegin(ctx, conn, begin); err != nil {
			return nil, run.finish(err)
		}
	} else {
		n = s.db.queueBegin(&b, begin)
	}
	queue(&b)
	if !run.apart {
		b.Queue("commit")
	}
	run.br = conn.SendBatch(ctx, &b)
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
	// apart: COMMIT is not in br; finish sends it (beginApart).
	apart bool
	// mayWrite: a lost COMMIT is COMMIT_UNKNOWN (else the transaction wrote nothing).
	mayWrite bool
	done     bool
	err      error
}

// finish reads what is left (the COMMIT), ends a transaction an error left open and releases
// the connection it took. It returns err (the statement's), else the first error of the rest,
// translated; a COMMIT sent whose answer never came is COMMIT_UNKNOWN for a statement that may
// have written.
func (r *singleRun) finish(err error) error {
	if r.done {
		if err == nil {
			err = r.err
		}
		return err
	}
	r.done = true
	stmtErr := err
	if r.br != nil {
		// The rest of the batch: COMMIT's answer among it, unless COMMIT goes apart.
		if cerr := r.br.Close(); err == nil {
			err = cerr
		}
	}
	pc := r.conn.Conn().PgConn()
	switch {
	case r.apart && err == nil:
		tag, cerr := r.conn.Exec(r.ctx, "commit")
		err = commitResult(tag, cerr)
	case !r.apart && r.br != nil && r.mayWrite:
		// An error after the statement's own answer stands where COMMIT's was due.
		err = commitOutcome(err, stmtErr == nil && err != nil)
	}
	if err != nil && !r.mayWrite && apperr.Is(err, apperr.CommitUnknown) {
		// A transaction that wrote nothing has nothing to lose with its COMMIT.
		err = errors.Unwrap(err)
	}
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

// mayWrite reports whether sql may write: anything but a plain read (SELECT, VALUES, TABLE,
// SHOW). A WITH may hold a data-modifying statement, so it counts as a write.
func mayWrite(sql string) bool {
	s := strings.TrimLeft(sql, " \t\r\n(")
	end := strings.IndexAny(s, " \t\r\n(")
	if end < 0 {
		end = len(s)
	}
	switch strings.ToLower(s[:end]) {
	case "select", "values", "table", "show":
		return false
	}
	return true
}

func (s singleTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	run, err := s.open(ctx, mayWrite(sql), func(b *pgx.Batch) { b.Queue(sql, args...) })
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := run.br.Exec()
	return tag, run.finish(err)
}

func (s singleTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	run, err := s.open(ctx, mayWrite(sql), func(b *pgx.Batch) { b.Queue(sql, args...) })
	if err != nil {
		return errRow{err}
	}
	return &singleRow{run: run, row: run.br.QueryRow()}
}

func (s singleTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	run, err := s.open(ctx, mayWrite(sql), func(b *pgx.Batch) { b.Queue(sql, args...) })
	if err != nil {
		return failedpgx.Rows(err), err
	}
	rows, err := run.br.Query()
	if err != nil {
		rows.Close()
		err = run.finish(err)
		return failedpgx.Rows(err), err
	}
	return &singleRows{Rows: rows, run: run}, nil
}

func (s singleTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	writes := false
	for _, q := range b.QueuedQueries {
		writes = writes || mayWrite(q.SQL)
	}
	run, err := s.open(ctx, writes, func(nb *pgx.Batch) { nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...) })
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
