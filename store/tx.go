package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/failedpgx"
)

// ambientKey is the context key of the ambient transaction. The value records which DB began
// it, so a context carrying one pool's transaction never routes another pool's statements.
type ambientKey struct{}

// ambient is a transaction on one pooled connection. It starts lazily: BEGIN travels in the
// same round trip as the first statement, or with the batch and COMMIT that end it. Statements
// reach the server in the order they were issued.
type ambient struct {
	db    *DB
	conn  *pgxpool.Conn
	begun bool // BEGIN has been sent
}

var _ Querier = (*ambient)(nil)

// InTx reports whether ctx already carries an ambient transaction. It is a property of the
// context chain, never a global flag: a sibling context is unaffected.
func InTx(ctx context.Context) bool {
	_, ok := ctx.Value(ambientKey{}).(*ambient)
	return ok
}

// Q returns where a statement for ctx goes: the ambient transaction of this DB when ctx
// carries one; otherwise a transaction of the statement's own, begun with this session's
// settings and committed in the same round trip (see singleTx) — never the bare pool, whose
// server connection may carry another client's settings.
func (db *DB) Q(ctx context.Context) Querier {
	if a, ok := ctx.Value(ambientKey{}).(*ambient); ok && a.db == db {
		return a
	}
	return singleTx{db: db}
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

// roundTripBatch is the pgx batch of one round trip, with room for BEGIN and its settings and
// then n statements, whose queued entries it takes from one allocation instead of one each.
type roundTripBatch struct {
	pgx.Batch
	qs []pgx.QueuedQuery
}

// maxBegin is how many statements queueBegin queues.
const maxBegin = beginResults

func newRoundTripBatch(n int) *roundTripBatch {
	return &roundTripBatch{Batch: pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, maxBegin+n)}, qs: make([]pgx.QueuedQuery, 0, n)}
}

// add queues sql with args (kept as they are).
func (pb *roundTripBatch) add(sql string, args []any) {
	if len(pb.qs) == cap(pb.qs) {
		pb.Queue(sql, args...)
		return
	}
	pb.qs = append(pb.qs, pgx.QueuedQuery{SQL: sql, Arguments: args})
	pb.QueuedQueries = append(pb.QueuedQueries, &pb.qs[len(pb.qs)-1])
}

// queueWrites puts BEGIN and the transaction's settings first if they were not sent yet, then
// the batch's writes into pb, marks BEGIN sent, and returns how many results BEGIN takes. When
// the exec mode describes statements in a round trip of their own (beginApart), BEGIN was sent
// alone before (a.begin) and takes none here.
func (a *ambient) queueWrites(pb *roundTripBatch, b *Batch) int {
	began := 0
	if !a.begun {
		began = a.db.queueBegin(&pb.Batch, beginReadWrite)
		a.begun = true
	}
	if b != nil {
		for _, w := range b.writes {
			pb.add(w.sql, w.args)
		}
	}
	return began
}

// writes is how many statements b queues (b may be nil).
func writes(b *Batch) int {
	if b == nil {
		return 0
	}
	return len(b.writes)
}

// readWrites reads the results of what queueWrites queued, in order: a write's failure is its
// step's.
func readWrites(br pgx.BatchResults, began int, b *Batch) error {
	for range began {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
	}
	if b == nil {
		return nil
	}
	for _, w := range b.writes {
		if _, err := br.Exec(); err != nil {
			return &idem.StepError{Step: w.step, Err: stmtError(w.what, w.guard, err)}
		}
	}
	return nil
}

// begin sends BEGIN and the transaction's settings alone when they have not been sent: before a
// statement that cannot share their round trip, and, in an exec mode that describes statements
// before sending them, before anything else (see beginApart).
func (a *ambient) begin(ctx context.Context) error {
	if a.begun {
		return nil
	}
	a.begun = true
	return a.db.sendBegin(ctx, a.conn, beginReadWrite)
}

// apart sends BEGIN on its own first when the exec mode needs it (beginApart).
func (a *ambient) apart(ctx context.Context) error {
	if a.db.beginApart && !a.begun {
		return a.begin(ctx)
	}
	return nil
}

// send sends b's writes in one round trip (with BEGIN first when it was not sent yet); an empty
// batch sends nothing.
func (a *ambient) send(ctx context.Context, b *Batch) error {
	if b.err != nil {
		return b.err
	}
	if len(b.writes) == 0 {
		return nil
	}
	return a.roundTrip(ctx, b)
}

