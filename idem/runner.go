package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
)

// DefaultTTL is how long a key stays bound to its first result.
const DefaultTTL = 24 * time.Hour

// DefaultSchema is the schema of the runner's table when Options.Schema is empty.
const DefaultSchema = "public"

// Runner runs idempotent calls. Make one per process and database and share it: in-process
// sharing (SPEC §4.3) and the per-key and per-owner bounds work across the calls of one Runner.
type Runner struct {
	driver    Driver
	schema    string
	sql       statements
	clock     Clock
	ttl       time.Duration
	flights   flights
	admission *admission
	recent    recentKeys
}

// Options configures a Runner.
type Options struct {
	// Schema is the schema that holds the runner's table (where Migrate created it). Every
	// statement names it, so nothing depends on a session's search_path. "": DefaultSchema.
	Schema string
	// TTL is how long a key stays bound to its first result (SPEC §4.1). 0: DefaultTTL.
	TTL time.Duration
	// Clock is the runner's notion of now (reservations, expiry). nil: the system clock.
	Clock Clock
	// Limits bound what one key and one owner take from the pool (zero: defaults).
	Limits Limits
}

// NewRunner returns a runner whose transactions the driver runs (PoolDriver for a pgx pool).
func NewRunner(d Driver, opts Options) *Runner {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Clock == nil {
		opts.Clock = &OffsetClock{}
	}
	if opts.Schema == "" {
		opts.Schema = DefaultSchema
	}
	return &Runner{driver: d, schema: opts.Schema, sql: newStatements(pgx.Identifier{opts.Schema, Table}.Sanitize()),
		clock: opts.Clock, ttl: opts.TTL, admission: newAdmission(opts.Limits, d.MaxConns())}
}

// Clock is the runner's clock.
func (r *Runner) Clock() Clock { return r.clock }

// TTL is how long a key stays bound to its first result.
func (r *Runner) TTL() time.Duration { return r.ttl }

// Schema is the schema of the runner's table.
func (r *Runner) Schema() string { return r.schema }

// Table is the runner's table, schema-qualified and quoted for SQL: what a Replayer's statement
// or a Prefetch's guard reads.
func (r *Runner) Table() string { return pgx.Identifier{r.schema, Table}.Sanitize() }

// Stats is what a Runner is doing now, for metrics.
type Stats struct {
	// InFlight is the number of in-process flights running (calls other calls may join).
	InFlight int
	// Followers is the number of calls parked on those flights, waiting for their leaders.
	Followers int
	// KeyWaiting is the number of calls waiting in-process for their key's turn on the database
	// path (Limits.KeyMaxConns).
	KeyWaiting int
	// OwnerConns is the number of owner shares of the pool held now, over all owners.
	OwnerConns int
	// OwnerMaxConns is the per-owner share in force.
	OwnerMaxConns int
}

// Stats reads the runner's counters.
func (r *Runner) Stats() Stats {
	return Stats{InFlight: r.flights.inFlight(), Followers: int(r.flights.waiting.Load()),
		KeyWaiting: int(r.admission.keyWaiting.Load()), OwnerConns: int(r.admission.ownerInUse.Load()), OwnerMaxConns: r.admission.ownerMax}
}

