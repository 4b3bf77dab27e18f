package idem

// RunAhead's one plan (flow.go's keyedAhead): the key read, the reservation, the work's
// guarded writes, SUCCEEDED and COMMIT, in one round trip when batching.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// afterFailedPrepare is a RunAhead call whose prepare (or work, or envelope) failed before
// anything was sent: RunPrepared's path with that error standing where prepare's would — after
// the reservation, which it rolls back — so a key already taken still answers from its row.
func (c *call[T, P]) afterFailedPrepare(ctx context.Context, err error) (Result[T], error) {
	c.prepare = func(context.Context, Querier) (P, error) {
		var zero P
		return zero, err
	}
	return c.inOwnTx(ctx, true)
}

// aheadTrip is what the plan of a RunAhead call returned.
type aheadTrip[T any] struct {
	// row is the key row read ahead of the reservation (nil: none committed before it), pre
	// its replay's restore.
	row *keyRow
	pre restoreFunc[T]
	// reserved: this transaction inserted the key's PROCESSING row (and so did the work).
	reserved bool
	// snapshot is the one the reservation started with.
	snapshot string
}

// sendAhead sends the call's plan on tx and reads it into o: the key read, the reservation, the
// work's writes, SUCCEEDED and COMMIT (BEGIN ahead of them: tx has not begun). Its errors are
// judged as a COMMIT's: a round trip whose answer was lost may have committed.
func (c *call[T, P]) sendAhead(ctx context.Context, tx pgx.Tx, writes *pgx.Batch, env json.RawMessage, now time.Time, o *aheadTrip[T]) (err error) {
	r, req := c.r, &c.req
	tail := pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 3+len(writes.QueuedQueries))}
	c.queued.queue(&tail, r.sql.reserve, req.Owner, req.Key, req.Operation, c.fp, now, now.Add(r.ttl))
	tail.QueuedQueries = append(tail.QueuedQueries, writes.QueuedQueries...)
	c.queued.queue(&tail, r.sql.successHeld, req.Owner, req.Key, env, r.clock.Now())
	QueueCommit(&tail)
	ahead := r.batch.ahead(tx, &tail, &c.queued)
	o.row, o.pre, err = c.readKeyRow(ctx, ahead)
	br := ahead.sendRest(ctx, r.batch)
	// Until COMMIT's own answer is read, an error the server answered (a FATAL included: an
	// administrator's pg_terminate_backend while the reservation waits on the unique index) is
	// the answer to a statement ahead of COMMIT, which the server therefore never reached.
	atCommit := false
	defer func() {
		cerr := br.Close()
		if err == nil && cerr != nil {
			err, atCommit = cerr, true
		}
		err = commitError(err, atCommit)
	}()
	if err != nil {
		return err
	}
	if err := br.QueryRow().Scan(&o.reserved, &o.snapshot); err != nil {
		return &StepError{Step: StepReserve, Err: fmt.Errorf("reserve key: %w", err)}
	}
	for _, q := range writes.QueuedQueries {
		if q.Fn != nil {
			err = q.Fn(br)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			return err
		}
	}
	var updated int64
	if err := br.QueryRow().Scan(&updated); err != nil {
		return &StepError{Step: StepSuccess, Err: fmt.Errorf("record success: %w", err)}
	}
	if o.reserved && updated != 1 {
		// Cannot happen (the row is this transaction's own, uncommitted); said if it does.
		return &StepError{Step: StepSuccess, Err: errReservationVanished}
	}
	atCommit = true
	tag, err := br.Exec()
	if err != nil {
		return err
	}
	if tag.String() != "COMMIT" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}
