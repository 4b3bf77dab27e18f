package idem

// The flow's steps (flow.go), each one statement or one decision of SPEC §4.2, in the order the
// flow takes them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// keyRow is a key's row as the runner decides on it.
type keyRow struct {
	StoredKey
	// waited: the row's transaction was still running when this call's INSERT took its snapshot
	// (it queued behind it on the unique index).
	waited bool
}

// liveAt reports whether the row is there and not expired at now: a hit.
func (k *keyRow) liveAt(now time.Time) bool { return k != nil && k.ExpiresAt.After(now) }

// restoreFunc restores a result from rows read with the key (Replay.Restore).
type restoreFunc[T any] func(result json.RawMessage) (T, bool, error)

// readKeyAlone reads the key's row in a round trip of its own, outside any transaction.
func (c *call[T, P]) readKeyAlone(ctx context.Context) (row *keyRow, pre restoreFunc[T], err error) {
	err = c.r.driver.WithConn(ctx, func(q Querier) error {
		var err error
		row, pre, err = c.readKeyRow(ctx, q)
		return err
	})
	return row, pre, err
}

// readKeyRow reads the key row on q: with the policy's own statement (the row and the rows its
// result references) when it has one.
func (c *call[T, P]) readKeyRow(ctx context.Context, q Querier) (*keyRow, restoreFunc[T], error) {
	if rp, ok := c.policy.(Replayer[T]); ok {
		rep, err := rp.ReadReplay(ctx, q, ReplayParams{Owner: c.req.Owner, Key: c.req.Key, Module: c.req.Module})
		if err != nil || !rep.Found {
			return nil, nil, err
		}
		return &keyRow{StoredKey: rep.Key}, rep.Restore, nil
	}
	var row keyRow
	err := q.QueryRow(ctx, c.r.sql.readKey, c.req.Owner, c.req.Key).
		Scan(&row.Operation, &row.Fingerprint, &row.Status, &row.Response, &row.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read key: %w", err)
	}
	return &row, nil, nil
}

// step is what miss ended with: a hit to answer, an executed result, or an error.
type step[T any] struct {
	hit *keyRow
	pre restoreFunc[T]
	res Result[T]
	err error
	// reserved: this transaction inserted the key's PROCESSING row (an error after it must not
	// let the transaction commit).
	reserved bool
}

// reservation is what the reservation's round trip returned.
type reservation[T any] struct {
	reserved bool
	// snapshot is the one the INSERT started with (to tell later whether it waited).
	snapshot string
	// row is the key row read ahead of the INSERT in the same plan (nil: none, or not read),
	// pre its replay's restore.
	row *keyRow
	pre restoreFunc[T]
}

// reserve sends the reservation's plan on tx: the key read first when withRead, then the
// INSERT of the PROCESSING row (expiring a TTL after now), then the request's prefetched
// reads, guarded on the reservation.
func (c *call[T, P]) reserve(ctx context.Context, tx pgx.Tx, withRead bool, now time.Time) (rv reservation[T], err error) {
	req, b := &c.req, c.r.batch
	tail := pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 1+len(req.Prefetch))}
	c.queued.queue(&tail, c.r.sql.reserve, req.Owner, req.Key, req.Operation, c.fp, now, now.Add(c.r.ttl))
	for _, p := range req.Prefetch {
		p.QueueHeld(&tail, req.Owner, req.Key)
	}
	var br pgx.BatchResults
	if withRead {
		ahead := b.ahead(tx, &tail, &c.queued)
		rv.row, rv.pre, err = c.readKeyRow(ctx, ahead)
		br = ahead.sendRest(ctx, b)
		if err != nil {
			_ = br.Close()
			return rv, err
		}
	} else {
		br = b.send(ctx, tx, &tail)
	}
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = &StepError{Step: StepReserve, Err: fmt.Errorf("reserve key: %w", cerr)}
		}
	}()
	if err := br.QueryRow().Scan(&rv.reserved, &rv.snapshot); err != nil {
		return rv, &StepError{Step: StepReserve, Err: fmt.Errorf("reserve key: %w", err)}
	}
	for _, p := range req.Prefetch {
		if err := p.TakeHeld(br, rv.reserved); err != nil {
			return rv, err
		}
	}
	return rv, nil
}