// Request identifies one idempotent call.
type Request struct {
	// Owner is whose key it is (1–128 of [A-Za-z0-9._:@-]): different owners never meet.
	Owner string
	// Key is the Idempotency-Key (1–255 visible ASCII); empty runs the work once, without
	// idempotency.
	Key string
	// Operation is the scope the key binds to: the module, the action and the record boundary
	// where there is one ("shop:order:create", "NOTE:record:01J…:patch"). A key used again for
	// another operation is IDEMPOTENCY_SCOPE_CONFLICT.
	Operation string
	// Module is the route's module: a policy's Restore reads only inside it.
	Module string
	// Body is the request body in a canonical form (equal requests, equal bytes: package jsonb's
	// Canonical for JSON); with Operation it makes the fingerprint. A key used again with another
	// body is IDEMPOTENCY_KEY_REUSED.
	Body []byte
	// BodyV1, when set, returns the body as fingerprint version 1 read it: a key whose stored
	// fingerprint is version 1 is compared by that rule. Nil uses Body.
	BodyV1 func() ([]byte, error)
	// EarlierBody, when set, is the same request's body in the caller's earlier canonical
	// encoding, where that differs from Body: a key whose stored version 2 fingerprint is of it
	// is the same request (a retry across the caller's upgrade replays).
	EarlierBody []byte
	// ShareInFlight: nil or true shares in-process flights (SPEC §4.3); false bypasses them.
	ShareInFlight *bool
	// Prefetch are reads prepare needs that do not depend on the reservation: they travel in its
	// round trip (see Prefetch).
	Prefetch []Prefetch
	// Tx, when set, is the caller's own transaction: the call runs inside it (River's InsertTx
	// way) and the caller commits — the reservation, the work's writes and the success row with
	// whatever else the caller writes. Nothing is shared in-process in a caller's transaction,
	// whatever ShareInFlight says. Nil: the runner runs the call in a transaction of its own.
	//
	// A call that fails after reserving its key makes Tx fail on the server, so COMMIT answers
	// ROLLBACK (pgx.ErrTxCommitRollback): neither the PROCESSING reservation nor the work's writes
	// can commit. To go on after a failed call, run it under a savepoint of your own (tx.Begin).
	// Tx must be READ COMMITTED (PostgreSQL's default): under REPEATABLE READ or SERIALIZABLE a
	// key reserved concurrently by another transaction fails the reservation with SQLSTATE 40001
	// (a *pgconn.PgError inside the returned error), and the whole transaction must be retried.
	Tx pgx.Tx
}

// Result is a successful call's value and how it was obtained.
type Result[T any] struct {
	Value   T
	Outcome idemtype.Outcome
	// Waited is true when a REPLAYED call first waited on the unique index for the winner.
	Waited bool
	// Envelope is the stored envelope (nil without a key): the same bytes for the first call and
	// every replay.
	Envelope json.RawMessage
	// Fingerprint of the request (empty without a key).
	Fingerprint string
}

// Run is RunPrepared without a prepare step: work validates and writes.
func Run[T any](ctx context.Context, r *Runner, req Request, policy ResultPolicy[T],
	work func(ctx context.Context, tx *Tx) (T, error)) (Result[T], error) {
	return RunPrepared(ctx, r, req, policy, prepareNothing, func(ctx context.Context, tx *Tx, _ struct{}) (T, error) {
		return work(ctx, tx)
	})
}

func prepareNothing(context.Context, Querier) (struct{}, error) { return struct{}{}, nil }

// RunPrepared runs prepare then work at most once per (owner, key) (SPEC §4.2), and returns the
// first result to every call of the key until it expires.
//
// A key with a committed SUCCEEDED row is a hit: its operation, fingerprint and policy name are
// checked in that order and the policy restores the first result (REPLAYED); prepare and work do
// not run and nothing is written. Otherwise the call reserves the key (a PROCESSING row, waiting
// on the unique index while another transaction holds it), runs prepare (reads only, on the
// transaction: validation and normalisation, never a write) and work, stores the policy's reference as the SUCCEEDED envelope, and commits
// all of it in one transaction (EXECUTED). Any error rolls everything back, the reservation
// included: no failure is cached and the key is free again. Concurrent calls of the same
// request in this process share one flight (JOINED).
func RunPrepared[T, P any](ctx context.Context, r *Runner, req Request, policy ResultPolicy[T],
	prepare func(ctx context.Context, q Querier) (P, error), work func(ctx context.Context, tx *Tx, p P) (T, error)) (Result[T], error) {
	return (&call[T, P]{r: r, req: req, policy: policy, prepare: prepare, work: work}).run(ctx)
}

