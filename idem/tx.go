package idem

import (
	"context"
	"errors"
	"strconv"

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
	slab  *slab // where Queue puts its statements (nil: pgx.Batch.Queue)
	// held, in a RunAhead call's work, is the reservation every queued write must be guarded
	// on: nothing has been sent yet, and the writes travel in the reservation's own round trip.
	held *heldBy
}

type heldBy struct{ owner, key string }

// HeldBy reports, in the work of a RunAhead call, the reservation (owner, key) the work's
// queued writes travel behind, in the same round trip: each must do nothing unless this
// transaction inserted that reservation — a write guarded with HeldGuard's condition, or an
// equivalent one. ok is false in a RunPrepared call, whose writes are sent after the
// reservation was won.
func (t *Tx) HeldBy() (owner, key string, ok bool) {
	if t.held == nil {
		return "", "", false
	}
	return t.held.owner, t.held.key, true
}

// HeldGuard is the SQL condition that this transaction holds the reservation of the key
// (owner $ownerParam, key $keyParam) in table (Runner.Table): the key row exists and was
// reserved by this very transaction. In a transaction that inserted nothing it is false
// (pg_current_xact_id_if_assigned() is NULL there), and behind a reservation that lost — the
// key committed, or reserved by a transaction that still runs — the row's reserved_xid is
// another transaction's.
func HeldGuard(table string, ownerParam, keyParam int) string {
	return "EXISTS (SELECT 1 FROM " + table + " WHERE owner_id = $" + strconv.Itoa(ownerParam) + " AND idempotency_key = $" +
		strconv.Itoa(keyParam) + " AND reserved_xid = pg_current_xact_id_if_assigned())"
}

// errAhead is a statement a RunAhead call's work tried to run at once.
var errAhead = errors.New("idem: the work of a RunAhead call runs no statement: it queues its writes (Tx.Queue), guarded on the reservation (HeldGuard)")

func (t *Tx) ahead() bool { return t.tx == nil }

var _ pgx.Tx = (*Tx)(nil)

// Queue defers a write to the round trip that ends the transaction: it is sent after the work
// returns, in queue order, ahead of the success row and COMMIT, and its failure rolls everything
// back and fails the call (the QueuedQuery's callbacks may check its result, e.g. a row count).
// Its arguments are read when it is sent: do not change what they point to after queueing.
// When the work returns an error, nothing queued is sent.
func (t *Tx) Queue(sql string, args ...any) *pgx.QueuedQuery {
	return t.slab.queue(t.final, sql, args...)
}

// Queued is how many writes are queued.
func (t *Tx) Queued() int { return t.final.Len() }

func (t *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.ahead() {
		return pgconn.CommandTag{}, errAhead
	}
	return t.tx.Exec(ctx, sql, args...)
}

func (t *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.ahead() {
		return nil, errAhead
	}
	return t.tx.Query(ctx, sql, args...)
}

func (t *Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.ahead() {
		return failedRow{errAhead}
	}
	return t.tx.QueryRow(ctx, sql, args...)
}

func (t *Tx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.ahead() {
		return failedBatch{errAhead}
	}
	return t.tx.SendBatch(ctx, b)
}

func (t *Tx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if t.ahead() {
		return 0, errAhead
	}
	return t.tx.CopyFrom(ctx, table, cols, src)
}

func (t *Tx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if t.ahead() {
		return nil, errAhead
	}
	return t.tx.Prepare(ctx, name, sql)
}

// Begin starts a pseudo nested transaction (a savepoint), for a step that must survive its own
// error.
func (t *Tx) Begin(ctx context.Context) (pgx.Tx, error) {
	if t.ahead() {
		return nil, errAhead
	}
	return t.tx.Begin(ctx)
}

// LargeObjects is the zero value (failing on use) in a RunAhead call's work.
func (t *Tx) LargeObjects() pgx.LargeObjects {
	if t.ahead() {
		return pgx.LargeObjects{}
	}
	return t.tx.LargeObjects()
}

// Conn is nil in a RunAhead call's work: nothing is connected yet.
func (t *Tx) Conn() *pgx.Conn {
	if t.ahead() {
		return nil
	}
	return t.tx.Conn()
}

// Commit refuses: the runner commits, with the success row.
func (t *Tx) Commit(context.Context) error { return errRunnerEnds }

// Rollback refuses: return an error from the work instead, and everything rolls back.
func (t *Tx) Rollback(context.Context) error { return errRunnerEnds }

var errRunnerEnds = errors.New("idem: the runner ends the transaction: return from the work to commit, return an error to roll back")
