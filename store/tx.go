package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"idemwork/apperr"
)

// ambientKey is the context key of the ambient transaction. The value records which DB began
// it, so a context carrying one pool's transaction never routes another pool's statements.
type ambientKey struct{}

// deferKey marks a context whose repository writes may be queued (see DeferWrites).
type deferKey struct{}

// ambient is a transaction on one pooled connection. It starts lazily: BEGIN travels in the
// same round trip as the first statement. Writes queued under DeferWrites travel together with
// the next statement, or with the COMMIT. Statements always reach the server in the order they
// were issued; a queued write's error surfaces at the next flush, and fails the transaction.
type ambient struct {
	db      *DB
	conn    *pgxpool.Conn
	begun   bool // BEGIN has been sent
	pending []queued
}

// queued is a write waiting for the next round trip.
type queued struct {
	sql  string
	args []any
	// what prefixes the error of the statement ("insert record").
	what string
	// guard, when set, is returned if the statement fails with division_by_zero: the statement
	// is written to divide by its own row count, so the server fails it (and with it the
	// transaction, before any COMMIT queued behind it) when the expected row is not there.
	guard error
}

var _ Querier = (*ambient)(nil)

// InTx reports whether ctx already carries an ambient transaction. It is a property of the
// context chain, never a global flag: a sibling context is unaffected.
func InTx(ctx context.Context) bool {
	_, ok := ctx.Value(ambientKey{}).(*ambient)
	return ok
}

// DeferWrites returns a context under which the repositories' writes (Insert*, the guarded
// record update) may be queued in the ambient transaction and sent together with the next
// statement or the COMMIT, in the order they were issued. Use it only where nothing between a
// write and the end of the transaction depends on that write having reached the server; an error
// of a queued write fails the transaction when it is sent.
func DeferWrites(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferKey{}, true)
}

// Q returns where a statement for ctx goes: the ambient transaction of this DB when ctx
// carries one; otherwise the pool, or, on a read-only session or behind a transaction pooler, a
// transaction of the statement's own in the same round trip (see singleTx).
func (db *DB) Q(ctx context.Context) Querier {
	if a, ok := ctx.Value(ambientKey{}).(*ambient); ok && a.db == db {
		return a
	}
	if db.wrap {
		return singleTx{db: db}
	}
	return db.pool
}

// exec runs a repository write: queued when ctx defers writes inside this DB's ambient
// transaction, else at once. guard is the error for a guarded statement that found no row.
func (db *DB) exec(ctx context.Context, what string, guard error, sql string, args ...any) error {
	if a, ok := ctx.Value(ambientKey{}).(*ambient); ok && a.db == db {
		if d, _ := ctx.Value(deferKey{}).(bool); d {
			a.pending = append(a.pending, queued{sql: sql, args: args, what: what, guard: guard})
			return nil
		}
	}
	_, err := db.Q(ctx).Exec(ctx, sql, args...)
	return stmtError(what, guard, err)
}

// ExecWrite runs one write in ctx's transaction the way the repositories do: queued under
// DeferWrites, else at once. guard, when set, is returned if the statement fails with
// division_by_zero (a statement written as "WITH u AS (… RETURNING 1) SELECT 1 / count(*) FROM u"
// fails that way when no row matched). what prefixes other errors.
func (db *DB) ExecWrite(ctx context.Context, what string, guard error, sql string, args ...any) error {
	return db.exec(ctx, what, guard, sql, args...)
}

func stmtError(what string, guard error, err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if guard != nil && errors.As(err, &pgErr) && pgErr.Code == "22012" {
		return guard
	}
	if what == "" {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// prefix is what must precede the next statement: BEGIN if not sent yet, then queued writes.
func (a *ambient) hasPrefix() bool { return !a.begun || len(a.pending) > 0 }

// queuePrefix puts BEGIN (with its transaction-local settings) and the queued writes into b,
// marks them sent and returns how many results BEGIN takes (0 when it was sent before).
func (a *ambient) queuePrefix(b *pgx.Batch) (int, []queued) {
	began := 0
	if !a.begun {
		began = a.db.queueBegin(b, false)
		a.begun = true
	}
	p := a.pending
	a.pending = nil
	for _, q := range p {
		b.Queue(q.sql, q.args...)
	}
	return began, p
}

// readPrefix reads the results of what queuePrefix queued, in order.
func readPrefix(br pgx.BatchResults, began int, p []queued) error {
	for range began {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
	}
	for _, q := range p {
		if _, err := br.Exec(); err != nil {
			return stmtError(q.what, q.guard, err)
		}
	}
	return nil
}

// flush sends BEGIN (if not yet sent) and the queued writes in one round trip.
func (a *ambient) flush(ctx context.Context) error {
	if !a.hasPrefix() {
		return nil
	}
	var b pgx.Batch
	began, p := a.queuePrefix(&b)
	br := a.conn.SendBatch(ctx, &b)
	err := readPrefix(br, began, p)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// Exec runs sql in the transaction, sending what is queued before it in the same round trip.
func (a *ambient) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if !a.hasPrefix() {
		return a.conn.Exec(ctx, sql, args...)
	}
	var b pgx.Batch
	began, p := a.queuePrefix(&b)
	b.Queue(sql, args...)
	br := a.conn.SendBatch(ctx, &b)
	err := readPrefix(br, began, p)
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// QueryRow runs sql in the transaction, sending what is queued before it in the same round trip.
func (a *ambient) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if !a.hasPrefix() {
		return a.conn.QueryRow(ctx, sql, args...)
	}
	var b pgx.Batch
	began, p := a.queuePrefix(&b)
	b.Queue(sql, args...)
	br := a.conn.SendBatch(ctx, &b)
	if err := readPrefix(br, began, p); err != nil {
		_ = br.Close()
		return errRow{err}
	}
	return &batchRow{br: br, row: br.QueryRow()}
}

// Query runs sql in the transaction after sending what is queued.
func (a *ambient) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := a.flush(ctx); err != nil {
		return nil, err
	}
	return a.conn.Query(ctx, sql, args...)
}

// SendBatch sends b in the transaction after what is queued.
func (a *ambient) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := a.flush(ctx); err != nil {
		return errBatch{err}
	}
	return a.conn.SendBatch(ctx, b)
}