// readKeyAfterConflict reads the row that beat our INSERT. waited is true when the winner's
// transaction was still running when our INSERT took its snapshot: we queued behind it on the
// unique index.
func (c *call[T, P]) readKeyAfterConflict(ctx context.Context, q Querier, snapshot string) (*keyRow, error) {
	var row keyRow
	var visible bool
	err := q.QueryRow(ctx, c.r.sql.readAfterConflict, c.req.Owner, c.req.Key, snapshot).
		Scan(&row.Operation, &row.Fingerprint, &row.Status, &row.Response, &row.ExpiresAt, &visible)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	row.waited = !visible
	return &row, nil
}

// readKeyAfterConflictAlone is readKeyAfterConflict in a round trip of its own, outside any
// transaction.
func (c *call[T, P]) readKeyAfterConflictAlone(ctx context.Context, snapshot string) (row *keyRow, err error) {
	err = c.r.driver.WithConn(ctx, func(q Querier) error {
		var err error
		row, err = c.readKeyAfterConflict(ctx, q, snapshot)
		return err
	})
	return row, err
}

// deleteExpired deletes the key's row, expired at now, in tx: the key may be reserved again.
func (c *call[T, P]) deleteExpired(ctx context.Context, tx pgx.Tx, now time.Time) error {
	if _, err := tx.Exec(ctx, c.r.sql.deleteExpired, c.req.Owner, c.req.Key, now); err != nil {
		return &StepError{Step: StepReserve, Err: fmt.Errorf("delete expired key: %w", err)}
	}
	return nil
}

// execute runs prepare and work in tx; work's queued writes go to final.
func (c *call[T, P]) execute(ctx context.Context, tx pgx.Tx, final *pgx.Batch) (T, error) {
	p, err := c.prepare(ctx, tx)
	if err != nil {
		var zero T
		return zero, err
	}
	return c.work(ctx, &Tx{tx: tx, final: final, slab: &c.queued}, p)
}

// seal is the envelope of the work's result v: the policy's reference, through the guard.
func (c *call[T, P]) seal(v T) (json.RawMessage, error) {
	result, err := c.policy.Serialize(v)
	if err != nil {
		return nil, fmt.Errorf("serialize %s: %w", c.policy.Name(), err)
	}
	return BuildEnvelope(c.policy.Name(), c.policy.Fields(), result)
}

// queueSuccess queues the success row (SUCCEEDED and env) in final, behind the work's writes.
// Guarded on the server: no PROCESSING row to update fails the statement, and with it the
// transaction, though the COMMIT travels in the same round trip.
func (c *call[T, P]) queueSuccess(final *pgx.Batch, env json.RawMessage) {
	c.queued.queue(final, c.r.sql.success, c.req.Owner, c.req.Key, env, c.r.clock.Now()).Fn = readSuccess
}

// readSuccess reads the success row's result: its guard failing means the reservation vanished.
func readSuccess(br pgx.BatchResults) error {
	if _, err := br.Exec(); err != nil {
		if isDivisionByZero(err) {
			err = errReservationVanished
		}
		return &StepError{Step: StepSuccess, Err: fmt.Errorf("record success: %w", err)}
	}
	return nil
}

// answered passes an answer that came from the key's row (executed, replayed, or refused by the
// hit rules) through, remembering the key: a request for it again is most likely a retry.
func (c *call[T, P]) answered(res Result[T], err error) (Result[T], error) {
	c.r.recent.add(flightKey{c.req.Owner, c.req.Key})
	return res, err
}

// abortCallersTx makes the caller's transaction fail on the server after a call in it failed
// with its key reserved: the reservation (PROCESSING) and the work's writes must never commit —
// committed, the key would answer IDEMPOTENCY_IN_PROGRESS until it expired and the half-done
// work would stand. A Go error alone leaves a PostgreSQL transaction usable, so the runner
// raises one: the caller's COMMIT then answers ROLLBACK (pgx.ErrTxCommitRollback). A caller that
// must go on after a failed call wraps it in a savepoint of its own (tx.Begin). A transaction
// the error already aborted, or a lost connection, refuses this too; nothing more is needed.
func abortCallersTx(ctx context.Context, tx pgx.Tx) {
	_, _ = tx.Exec(context.WithoutCancel(ctx), abortCallersTxSQL)
}

const abortCallersTxSQL = `DO $$BEGIN RAISE EXCEPTION 'idem: a call in this transaction failed after reserving its idempotency key: the transaction can only roll back' USING ERRCODE = 'P0001'; END$$`
