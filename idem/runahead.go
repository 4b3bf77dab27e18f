package idem

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/idem/idemtype"
)

// keyedAhead is RunAhead's keyed path in a transaction of the runner's own (admission entered):
// prepare and work on the client, then one round trip — BEGIN, the key read, the reservation,
// the work's guarded writes, SUCCEEDED (of this transaction's reservation only) and COMMIT. A
// key that turns out taken is answered from the row read in that round trip; only a key whose
// row the read could not see (the reservation waited on the unique index for a transaction
// that held it) or saw expired takes more: a read of the row that beat us, or RunPrepared's
// path with the prepared value.
func (c *call[T, P]) keyedAhead(ctx context.Context) (Result[T], error) {
	r, req := c.r, &c.req
	// The reservation's time is taken first: the key row is never younger than the rows the work
	// stamps behind it.
	now := r.clock.Now()
	p, err := c.ahead(ctx)
	if err != nil {
		return c.afterFailedPrepare(ctx, err)
	}
	writes := pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 8)}
	v, err := c.work(ctx, &Tx{final: &writes, held: &heldBy{owner: req.Owner, key: req.Key}}, p)
	if err != nil {
		return c.afterFailedPrepare(ctx, err)
	}
	result, err := c.policy.Serialize(v)
	if err != nil {
		return c.afterFailedPrepare(ctx, fmt.Errorf("serialize %s: %w", c.policy.Name(), err))
	}
	env, err := BuildEnvelope(c.policy.Name(), c.policy.Fields(), result)
	if err != nil {
		return c.afterFailedPrepare(ctx, err)
	}
	var o aheadTrip[T]
	err = r.driver.WithTx(ctx, func(ctx context.Context, tx pgx.Tx, _ *pgx.Batch) error {
		return c.sendAhead(ctx, tx, &writes, env, now, &o)
	})
	if !o.reserved && o.row != nil && o.row.ExpiresAt.After(now) {
		// The hit's answer stands whatever became of the COMMIT: the transaction wrote nothing.
		return c.answered(c.hit(ctx, o.row, o.pre))
	}
	if err != nil {
		return Result[T]{}, err
	}
	if o.reserved {
		return c.answered(Result[T]{Value: v, Outcome: idemtype.Executed, Envelope: env, Fingerprint: c.fp}, nil)
	}
	if o.row == nil {
		// The reservation waited for a transaction that held the key: read what it left.
		var row *keyRow
		err := r.driver.WithConn(ctx, func(q Querier) error {
			var err error
			row, err = c.readKeyAfterConflict(ctx, q, o.snapshot)
			return err
		})
		if err != nil {
			return Result[T]{}, err
		}
		if row != nil && row.ExpiresAt.After(r.clock.Now()) {
			return c.answered(c.hit(ctx, row, nil))
		}
	}
	// An expired row (or one gone since): RunPrepared's path deletes it and competes again,
	// with what prepare made.
	c.prepare = func(context.Context, Querier) (P, error) { return p, nil }
	return c.inOwnTx(ctx, false)
}

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

// aheadTrip is what the one round trip of a RunAhead call returned.
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

// sendAhead sends the call's one round trip on tx and reads it into o: the key read, the
// reservation, the work's writes, SUCCEEDED and COMMIT (BEGIN ahead of them: tx has not begun).
// Its errors are judged as a COMMIT's: a round trip whose answer was lost may have committed.
func (c *call[T, P]) sendAhead(ctx context.Context, tx pgx.Tx, writes *pgx.Batch, env json.RawMessage, now time.Time, o *aheadTrip[T]) (err error) {
	r, req := c.r, &c.req
	tail := pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 3+len(writes.QueuedQueries))}
	tail.Queue(r.sql.reserve, req.Owner, req.Key, req.Operation, c.fp, now, now.Add(r.ttl))
	tail.QueuedQueries = append(tail.QueuedQueries, writes.QueuedQueries...)
	tail.Queue(r.sql.successHeld, req.Owner, req.Key, env, r.clock.Now())
	QueueCommit(&tail)
	ahead := &aheadOf{q: tx, tail: &tail}
	o.row, o.pre, err = c.readKeyRow(ctx, ahead)
	if ahead.br == nil { // the policy sent nothing: the tail goes alone
		ahead.br = tx.SendBatch(ctx, &tail)
	}
	br := ahead.br
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