// commit sends what is queued and COMMIT in one round trip. Nothing sent, nothing to commit.
func (a *ambient) commit(ctx context.Context) error {
	if !a.begun && len(a.pending) == 0 {
		return nil
	}
	var b pgx.Batch
	began, p := a.queuePrefix(&b)
	b.Queue("commit")
	br := a.conn.SendBatch(ctx, &b)
	err := readPrefix(br, began, p)
	if err == nil {
		var tag pgconn.CommandTag
		tag, err = br.Exec()
		if err == nil && tag.String() != "COMMIT" {
			err = pgx.ErrTxCommitRollback
		}
		if err != nil {
			err = fmt.Errorf("commit: %w", err)
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("commit: %w", cerr)
	}
	return commitOutcome(err)
}

// commitOutcome tells a failed commit round trip that the server answered (it rolled back, and
// the error says why) from one whose answer never arrived: the connection died with COMMIT
// sent, so the transaction may have committed. That is COMMIT_UNKNOWN, never a plain failure:
// the write must not be reported as not done, and only a retry with the same key can tell.
func commitOutcome(err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	var coded *apperr.Error
	if errors.As(err, &pgErr) || errors.As(err, &coded) || errors.Is(err, pgx.ErrTxCommitRollback) || pgconn.SafeToRetry(err) {
		// The server answered, or nothing reached it: the transaction did not commit.
		return err
	}
	return apperr.Wrap(apperr.CommitUnknown, err, "the connection to the database was lost while the write was committing, so it may or may not have "+
		"committed; retry with the same Idempotency-Key to learn the outcome (the retry replays the first result if it committed and runs it "+
		"once if it did not); a write sent without a key cannot tell: look at the record's history before sending it again")
}

// rollback ends the transaction if BEGIN reached the server; queued writes are dropped unsent.
func (a *ambient) rollback(ctx context.Context) {
	a.pending = nil
	if a.begun && !a.conn.Conn().PgConn().IsClosed() {
		_, _ = a.conn.Exec(ctx, "rollback")
	}
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// batchRow is the last result of a batch: scanning it also closes the batch.
type batchRow struct {
	br  pgx.BatchResults
	row pgx.Row
}

func (r *batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }

// Tx satisfies pgx.BatchResults; a batch that never reached the server has no transaction.
func (b errBatch) Tx() pgx.Tx { return nil }

// Tx runs fn in a write transaction carried by the context fn receives. A nested call joins the
// ambient transaction (same connection, same transaction); only the outermost call commits, and
// any error from fn rolls the whole transaction back.
func (db *DB) Tx(ctx context.Context, fn func(ctx context.Context) error) error {
	if a, ok := ctx.Value(ambientKey{}).(*ambient); ok && a.db == db {
		return fn(ctx)
	}
	if err := db.WriteRefusal(); err != nil {
		return err
	}
	conn, err := db.acquire(ctx)
	if err != nil {
		if apperr.Is(err, apperr.Overloaded) {
			return err
		}
		return fmt.Errorf("begin: %w", err)
	}
	// Release returns the connection to the pool only when it is idle outside a transaction;
	// one left inside a transaction (a failed rollback) is closed instead.
	defer conn.Release()
	a := &ambient{db: db, conn: conn}
	txCtx := context.WithValue(ctx, ambientKey{}, a)
	if err := fn(txCtx); err != nil {
		// The rollback uses a fresh context: a cancelled request must still release its locks.
		a.rollback(context.WithoutCancel(ctx))
		return db.translate(err)
	}
	if err := a.commit(ctx); err != nil {
		a.rollback(context.WithoutCancel(ctx))
		return db.translate(err)
	}
	return nil
}

// Savepoint runs fn under a named savepoint of the ambient transaction, so a step that must
// survive its own error rolls back only itself. It requires an ambient transaction.
func (db *DB) Savepoint(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	a, ok := ctx.Value(ambientKey{}).(*ambient)
	if !ok || a.db != db {
		return errors.New("store: Savepoint needs an ambient transaction")
	}
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := a.Exec(ctx, "SAVEPOINT "+ident); err != nil {
		return err
	}
	// Writes fn queues belong inside the savepoint: send them before deciding its fate.
	err := fn(ctx)
	if err == nil {
		err = a.flush(ctx)
	}
	if err != nil {
		a.pending = nil
		if _, rbErr := a.Exec(ctx, "ROLLBACK TO SAVEPOINT "+ident); rbErr != nil {
			return errors.Join(err, rbErr)
		}
		return err
	}
	_, err = a.Exec(ctx, "RELEASE SAVEPOINT "+ident)
	return err
}