// RunAhead is RunPrepared for a call whose prepare reads nothing (SPEC §4.2's prepare of a
// create: a deterministic validation and normalisation of the request): a fresh key takes one
// round trip. prepare and work run on the client before anything is sent; then BEGIN, the key
// read, the reservation, the work's queued writes, SUCCEEDED and COMMIT go in one round trip.
// Each queued write must do nothing unless this transaction won the reservation (guard it with
// HeldGuard's condition; Tx.HeldBy names the reservation): behind a key that turns out taken they
// all do nothing, the transaction commits nothing, and the key's row read in the same round trip
// answers the call as RunPrepared's hit would (REPLAYED, or the hit rules' errors). work may run
// no statement (Tx's Exec, Query… fail): it only queues.
//
// SPEC §4.2's order holds: prepare's result is used only where the reservation is won; a failed
// prepare or work changes nothing for a key that is taken — the call then takes RunPrepared's
// path with the error standing where prepare's would (reserve, then fail and roll back, or meet
// the key's row and answer from it), so a replay is still the first result and a miss leaves
// nothing behind. A key this runner answered lately is read alone first, prepare not run at all,
// as in RunPrepared. In the caller's transaction (Request.Tx) the call is RunPrepared's.
func RunAhead[T, P any](ctx context.Context, r *Runner, req Request, policy ResultPolicy[T],
	prepare func(ctx context.Context) (P, error), work func(ctx context.Context, tx *Tx, p P) (T, error)) (Result[T], error) {
	c := &call[T, P]{r: r, req: req, policy: policy, ahead: prepare, work: work,
		prepare: func(ctx context.Context, _ Querier) (P, error) { return prepare(ctx) }}
	return c.run(ctx)
}

// run is a call from the start: the owner and key checked, then unkeyed, keyed, or keyed
// through an in-process flight.
func (c *call[T, P]) run(ctx context.Context) (Result[T], error) {
	r, req := c.r, c.req
	if err := idemtype.ValidateOwner(req.Owner); err != nil {
		return Result[T]{}, err
	}
	if req.Key == "" {
		return c.unkeyed(ctx)
	}
	if err := idemtype.ValidateKey(req.Key); err != nil {
		return Result[T]{}, err
	}
	if !req.shares() {
		return c.keyed(ctx)
	}
	k := flightKey{req.Owner, req.Key}
	f, leader := r.flights.leadOrJoin(k, req.Operation, req.Body)
	if !leader {
		if f != nil {
			if res, ok, err := follow[T](ctx, r, f); ok || err != nil {
				return res, err
			}
		}
		// A flight with another operation or body, or a leader that failed: the database path,
		// without sharing.
		return c.keyed(ctx)
	}
	var res Result[T]
	var err error
	defer func() {
		if p := recover(); p != nil {
			r.flights.finish(k, f, nil, nil, "", fmt.Errorf("leader panicked: %v", p))
			panic(p)
		}
		r.flights.finish(k, f, res.Value, res.Envelope, c.fp, err)
	}()
	res, err = c.keyed(ctx)
	return res, err
}

// shares reports whether the request may share an in-process flight: not when it asked not to,
// and never inside the caller's transaction, whatever it asked.
func (req *Request) shares() bool {
	return (req.ShareInFlight == nil || *req.ShareInFlight) && req.Tx == nil
}

// follow joins the flight f it met (SPEC §4.3): it parks until the leader finishes and shares
// its value (JOINED). ok is false when the leader failed: its error is never handed on, and the
// caller takes the database path itself.
func follow[T any](ctx context.Context, r *Runner, f *flight) (Result[T], bool, error) {
	if err := r.flights.wait(ctx, f); err != nil {
		return Result[T]{}, false, err
	}
	if f.err != nil {
		return Result[T]{}, false, nil
	}
	return Result[T]{Value: f.value.(T), Outcome: idemtype.Joined, Envelope: f.envelope, Fingerprint: f.fingerprint}, true, nil
}

// call is one RunPrepared call past its flight.
type call[T, P any] struct {
	r   *Runner
	req Request
	// fp is the request's fingerprint, computed when the call takes the database path.
	fp      string
	policy  ResultPolicy[T]
	prepare func(ctx context.Context, q Querier) (P, error)
	work    func(ctx context.Context, tx *Tx, p P) (T, error)
	// ahead, for a RunAhead call, is its prepare, which reads nothing: run before the round
	// trip, its result used only where the reservation is won.
	ahead func(ctx context.Context) (P, error)
}

