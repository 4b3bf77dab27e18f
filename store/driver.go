package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
)

// A DB is the idempotency runner's driver (idem.Driver): the runner's transactions follow this
// session's policy — its per-transaction settings, read-only refusals, acquire timeout
// (OVERLOADED), coded errors and COMMIT_UNKNOWN — exactly as every other write's do, and carry
// the ambient transaction in the context they hand to the work, so the kernel's repositories
// reach the same transaction (SPEC §3) through the public API.
var _ idem.Driver = (*DB)(nil)

// WithTx runs fn in a new transaction carried by the context fn receives (TxBatch's): BEGIN
// travels with fn's first statements; the statements fn leaves in final are sent after it
// returns nil, with COMMIT, in one round trip. Joined into an ambient transaction, fn runs in it
// and final is sent in one round trip of its own; the outermost call commits.
func (db *DB) WithTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx, final *pgx.Batch) error) error {
	var final pgx.Batch
	if a, ok := ctx.Value(ambientKey{}).(*ambient); ok && a.db == db {
		if err := fn(ctx, ambientTx{a}, &final); err != nil {
			return err
		}
		if final.Len() == 0 {
			return nil
		}
		return ambientTx{a}.SendBatch(ctx, &final).Close()
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
	if err := fn(context.WithValue(ctx, ambientKey{}, a), ambientTx{a}, &final); err != nil {
		// The rollback uses a fresh context: a cancelled request must still release its locks.
		a.rollback(context.WithoutCancel(ctx))
		return db.translate(err)
	}
	if err := a.commitFinal(ctx, &final); err != nil {
		a.rollback(context.WithoutCancel(ctx))
		return db.translate(err)
	}
	return nil
}

// commitFinal sends final's statements and COMMIT in one round trip (with BEGIN first when
// nothing was sent before); their results are read in order, each by its own callback, and
// COMMIT's answer decides the outcome as every other write's does (commitResult, commitOutcome:
// COMMIT_UNKNOWN whenever COMMIT left and no confirmation came). In an exec mode that describes
// statements before sending them (beginApart), BEGIN and the statements go first and COMMIT alone
// after them. Nothing sent and nothing queued: nothing to commit.
func (a *ambient) commitFinal(ctx context.Context, final *pgx.Batch) error {
	if final.Len() == 0 && (!a.begun || a.conn.Conn().PgConn().TxStatus() == 'I') {
		// Nothing sent, or fn's last round trip carried COMMIT itself (idem.RunAhead's one
		// round trip).
		return nil
	}
	if a.db.beginApart {
		if err := a.begin(ctx); err != nil {
			return err
		}
		if final.Len() > 0 {
			if err := a.conn.SendBatch(ctx, final).Close(); err != nil {
				// COMMIT was not sent: the transaction cannot have committed.
				return err
			}
		}
		tag, err := a.conn.Exec(ctx, "commit")
		return commitResult(tag, err)
	}
	pb := newRoundTripBatch(final.Len() + 1)
	began := a.queueWrites(pb, nil)
	pb.QueuedQueries = append(pb.QueuedQueries, final.QueuedQueries...)
	pb.add("commit", nil)
	br := a.conn.SendBatch(ctx, &pb.Batch)
	err := readWrites(br, began, nil)
	for _, q := range final.QueuedQueries {
		if err != nil {
			break
		}
		if q.Fn != nil {
			err = q.Fn(br)
		} else {
			_, err = br.Exec()
		}
	}
	if err != nil {
		_ = br.Close()
		return commitOutcome(err, false)
	}
	tag, err := br.Exec()
	// The COMMIT tag is the answer: an error draining the batch after it changes nothing.
	_ = br.Close()
	return commitResult(tag, err)
}

// WithConn runs fn on a pooled connection outside any transaction, taken within the acquire
// timeout (OVERLOADED past it); its statements follow the session's rules as Q's do.
func (db *DB) WithConn(ctx context.Context, fn func(q idem.Querier) error) error {
	c, err := db.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	return fn(c)
}

// Writable reports whether this session may write now (WriteRefusal is nil).
func (db *DB) Writable() bool { return db.WriteRefusal() == nil }

// AmbientTx is ctx's ambient transaction of this DB as a pgx.Tx, for a call that must run in it
// (idem.Request.Tx); false when ctx carries none. Its Commit and Rollback refuse: the outermost
// TxBatch (or WithTx) ends the transaction.
func (db *DB) AmbientTx(ctx context.Context) (pgx.Tx, bool) {
	if a, ok := ctx.Value(ambientKey{}).(*ambient); ok && a.db == db {
		return ambientTx{a}, true
	}
	return nil, false
}

// ambientTx is an ambient transaction seen as a pgx.Tx: its statements take BEGIN with them
// when it has not been sent yet.
type ambientTx struct{ a *ambient }

var _ pgx.Tx = ambientTx{}

var errAmbientEnds = errors.New("store: the transaction is ended by the call that began it")

func (t ambientTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.a.Exec(ctx, sql, args...)
}

func (t ambientTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.a.Query(ctx, sql, args...)
}

func (t ambientTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.a.QueryRow(ctx, sql, args...)
}

func (t ambientTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.a.SendBatch(ctx, b)
}

func (t ambientTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.a.begin(ctx); err != nil {
		return 0, err
	}
	return t.a.conn.CopyFrom(ctx, table, cols, src)
}

func (t ambientTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.a.conn.Conn().Prepare(ctx, name, sql)
}

// Begin refuses: a step that must survive its own error takes a named savepoint (DB.Savepoint).
func (t ambientTx) Begin(context.Context) (pgx.Tx, error) {
	return nil, errors.New("store: a nested transaction of an ambient one is a named savepoint: use DB.Savepoint")
}

// LargeObjects is not offered on an ambient transaction (the zero value fails on use).
func (t ambientTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }
func (t ambientTx) Conn() *pgx.Conn                { return t.a.conn.Conn() }
func (t ambientTx) Commit(context.Context) error   { return errAmbientEnds }
func (t ambientTx) Rollback(context.Context) error { return errAmbientEnds }