// roundTrip sends BEGIN (if not yet sent) and b's writes (b may be nil) as one batch.
func (a *ambient) roundTrip(ctx context.Context, b *Batch) error {
	if err := a.apart(ctx); err != nil {
		return err
	}
	if a.begun && writes(b) == 0 {
		return nil
	}
	pb := newRoundTripBatch(writes(b))
	began := a.queueWrites(pb, b)
	br := a.conn.SendBatch(ctx, &pb.Batch)
	err := readWrites(br, began, b)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// Exec runs sql in the transaction, with BEGIN in the same round trip if it was not sent yet.
func (a *ambient) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := a.apart(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	if a.begun {
		return a.conn.Exec(ctx, sql, args...)
	}
	pb := newRoundTripBatch(1)
	began := a.queueWrites(pb, nil)
	pb.add(sql, args)
	br := a.conn.SendBatch(ctx, &pb.Batch)
	err := readWrites(br, began, nil)
	var tag pgconn.CommandTag
	if err == nil {
		tag, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// QueryRow runs sql in the transaction, with BEGIN in the same round trip if it was not sent yet.
func (a *ambient) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := a.apart(ctx); err != nil {
		return errRow{err}
	}
	if a.begun {
		return a.conn.QueryRow(ctx, sql, args...)
	}
	pb := newRoundTripBatch(1)
	began := a.queueWrites(pb, nil)
	pb.add(sql, args)
	br := a.conn.SendBatch(ctx, &pb.Batch)
	if err := readWrites(br, began, nil); err != nil {
		_ = br.Close()
		return errRow{err}
	}
	return &batchRow{br: br, row: br.QueryRow()}
}

// Query runs sql in the transaction after BEGIN.
func (a *ambient) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := a.begin(ctx); err != nil {
		return failedpgx.Rows(err), err
	}
	return a.conn.Query(ctx, sql, args...)
}

// SendBatch sends b in the transaction, with BEGIN first in the same round trip if it was not
// sent yet: what the caller reads from the results is b's alone.
func (a *ambient) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := a.apart(ctx); err != nil {
		return errBatch{err}
	}
	if a.begun {
		return a.conn.SendBatch(ctx, b)
	}
	pb := pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, maxBegin+len(b.QueuedQueries))}
	began := a.db.queueBegin(&pb, beginReadWrite)
	a.begun = true
	pb.QueuedQueries = append(pb.QueuedQueries, b.QueuedQueries...)
	br := a.conn.SendBatch(ctx, &pb)
	if err := readWrites(br, began, nil); err != nil {
		_ = br.Close()
		return errBatch{err}
	}
	return br
}

// commit sends b's writes and COMMIT in one round trip (with BEGIN first when nothing was sent
// before). Nothing sent and nothing queued: nothing to commit. In an exec mode that describes
// statements before sending them (beginApart), the writes go first and COMMIT alone after them,
// so that when COMMIT leaves is known exactly.
func (a *ambient) commit(ctx context.Context, b *Batch) error {
	if b.err != nil {
		return b.err
	}
	if !a.begun && len(b.writes) == 0 {
		return nil
	}
	if a.db.beginApart {
		if err := a.roundTrip(ctx, b); err != nil {
			// COMMIT was not sent: the transaction cannot have committed.
			return err
		}
		tag, err := a.conn.Exec(ctx, "commit")
		return commitResult(tag, err)
	}
	pb := newRoundTripBatch(len(b.writes) + 1)
	began := a.queueWrites(pb, b)
	pb.add("commit", nil)
	br := a.conn.SendBatch(ctx, &pb.Batch)
	if err := readWrites(br, began, b); err != nil {
		_ = br.Close()
		return commitOutcome(err, false)
	}
	tag, err := br.Exec()
	// The COMMIT tag is the answer: an error draining the batch after it changes nothing.
	_ = br.Close()
	return commitResult(tag, err)
}

// commitResult is the outcome of COMMIT's own answer: its tag, or the error read in its place.
func commitResult(tag pgconn.CommandTag, err error) error {
	if err != nil {
		return commitOutcome(fmt.Errorf("commit: %w", err), true)
	}
	if tag.String() != "COMMIT" {
		// ROLLBACK: the transaction had failed; the server said so.
		return fmt.Errorf("commit: %w", pgx.ErrTxCommitRollback)
	}
	return nil
}

// commitOutcome tells a failed round trip that carried COMMIT from one whose answer the server
// gave: when COMMIT was sent and no confirmation came back, whatever the error (the session
// ended by FATAL while committing, a reset, EOF, a deadline), the transaction may have committed.
// That is COMMIT_UNKNOWN, never a plain failure: the write must not be reported as not done, and
// only a retry with the same key can tell. atCommit says err stands where COMMIT's answer was
// due; before it, a server's answer (an ERROR, or a FATAL ending the session) means the server
// never reached COMMIT, while an error of the connection means nothing: the answers were in
// flight, COMMIT's among them.
//
// Which errors answer for certain is the runner library's rule (idem.CommitAnswered), shared
// with its PoolDriver; this adds the message that names both halves for a write whose key the
// store does not know.
func commitOutcome(err error, atCommit bool) error {
	if err == nil || idem.CommitAnswered(err, atCommit) {
		return err
	}
	return apperr.Wrap(apperr.CommitUnknown, err, "%s", commitUnknownMessage)
}

// commitUnknownMessage is COMMIT_UNKNOWN's message where the caller's key is not known; the
// edges that know whether the write had a key say which of its two halves applies.
const commitUnknownMessage = "the connection to the database was lost while the write was committing, so it may or may not have " +
	"committed; retry with the same Idempotency-Key to learn the outcome (the retry replays the first result if it committed and runs it " +
	"once if it did not); a write sent without a key cannot tell: look at the record's history before sending it again"