// execute runs prepare and work in tx; work's queued writes go to final.
func (c *call[T, P]) execute(ctx context.Context, tx pgx.Tx, final *pgx.Batch) (T, error) {
	p, err := c.prepare(ctx, tx)
	if err != nil {
		var zero T
		return zero, err
	}
	return c.work(ctx, &Tx{tx: tx, final: final}, p)
}

// unkeyed runs prepare and work once in one transaction, without idempotency.
func (c *call[T, P]) unkeyed(ctx context.Context) (Result[T], error) {
	var v T
	if c.req.Tx != nil {
		var final pgx.Batch
		v, err := c.execute(ctx, c.req.Tx, &final)
		if err == nil {
			err = sendFinal(ctx, c.req.Tx, &final)
		}
		if err != nil {
			return Result[T]{}, err
		}
		return Result[T]{Value: v, Outcome: idemtype.Executed}, nil
	}
	s, err := c.r.admission.enterOwner(ctx, c.req.Owner)
	if err != nil {
		return Result[T]{}, err
	}
	defer c.r.admission.leaveOwner(c.req.Owner, s)
	err = c.r.driver.WithTx(ctx, func(ctx context.Context, tx pgx.Tx, final *pgx.Batch) error {
		var err error
		v, err = c.execute(ctx, tx, final)
		return err
	})
	if err != nil {
		return Result[T]{}, err
	}
	return Result[T]{Value: v, Outcome: idemtype.Executed}, nil
}

// keyed is the database path of a keyed call (SPEC §4.2). In a transaction of the runner's own
// a fresh key takes two round trips: BEGIN, the key read, the reservation and the prefetched
// reads in the first; the work's queued writes, SUCCEEDED and COMMIT in the second. A key this
// runner answered lately (most likely a retry) is read alone first, outside any transaction: its
// replay is that one round trip. A hit is answered after its transaction ended (it wrote
// nothing), so a policy's Restore never waits for a connection while holding one.
func (c *call[T, P]) keyed(ctx context.Context) (Result[T], error) {
	r, req := c.r, &c.req
	c.fp = Fingerprint(req.Operation, req.Body)
	if req.Tx != nil {
		return c.inCallersTx(ctx)
	}
	k := flightKey{req.Owner, req.Key}
	// Beyond a few requests per key on the database path, the rest wait here without a
	// connection; and one owner holds at most its share of the pool.
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

	// Read alone first: a key answered lately, or a driver that cannot write (a hot standby
	// still replays).
	readFirst := r.recent.has(k) || !r.driver.Writable()
	if readFirst {
		now := r.clock.Now()
		var row *keyRow
		var pre restoreFunc[T]
		err := r.driver.WithConn(ctx, func(q Querier) error {
			var err error
			row, pre, err = c.readKeyRow(ctx, q)
			return err
		})
		if err != nil {
			return Result[T]{}, err
		}
		if row != nil && row.ExpiresAt.After(now) {
			return c.answered(c.hit(ctx, row, pre))
		}
	}
	if c.ahead != nil {
		return c.keyedAhead(ctx)
	}
	return c.inOwnTx(ctx, !readFirst)
}

