package idem

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/failedpgx"
)

// Querier runs statements: a pgx pool, connection or transaction satisfies it. A Replayer reads
// a key through one, a work function through the transaction it is given.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Driver is how a Runner reaches PostgreSQL, as riverdriver is River's: PoolDriver is the one
// over a pgx pool; a service whose connections follow a policy of its own (its per-transaction
// settings, its error codes) implements it over that policy. Nothing in a driver may depend on
// session state: behind a transaction pooler each transaction may meet another server session.
type Driver interface {
	// WithTx runs fn in a new transaction. tx has not begun when fn is called: its first
	// statement (the runner's first batch) carries BEGIN in the same round trip. A batch of fn's
	// may end with COMMIT itself (RunAhead's one round trip: BEGIN … COMMIT): when fn returns nil
	// with final empty and the connection already outside a transaction, there is nothing left
	// to commit. Otherwise, when fn returns nil, the driver sends the statements fn left in final, then COMMIT, in one round trip,
	// reading their results in order (running their callbacks); it reports a connection lost
	// after COMMIT was sent as COMMIT_UNKNOWN, never as a plain failure. When fn fails, or the
	// commit does, it rolls back. fn's statements run under the ctx it is given.
	WithTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx, final *pgx.Batch) error) error
	// WithConn runs fn on a connection outside any transaction (the read of a key the runner
	// expects to replay: one round trip, no transaction).
	WithConn(ctx context.Context, fn func(q Querier) error) error
	// MaxConns is the size of the driver's pool: a Runner's default per-owner share is half.
	MaxConns() int
	// Writable reports whether the driver can write now: when it cannot (a read-only session, a
	// hot standby), the runner reads a key alone before it would begin a transaction, so a
	// replay is still served.
	Writable() bool
}

// PoolDriver is the Driver over a pgx pool. Each transaction takes one of the pool's connections
// and BEGINs in the round trip of its first batch. Its statements are the runner's own, every
// one naming its schema (Options.Schema), and set nothing on the session, so the pool may sit
// behind a transaction-pooling pgbouncer (use an exec mode the pooler supports:
// pgx.QueryExecModeExec, or pgbouncer 1.21+ with max_prepared_statements).
func PoolDriver(pool *pgxpool.Pool) Driver { return poolDriver{pool} }

type poolDriver struct{ pool *pgxpool.Pool }

func (d poolDriver) MaxConns() int  { return int(d.pool.Config().MaxConns) }
func (d poolDriver) Writable() bool { return true }

func (d poolDriver) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, apperr.Wrap(apperr.DatabaseUnavailable, err, "could not get a database connection; retry in a moment")
	}
	return c, nil
}

func (d poolDriver) WithConn(ctx context.Context, fn func(q Querier) error) error {
	c, err := d.acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	return fn(c)
}

func (d poolDriver) WithTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx, final *pgx.Batch) error) error {
	c, err := d.acquire(ctx)
	if err != nil {
		return err
	}
	// Release closes a connection left inside a transaction rather than pool it.
	defer c.Release()
	tx := &lazyTx{conn: c}
	var final pgx.Batch
	if err := fn(ctx, tx, &final); err != nil {
		tx.abort(ctx)
		return err
	}
	if err := tx.commit(ctx, &final); err != nil {
		tx.abort(ctx)
		return err
	}
	return nil
}

// lazyTx is a transaction on one pooled connection whose BEGIN travels with its first batch.
type lazyTx struct {
	conn *pgxpool.Conn
	real pgx.Tx // set once BEGIN was sent
}

var _ pgx.Tx = (*lazyTx)(nil)

var errDriverEnds = errors.New("idem: the runner ends this transaction (commit or rollback is not the work's to do)")

func (t *lazyTx) begin(ctx context.Context) error {
	if t.real != nil {
		return nil
	}
	real, err := t.conn.Begin(ctx)
	if err != nil {
		return err
	}
	t.real = real
	return nil
}

// SendBatch sends b in the transaction, with BEGIN ahead of it in the same round trip when the
// transaction has not begun: what the caller reads from the results is b's alone.
func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.real != nil {
		return t.real.SendBatch(ctx, b)
	}
	var nb pgx.Batch
	nb.BeginTx(pgx.TxOptions{})
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	br := t.conn.SendBatch(ctx, &nb)
	t.real = br.Tx()
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return failedBatch{fmt.Errorf("begin: %w", err)}
	}
	return br
}

func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.begin(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.real.Exec(ctx, sql, args...)
}

func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.real.Query(ctx, sql, args...)
}

func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.begin(ctx); err != nil {
		return failedRow{err}
	}
	return t.real.QueryRow(ctx, sql, args...)
}

func (t *lazyTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.real.Begin(ctx)
}

func (t *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, err
	}
	return t.real.CopyFrom(ctx, table, cols, src)
}

func (t *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Conn().Prepare(ctx, name, sql)
}

