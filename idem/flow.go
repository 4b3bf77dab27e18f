package idem

// The runner's flow, to read top to bottom next to SPEC §4.2. RunPrepared and RunAhead
// (runner.go) start here; each step is a named function in steps.go, the hit's answer is in
// answer.go, in-process sharing in share.go, RunAhead's plan in runahead.go.
//
//	run            owner and key checked
//	├─ unkeyed     no key: begin tx → prepare → work → commit
//	└─ keyed       key (joining an in-process flight of the same request first: SPEC §4.3)
//	    read the key's row; a live one is a hit → hit: IN_PROGRESS, SCOPE_CONFLICT, KEY_REUSED,
//	                                           POLICY_MISMATCH, or the policy's Restore (REPLAYED)
//	    └─ miss: begin tx (inOwnTx, or inCallersTx in the caller's transaction)
//	        reserveOrMeet  INSERT PROCESSING, waiting on the unique index while another tx holds
//	                       the key; the row that beat it is a hit (waited), an expired one is
//	                       deleted and the key reserved again
//	        └─ reserved: prepare → work → seal (policy.Serialize, guarded) → success row → COMMIT
//	                     (any error: ROLLBACK — no failure is cached, the key is free again)
//	keyedAhead     RunAhead's miss: prepare, work and seal before anything is sent, then
//	               reserve, the work's writes, success and COMMIT as one plan
//
// Which statements share a round trip is not the flow's business: it asks for them in order and
// the runner's batcher (plan.go) sends them — the key read pipelined with the reservation,
// RunAhead's one round trip, the work's writes with COMMIT. Switched off, each statement takes
// a round trip of its own and every outcome is the same (plan_test.go).

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
)

// run is a call from the start: the owner and key checked, then unkeyed, keyed, or keyed
// through an in-process flight.
func (c *call[T, P]) run(ctx context.Context) (Result[T], error) {
	if err := c.req.validate(); err != nil {
		return Result[T]{}, err
	}
	switch {
	case c.req.Key == "":
		return c.unkeyed(ctx)
	case c.req.shares():
		return c.throughFlight(ctx) // leads (then keyed) or joins a flight of the same request
	}
	return c.keyed(ctx)
}

// unkeyed runs prepare and work once in one transaction, without idempotency.
func (c *call[T, P]) unkeyed(ctx context.Context) (Result[T], error) {
	var v T
	var err error
	if tx := c.req.Tx; tx != nil {
		var final pgx.Batch
		if v, err = c.execute(ctx, tx, &final); err == nil {
			err = c.r.batch.sendAll(ctx, tx, &final)
		}
	} else if s, aerr := c.r.admission.enterOwner(ctx, c.req.Owner); aerr != nil {
		return Result[T]{}, aerr
	} else {
		defer c.r.admission.leaveOwner(c.req.Owner, s)
		err = c.r.driver.WithTx(ctx, func(ctx context.Context, tx pgx.Tx, final *pgx.Batch) error {
			var err error
			if v, err = c.execute(ctx, tx, final); err != nil {
				return err
			}
			return c.r.batch.flush(ctx, tx, final)
		})
	}
	if err != nil {
		return Result[T]{}, err
	}
	return Result[T]{Value: v, Outcome: idemtype.Executed}, nil
}

// keyed is a keyed call past its flight: read the key's row and answer a hit from it, else the
// miss in a transaction — the caller's, or one of the runner's own past admission. A hit is
// answered after its transaction ended (it wrote nothing), so a policy's Restore never waits
// for a connection while holding one.
func (c *call[T, P]) keyed(ctx context.Context) (Result[T], error) {
	r, req := c.r, &c.req
	c.fp = Fingerprint(req.Operation, req.Body)
	if req.Tx != nil {
		return c.inCallersTx(ctx)
	}
	// Beyond a few requests per key on the database path, the rest wait here without a
	// connection; and one owner holds at most its share of the pool.
	k := flightKey{req.Owner, req.Key}
	ks, err := r.admission.enterKey(ctx, k)
	if err != nil {
		return Result[T]{}, err
	}
	defer r.admission.leaveKey(k, ks)
	os, err := r.admission.enterOwner(ctx, req.Owner)
	if err != nil {
		return Result[T]{}, err
	}
	defer r.admission.leaveOwner(req.Owner, os)

	// The key's row is read alone, before any transaction, where the batcher says (a key
	// answered lately) or the driver cannot write (a hot standby still replays); else the read
	// travels with the reservation.
	readAlone := r.batch.readsAlone(r.recent.has(k)) || !r.driver.Writable()
	if readAlone {
		now := r.clock.Now()
		row, pre, err := c.readKeyAlone(ctx)
		if err != nil {
			return Result[T]{}, err
		}
		if row.liveAt(now) {
			return c.answered(c.hit(ctx, row, pre))
		}
	}
	if c.ahead != nil {
		return c.keyedAhead(ctx)
	}
	return c.inOwnTx(ctx, !readAlone)
}