// inOwnTx is the keyed path in a transaction of the runner's own, prepare run after the
// reservation: two round trips for a fresh key (see keyed).
func (c *call[T, P]) inOwnTx(ctx context.Context, readWithReservation bool) (Result[T], error) {
	var o step[T]
	err := c.r.driver.WithTx(ctx, func(ctx context.Context, tx pgx.Tx, final *pgx.Batch) error {
		o = c.reserveAndWork(ctx, tx, final, readWithReservation)
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

// inCallersTx is the keyed path inside the caller's transaction: no admission (the caller holds
// its connection already), the key read always sent with the reservation, the work's queued
// writes and the success row sent in one round trip at the end; the caller commits.
func (c *call[T, P]) inCallersTx(ctx context.Context) (Result[T], error) {
	var final pgx.Batch
	o := c.reserveAndWork(ctx, c.req.Tx, &final, true)
	if o.hit != nil {
		return c.answered(c.hit(ctx, o.hit, o.pre))
	}
	if o.err != nil {
		if o.reserved {
			abortCallersTx(ctx, c.req.Tx)
		}
		return Result[T]{}, o.err
	}
	if err := sendFinal(ctx, c.req.Tx, &final); err != nil {
		abortCallersTx(ctx, c.req.Tx)
		return Result[T]{}, err
	}
	return c.answered(o.res, nil)
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

// step is what reserveAndWork ended with: a hit to answer, an executed result, or an error.
type step[T any] struct {
	hit *keyRow
	pre restoreFunc[T]
	res Result[T]
	err error
	// reserved: this transaction inserted the key's PROCESSING row (an error after it must not
	// let the transaction commit).
	reserved bool
}

// restoreFunc restores a result from rows read with the key (Replay.Restore).
type restoreFunc[T any] func(result json.RawMessage) (T, bool, error)

// reserveAndWork is SPEC §4.2's miss inside transaction tx: reserve the key (or meet its row),
// then prepare, work, and the success row queued in final behind the work's writes.
func (c *call[T, P]) reserveAndWork(ctx context.Context, tx pgx.Tx, final *pgx.Batch, readWithReservation bool) (o step[T]) {
	r, req := c.r, &c.req
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			o.err = apperr.New(apperr.Internal, "idempotency: key %q kept changing under contention; retry", req.Key)
			return o
		}
		now := r.clock.Now()
		rv, err := c.reserve(ctx, tx, readWithReservation && attempt == 0, now, now.Add(r.ttl))
		o.reserved = rv.reserved
		if err != nil {
			o.err = err
			return o
		}
		if rv.reserved {
			break
		}
		// The key row read in the same round trip was committed before the INSERT began, so the
		// INSERT did not wait for it; any other row is read again after the conflict.
		existing, pre := rv.row, rv.pre
		if existing == nil || !existing.ExpiresAt.After(now) {
			if existing, err = c.readKeyAfterConflict(ctx, tx, rv.snapshot); err != nil {
				o.err = err
				return o
			}
			pre = nil
		}
		if existing == nil {
			continue // deleted between our INSERT and SELECT (expired elsewhere): compete again
		}
		if !existing.ExpiresAt.After(now) {
			if _, err := tx.Exec(ctx, r.sql.deleteExpired, req.Owner, req.Key, now); err != nil {
				o.err = &StepError{Step: StepReserve, Err: fmt.Errorf("delete expired key: %w", err)}
				return o
			}
			continue
		}
		o.hit, o.pre = existing, pre
		return o
	}
	v, err := c.execute(ctx, tx, final)
	if err != nil {
		o.err = err
		return o
	}
	result, err := c.policy.Serialize(v)
	if err != nil {
		o.err = fmt.Errorf("serialize %s: %w", c.policy.Name(), err)
		return o
	}
	env, err := BuildEnvelope(c.policy.Name(), c.policy.Fields(), result)
	if err != nil {
		o.err = err
		return o
	}
	// Guarded on the server: no PROCESSING row to update fails the statement, and with it the
	// transaction, though the COMMIT travels in the same round trip.
	final.Queue(r.sql.success, req.Owner, req.Key, env, r.clock.Now()).Fn = readSuccess
	o.res = Result[T]{Value: v, Outcome: idemtype.Executed, Envelope: env, Fingerprint: c.fp}
	return o
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

// sendFinal sends what a call in the caller's transaction queued, in one round trip.
func sendFinal(ctx context.Context, tx pgx.Tx, final *pgx.Batch) error {
	if final.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, final).Close()
}

// answered passes an answer that came from the key's row (executed, replayed, or refused by the
// hit rules) through, remembering the key: a request for it again is most likely a retry.
func (c *call[T, P]) answered(res Result[T], err error) (Result[T], error) {
	c.r.recent.add(flightKey{c.req.Owner, c.req.Key})
	return res, err
}

// keyRow is a key's row as the runner decides on it.
type keyRow struct {
	StoredKey
	// waited: the row's transaction was still running when this call's INSERT took its snapshot
	// (it queued behind it on the unique index).
	waited bool
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

// reservation is what the reservation's round trip returned.
type reservation[T any] struct {
	reserved bool
	// snapshot is the one the INSERT started with (to tell later whether it waited).
	snapshot string
	// row is the key row read ahead of the INSERT in the same round trip (nil: none, or not
	// read), pre its replay's restore.
	row *keyRow
	pre restoreFunc[T]
}

// reserve sends the reservation's round trip on tx: the key read first when withRead, then the
// INSERT of the PROCESSING row, then the request's prefetched reads, guarded on the reservation.
func (c *call[T, P]) reserve(ctx context.Context, tx pgx.Tx, withRead bool, now, expires time.Time) (rv reservation[T], err error) {
	req := &c.req
	tail := pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 1+len(req.Prefetch))}
	tail.Queue(c.r.sql.reserve, req.Owner, req.Key, req.Operation, c.fp, now, expires)
	for _, p := range req.Prefetch {
		p.QueueHeld(&tail, req.Owner, req.Key)
	}
	var br pgx.BatchResults
	if withRead {
		ahead := &aheadOf{q: tx, tail: &tail}
		rv.row, rv.pre, err = c.readKeyRow(ctx, ahead)
		if ahead.br == nil { // the policy sent nothing: the tail goes alone
			ahead.br = tx.SendBatch(ctx, &tail)
		}
		br = ahead.br
		if err != nil {
			_ = br.Close()
			return rv, err
		}
	} else {
		br = tx.SendBatch(ctx, &tail)
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

// hit answers the request from a live row of its key, by the rules of SPEC §4.2 in order: a row
// without its result is IDEMPOTENCY_IN_PROGRESS; then the operation, the fingerprint, the policy
// and the restore. An error after a wait on the unique index says so (WaitedOnIndex).
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

// ReplayStored is what the runner answers a request that repeats the first request of a live
// stored key — same operation, same fingerprint: IDEMPOTENCY_IN_PROGRESS for a row without its
// result (PROCESSING), else the stored envelope restored by policy, outcome REPLAYED, the
// envelope being the stored bytes. The runner answers every such hit through the same code; an
// inspector calls it to show what a retry of the key gets.
func ReplayStored[T any](ctx context.Context, policy ResultPolicy[T], owner, key, module, status string, response []byte) (Result[T], error) {
	return answerStored(ctx, policy, owner, key, module, status, response, nil)
}

func answerStored[T any](ctx context.Context, policy ResultPolicy[T], owner, key, module, status string, response []byte,
	pre restoreFunc[T]) (Result[T], error) {
	if status != statusSucceeded {
		return Result[T]{}, inProgress(key)
	}
	v, err := restoreEnvelope(ctx, policy, owner, module, response, pre)
	if err != nil {
		return Result[T]{}, err
	}
	// jsonb hands the envelope back in its own text, which is the canonical form BuildEnvelope
	// wrote (package jsonb pins the two together): the first call's bytes.
	return Result[T]{Value: v, Outcome: idemtype.Replayed, Envelope: response}, nil
}

const statusSucceeded = "SUCCEEDED"

// The runner's own steps, as a StepError names them.
const (
	// StepReserve is the reservation: the key's PROCESSING row (or the deletion of an expired one).
	StepReserve = "reservation"
	// StepSuccess is the success row: the key's SUCCEEDED envelope, sent with COMMIT.
	StepSuccess = "success"
)

// StepError is the failure of one step of a call's transaction: the runner's own (StepReserve,
// StepSuccess), or a write a driver or a caller queued under a step name of its own. Its text is
// the failed statement's ("reserve key: …").
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

var errReservationVanished = errors.New("idempotency: the reservation vanished before success was recorded")

// waitedError is an error a request got after it waited on the unique index for the
// transaction that held its key (the same reserved_xid fact that sets Result.Waited).
type waitedError struct{ error }

func (e waitedError) Unwrap() error { return e.error }

func afterWait(waited bool, err error) error {
	if !waited {
		return err
	}
	return waitedError{err}
}

// WaitedOnIndex reports whether err came after a wait on the unique index for another
// transaction holding the key (Result.Waited for a call that failed).
func WaitedOnIndex(err error) bool {
	var w waitedError
	return errors.As(err, &w)
}

func inProgress(key string) error {
	return apperr.New(apperr.InProgress, "key %q is reserved by a request that did not finish (a leftover PROCESSING row); it is never re-executed and frees itself when it expires", key)
}