// rollback ends the transaction if BEGIN reached the server.
func (a *ambient) rollback(ctx context.Context) {
	if pc := a.conn.Conn().PgConn(); a.begun && !pc.IsClosed() && pc.TxStatus() != 'I' {
		_, _ = a.conn.Exec(ctx, "rollback")
	}
}

// FailedRow is a row whose Scan fails with err (a statement that could not be sent).
func FailedRow(err error) pgx.Row { return errRow{err} }

// FailedBatch is the results of a batch that never reached the server: every read fails with err.
func FailedBatch(err error) pgx.BatchResults { return errBatch{err} }

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
func (b errBatch) Query() (pgx.Rows, error)         { return failedpgx.Rows(b.err), b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }

// Tx satisfies pgx.BatchResults; a batch that never reached the server has no transaction.
func (b errBatch) Tx() pgx.Tx { return nil }

// Tx runs fn in a write transaction carried by the context fn receives. A nested call joins the
// ambient transaction (same connection, same transaction); only the outermost call commits, and
// any error from fn rolls the whole transaction back.
func (db *DB) Tx(ctx context.Context, fn func(ctx context.Context) error) error {
	return db.TxBatch(ctx, func(ctx context.Context, _ *Batch) error { return fn(ctx) })
}

// TxBatch is Tx with a batch: the writes fn queues in b are sent after fn returns nil, in order,
// together with COMMIT in one round trip; a write the server refuses fails the transaction
// (nothing commits) with its step's *StepError. Joined into an ambient transaction, the writes
// are sent when fn returns, in one round trip of their own, so they are in the transaction
// before TxBatch returns; the outermost call commits. fn's own statements run at once, as in Tx.
func (db *DB) TxBatch(ctx context.Context, fn func(ctx context.Context, b *Batch) error) error {
	var b Batch
	if a, ok := ctx.Value(ambientKey{}).(*ambient); ok && a.db == db {
		if err := fn(ctx, &b); err != nil {
			return err
		}
		return a.send(ctx, &b)
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
	if err := fn(txCtx, &b); err != nil {
		// The rollback uses a fresh context: a cancelled request must still release its locks.
		a.rollback(context.WithoutCancel(ctx))
		return db.translate(err)
	}
	if err := a.commit(ctx, &b); err != nil {
		a.rollback(context.WithoutCancel(ctx))
		return db.translate(err)
	}
	return nil
}

// Savepoint runs fn under a named savepoint of the ambient transaction, so a step that must
// survive its own error rolls back only itself. It requires an ambient transaction. What fn
// runs through Q is inside the savepoint; writes queued in a batch are not (they travel with the
// commit).
func (db *DB) Savepoint(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	a, ok := ctx.Value(ambientKey{}).(*ambient)
	if !ok || a.db != db {
		return errors.New("store: Savepoint needs an ambient transaction")
	}
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := a.Exec(ctx, "SAVEPOINT "+ident); err != nil {
		return err
	}
	if err := fn(ctx); err != nil {
		if _, rbErr := a.Exec(ctx, "ROLLBACK TO SAVEPOINT "+ident); rbErr != nil {
			return errors.Join(err, rbErr)
		}
		return err
	}
	_, err := a.Exec(ctx, "RELEASE SAVEPOINT "+ident)
	return err
}

// ReadSnapshot runs fn in a read-only REPEATABLE READ transaction carried by the context fn
// receives: every statement through db.Q(ctx) — the kernel's restores included — reads the
// same snapshot, and the server refuses any write. It works on a read-only session too.
func (db *DB) ReadSnapshot(ctx context.Context, fn func(ctx context.Context) error) error {
	if a, ok := ctx.Value(ambientKey{}).(*ambient); ok && a.db == db {
		return fn(ctx)
	}
	conn, err := db.acquire(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer conn.Release()
	err = db.sendBegin(ctx, conn, beginSnapshot)
	if err == nil {
		// Its page reads are many small index lookups whose generic plans the planner may cost
		// high enough to JIT-compile on every page: compiling costs far more than running them.
		// Its whole-scope reads (verifyscan.go) hash-join whole tables: with more memory than
		// the default 4 MB a hash is built in one batch rather than spilled to disk in many; and
		// each is planned for the owner it reads (a prepared statement's generic plan, cached
		// from another owner's verify, does not know how many rows that owner has).
		// Transaction-local all three: nothing outlives the snapshot on a pooled connection.
		_, err = conn.Exec(ctx, `select pg_catalog.set_config('jit', 'off', true), pg_catalog.set_config('work_mem', '64MB', true),
			pg_catalog.set_config('plan_cache_mode', 'force_custom_plan', true)`)
	}
	a := &ambient{db: db, conn: conn, begun: true}
	if err != nil {
		a.rollback(context.WithoutCancel(ctx))
		return fmt.Errorf("begin a read-only snapshot: %w", db.translate(err))
	}
	err = fn(context.WithValue(ctx, ambientKey{}, a))
	// Nothing to commit: the transaction only read.
	a.rollback(context.WithoutCancel(ctx))
	return db.translate(err)
}