// inOwnTx is the miss in a transaction of the runner's own; the driver commits it.
func (c *call[T, P]) inOwnTx(ctx context.Context, readWithReservation bool) (Result[T], error) {
	var o step[T]
	err := c.r.driver.WithTx(ctx, func(ctx context.Context, tx pgx.Tx, final *pgx.Batch) error {
		o = c.miss(ctx, tx, final, readWithReservation)
		return o.err
	})
	if o.hit != nil {
		// The hit's answer stands whatever became of its empty COMMIT: there was nothing to commit.
		return c.answered(c.hit(ctx, o.hit, o.pre))
	}
	if err != nil {
		return Result[T]{}, err
	}
	return c.answered(o.res, nil)
}

// inCallersTx is the miss inside the caller's transaction: no admission (the caller holds its
// connection already), the key read sent with the reservation, the work's queued writes and the
// success row sent at the end; the caller commits. A failure after the reservation makes the
// caller's transaction fail (abortCallersTx): neither the PROCESSING row nor the work commits.
func (c *call[T, P]) inCallersTx(ctx context.Context) (Result[T], error) {
	var final pgx.Batch
	o := c.miss(ctx, c.req.Tx, &final, true)
	if o.hit != nil {
		return c.answered(c.hit(ctx, o.hit, o.pre))
	}
	if o.err == nil {
		o.err = c.r.batch.sendAll(ctx, c.req.Tx, &final)
	}
	if o.err != nil {
		if o.reserved {
			abortCallersTx(ctx, c.req.Tx)
		}
		return Result[T]{}, o.err
	}
	return c.answered(o.res, nil)
}

// miss is SPEC §4.2's miss inside transaction tx: reserve the key (or meet the row that holds
// it: a hit), then prepare, work, and the success row queued in final behind the work's writes.
func (c *call[T, P]) miss(ctx context.Context, tx pgx.Tx, final *pgx.Batch, readWithReservation bool) (o step[T]) {
	if o = c.reserveOrMeet(ctx, tx, readWithReservation); o.err != nil || !o.reserved {
		return o
	}
	v, err := c.execute(ctx, tx, final)
	if err != nil {
		o.err = err
		return o
	}
	env, err := c.seal(v)
	if err != nil {
		o.err = err
		return o
	}
	c.queueSuccess(final, env)
	o.res = Result[T]{Value: v, Outcome: idemtype.Executed, Envelope: env, Fingerprint: c.fp}
	o.err = c.r.batch.flush(ctx, tx, final)
	return o
}

// reserveOrMeet inserts the key's PROCESSING row — PostgreSQL makes the INSERT wait on the
// unique index while another transaction holds the key — or meets the row that has it: a live
// one is a hit (o.hit), an expired one is deleted in this transaction and the key reserved again.
func (c *call[T, P]) reserveOrMeet(ctx context.Context, tx pgx.Tx, withRead bool) (o step[T]) {
	for attempt := range 5 {
		now := c.r.clock.Now()
		rv, err := c.reserve(ctx, tx, withRead && attempt == 0, now)
		if o.reserved, o.err = rv.reserved, err; err != nil || rv.reserved {
			return o
		}
		// A key row read in the same round trip was committed before the INSERT began, so the
		// INSERT did not wait for it; any other row is read again after the conflict.
		row, pre := rv.row, rv.pre
		if !row.liveAt(now) {
			if row, o.err = c.readKeyAfterConflict(ctx, tx, rv.snapshot); o.err != nil {
				return o
			}
			pre = nil
		}
		switch {
		case row == nil: // deleted between our INSERT and SELECT (expired elsewhere): compete again
		case !row.liveAt(now):
			if o.err = c.deleteExpired(ctx, tx, now); o.err != nil {
				return o
			}
		default:
			o.hit, o.pre = row, pre
			return o
		}
	}
	o.err = apperr.New(apperr.Internal, "idempotency: key %q kept changing under contention; retry", c.req.Key)
	return o
}

