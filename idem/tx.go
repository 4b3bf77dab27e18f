package idem

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Tx is the transaction a work function writes in: the one that holds the key's reservation and
// will hold its SUCCEEDED row, so that the business rows, the reservation and the success
// commit together or not at all. It is a pgx.Tx: its statements run at once, in the
// transaction. Queue defers a write to the round trip that ends the transaction, with the
// success row and COMMIT: a write nothing in the work reads back costs no round trip of its own.
// Commit and Rollback are the runner's: from work they return an error (return an error from
// work to roll everything back).
type Tx struct {
	tx    pgx.Tx
	final *pgx.Batch
}

var _ pgx.Tx = (*Tx)(nil)

// Queue defers a write to the round trip that ends the transaction: it is sent after the work
// returns, in queue order, ahead of the success row and COMMIT, and its failure rolls everything
// back and fails the call (the QueuedQuery's callbacks may check its result, e.g. a row count).
// Its arguments are read when it is sent: do not change what they point to after queueing.
// When the work returns an error, nothing queued is sent.
func (t *Tx) Queue(sql string, args ...any) *pgx.QueuedQuery { return t.final.Queue(sql, args...) }

// Queued is how many writes are queued.
func (t *Tx) Queued() int { return t.final.Len() }

func (t *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.tx.Exec(ctx, sql, args...)
}

func (t *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.tx.Query(ctx, sql, args...)
}

func (t *Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.tx.QueryRow(ctx, sql, args...)
}

func (t *Tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.tx.SendBatch(ctx, b)
}

func (t *Tx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return t.tx.CopyFrom(ctx, table, cols, src)
}

func (t *Tx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.tx.Prepare(ctx, name, sql)
}

// Begin starts a pseudo nested transaction (a savepoint), for a step that must survive its own
// error.
func (t *Tx) Begin(ctx context.Context) (pgx.Tx, error) { return t.tx.Begin(ctx) }

func (t *Tx) LargeObjects() pgx.LargeObjects { return t.tx.LargeObjects() }
func (t *Tx) Conn() *pgx.Conn                { return t.tx.Conn() }

// Commit refuses: the runner commits, with the success row.
func (t *Tx) Commit(context.Context) error { return errRunnerEnds }

// Rollback refuses: return an error from the work instead, and everything rolls back.
func (t *Tx) Rollback(context.Context) error { return errRunnerEnds }

var errRunnerEnds = errors.New("idem: the runner ends the transaction: return from the work to commit, return an error to roll back")