// LargeObjects begins the transaction first if it has not begun (large objects live in one).
func (t *lazyTx) LargeObjects() pgx.LargeObjects {
	if t.real == nil {
		_ = t.begin(context.Background())
	}
	return t.real.LargeObjects()
}

func (t *lazyTx) Conn() *pgx.Conn                { return t.conn.Conn() }
func (t *lazyTx) Commit(context.Context) error   { return errDriverEnds }
func (t *lazyTx) Rollback(context.Context) error { return errDriverEnds }

// commit sends final's statements and COMMIT in one round trip (BEGIN first when nothing was
// sent before; nothing at all when nothing was sent or queued).
func (t *lazyTx) commit(ctx context.Context, final *pgx.Batch) error {
	if final.Len() == 0 && (t.real == nil || t.conn.Conn().PgConn().TxStatus() == 'I') {
		// Nothing sent, or fn's last round trip carried COMMIT itself (RunAhead's one round trip).
		return nil
	}
	var nb pgx.Batch
	if t.real == nil {
		nb.BeginTx(pgx.TxOptions{})
	}
	nb.QueuedQueries = append(nb.QueuedQueries, final.QueuedQueries...)
	QueueCommit(&nb)
	err := t.conn.SendBatch(ctx, &nb).Close()
	return CommitError(err)
}

// abort ends a transaction an error left open (with a fresh context: a cancelled request must
// still release its locks); a connection that cannot is closed, and the pool drops it.
func (t *lazyTx) abort(ctx context.Context) {
	pc := t.conn.Conn().PgConn()
	if pc.IsClosed() || pc.TxStatus() == 'I' {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if _, err := pc.Exec(ctx, "rollback").ReadAll(); err != nil {
		_ = pc.Close(ctx)
	}
}

// endsSession reports whether a server error ended the session (FATAL, PANIC).
func endsSession(e *pgconn.PgError) bool {
	sev := e.SeverityUnlocalized
	if sev == "" {
		sev = e.Severity
	}
	return sev == "FATAL" || sev == "PANIC"
}

// QueueCommit queues COMMIT at the end of b, its result checked: a transaction the server had
// already failed answers COMMIT with ROLLBACK, which is reported as pgx.ErrTxCommitRollback. A
// Driver sends it behind the statements a call left in final.
func QueueCommit(b *pgx.Batch) {
	b.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() != "COMMIT" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	})
}

// CommitError tells a failed round trip that carried COMMIT that the server answered (it rolled
// back, and the error says why) from one whose answer never arrived: the connection died with
// COMMIT sent, so the transaction may have committed. That is COMMIT_UNKNOWN, never a plain
// failure: only a retry with the same key can tell. nil stays nil. The round trip's results are
// read together, so any error in it is judged as standing where COMMIT's answer was due.
func CommitError(err error) error { return commitError(err, true) }

// commitError is CommitError for a round trip that carried COMMIT behind other statements:
// atCommit says err stands where COMMIT's own answer was due (see CommitAnswered); an error
// answered for a statement ahead of it means the server never reached COMMIT.
func commitError(err error, atCommit bool) error {
	if err == nil || CommitAnswered(err, atCommit) {
		return err
	}
	return apperr.Wrap(apperr.CommitUnknown, err, "the connection to the database was lost while the write was committing, so it may or may not have "+
		"committed; retry with the same Idempotency-Key to learn the outcome (the retry replays the first result if it committed and runs it once if it did not)")
}

// CommitAnswered reports whether err, the failure of a round trip that carried COMMIT, says for
// certain that the transaction did not commit: a refusal made before sending, a round trip that
// never left, the server's ROLLBACK for a failed transaction, or an ERROR the server answered.
// atCommit says err stands where COMMIT's own answer was due: there a FATAL (an administrator's
// pg_terminate_backend, a shutdown) may come after the commit was made durable, so it answers
// nothing; before it, a FATAL means the server never reached COMMIT. A lost connection answers
// nothing either way. A Driver of a service's own judges its COMMIT with it, as PoolDriver does.
func CommitAnswered(err error, atCommit bool) bool {
	var pgErr *pgconn.PgError
	var coded *apperr.Error
	var unsent pgx.ErrPreprocessingBatch
	switch {
	case errors.As(err, &coded), errors.Is(err, pgx.ErrTxCommitRollback):
		return true
	case errors.As(err, &unsent), pgconn.SafeToRetry(err):
		return true
	case errors.As(err, &pgErr):
		return !atCommit || !endsSession(pgErr)
	}
	return false
}

type failedRow struct{ err error }

func (r failedRow) Scan(...any) error { return r.err }

// failedBatch is the results of a batch that never reached the server: every read fails.
type failedBatch struct{ err error }

func (b failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b failedBatch) Query() (pgx.Rows, error)         { return failedpgx.Rows(b.err), b.err }
func (b failedBatch) QueryRow() pgx.Row                { return failedRow(b) }
func (b failedBatch) Close() error                     { return b.err }
func (b failedBatch) Tx() pgx.Tx                       { return nil }