// keyedAhead is RunAhead's miss in a transaction of the runner's own (admission entered):
// prepare, work and the envelope on the client, then one plan — BEGIN, the key read, the
// reservation, the work's guarded writes, SUCCEEDED (of this transaction's reservation only),
// COMMIT. A key found taken is answered from the row read in it; a key whose row it could not
// see (the reservation waited on the unique index) is read after; one seen expired takes
// RunPrepared's path with the prepared value. A failure before anything is sent stands where
// prepare's would (afterFailedPrepare).
func (c *call[T, P]) keyedAhead(ctx context.Context) (Result[T], error) {
	r := c.r
	now := r.clock.Now() // first: the key row is never younger than the rows the work stamps
	p, err := c.ahead(ctx)
	if err != nil {
		return c.afterFailedPrepare(ctx, err)
	}
	writes := pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 8)}
	v, err := c.work(ctx, &Tx{final: &writes, held: &heldBy{owner: c.req.Owner, key: c.req.Key}, slab: &c.queued}, p)
	if err != nil {
		return c.afterFailedPrepare(ctx, err)
	}
	env, err := c.seal(v)
	if err != nil {
		return c.afterFailedPrepare(ctx, err)
	}
	var o aheadTrip[T]
	err = r.driver.WithTx(ctx, func(ctx context.Context, tx pgx.Tx, _ *pgx.Batch) error {
		return c.sendAhead(ctx, tx, &writes, env, now, &o)
	})
	switch {
	case !o.reserved && o.row.liveAt(now):
		// The hit's answer stands whatever became of the COMMIT: the transaction wrote nothing.
		return c.answered(c.hit(ctx, o.row, o.pre))
	case err != nil:
		return Result[T]{}, err
	case o.reserved:
		return c.answered(Result[T]{Value: v, Outcome: idemtype.Executed, Envelope: env, Fingerprint: c.fp}, nil)
	case o.row == nil:
		// The reservation waited for a transaction that held the key: read what it left.
		row, err := c.readKeyAfterConflictAlone(ctx, o.snapshot)
		if err != nil {
			return Result[T]{}, err
		}
		if row.liveAt(r.clock.Now()) {
			return c.answered(c.hit(ctx, row, nil))
		}
	}
	// An expired row (or one gone since): RunPrepared's path deletes it and competes again, with
	// what prepare made.
	c.prepare = func(context.Context, Querier) (P, error) { return p, nil }
	return c.inOwnTx(ctx, false)
}

// hit answers the request from a live row of its key, by SPEC §4.2's rules in order: a row
// without its result is IDEMPOTENCY_IN_PROGRESS; then the operation, the fingerprint, the policy
// and the restore (answerStored). An error after a wait on the unique index says so
// (WaitedOnIndex).
func (c *call[T, P]) hit(ctx context.Context, row *keyRow, pre restoreFunc[T]) (Result[T], error) {
	req := &c.req
	if row.Status != statusSucceeded {
		return Result[T]{}, afterWait(row.waited, inProgress(req.Key))
	}
	if row.Operation != req.Operation {
		return Result[T]{}, afterWait(row.waited, apperr.New(apperr.ScopeConflict, "key %q of owner %s is bound to operation %s, not %s; use a new key",
			req.Key, req.Owner, row.Operation, req.Operation))
	}
	same, err := sameRequest(row.Fingerprint, *req, c.fp)
	if err != nil {
		return Result[T]{}, afterWait(row.waited, err)
	}
	if !same {
		return Result[T]{}, afterWait(row.waited, apperr.New(apperr.KeyReused, "key %q was first used with a different request body; a retry must send the same body, a new request needs a new key", req.Key))
	}
	res, err := answerStored(ctx, c.policy, req.Owner, req.Key, req.Module, row.Status, row.Response, pre)
	if err != nil {
		return Result[T]{}, afterWait(row.waited, err)
	}
	res.Waited, res.Fingerprint = row.waited, c.fp
	return res, nil
}
