package idem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/store"
)

// DefaultTTL is how long a key stays bound to its first result.
const DefaultTTL = 24 * time.Hour

// Runner runs idempotent writes. One per process (per database), shared by every caller so
// in-flight sharing works.
type Runner struct {
	db        *store.DB
	clock     Clock
	ttl       time.Duration
	flights   flights
	admission *Admission
	recent    recentKeys
}

// Options configures a Runner.
type Options struct {
	TTL    time.Duration // default DefaultTTL
	Clock  Clock         // default: the system clock
	Limits Limits        // the per-key and per-owner shares of the pool (zero: defaults)
}

// NewRunner returns a runner over db.
func NewRunner(db *store.DB, opts Options) *Runner {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Clock == nil {
		opts.Clock = &OffsetClock{}
	}
	pool := db.MaxConns() // 0 for a nil db
	return &Runner{db: db, clock: opts.Clock, ttl: opts.TTL, admission: newAdmission(opts.Limits, pool)}
}

// Admission is the runner's per-key and per-owner bound on database connections.
func (r *Runner) Admission() *Admission { return r.admission }

// DB is the database the runner writes to.
func (r *Runner) DB() *store.DB { return r.db }

// Clock is the runner's clock.
func (r *Runner) Clock() Clock { return r.clock }

// TTL is the key lifetime.
func (r *Runner) TTL() time.Duration { return r.ttl }

// InFlight is the number of in-process flights now running.
func (r *Runner) InFlight() int { return r.flights.inFlight() }

// Waiting is the number of followers parked on those flights, waiting for their leaders.
func (r *Runner) Waiting() int { return int(r.flights.waiting.Load()) }

// Request identifies one idempotent call.
type Request struct {
	Owner string
	// Key is the Idempotency-Key; empty runs the work once without idempotency.
	Key string
	// Operation is the scope the key binds to, e.g. "NOTE:record:create".
	Operation string
	// Module is the route's module: restores read only inside it.
	Module string
	// Body is the request body in its canonical form (package jsonb); with Operation it makes
	// the fingerprint (version 2).
	Body []byte
	// Raw, when set, is the request as the caller received it, before its canonical encoding,
	// in any form in which equal bytes mean an equal Body (and the same validation): JoinInFlight
	// finds a flight by it while Body is still nil, so that a follower in a storm parks without
	// encoding its body.
	Raw []byte
	// BodyV1, when set, returns the body as fingerprint version 1 read it (the kernel's former
	// encoding of the same fields): a key whose stored fingerprint is version 1 is compared by
	// that rule. Nil uses Body.
	BodyV1 func() ([]byte, error)
	// EarlierBody, when set, is the same request's body in the caller's earlier canonical
	// encoding, where that differs from Body: a key whose stored version 2 fingerprint is of it
	// is the same request (a retry across the caller's upgrade replays).
	EarlierBody []byte
	// ShareInFlight: nil or true shares in-process flights; false bypasses them. An ambient
	// transaction in the context always bypasses them, whatever this says.
	ShareInFlight *bool
	// Prefetch are reads prepare needs that do not depend on the reservation: they travel in
	// its round trip (see Prefetch); prepare takes their results from them.
	Prefetch []Prefetch
}

// Result is a successful call's value and how it was obtained.
type Result[T any] struct {
	Value   T
	Outcome Outcome
	// Waited is true when a REPLAYED call first waited on the unique index for the winner.
	Waited bool
	// Envelope is the stored envelope (nil without a key).
	Envelope json.RawMessage
	// Fingerprint of the request (empty without a key).
	Fingerprint string
}

// keyRow is an idempotency_record as the runner sees it.
type keyRow struct {
	store.StoredKey
	// waited: the row's transaction was still running when this call's INSERT took its
	// snapshot (it queued behind it on the unique index).
	waited bool
}

// RunPrepared runs prepare then work once per (owner, key) (SPEC §4.2). prepare may only read;
// only the caller holding the reservation runs it. work receives the transaction's write batch:
// what it queues there travels, in order, with the SUCCEEDED update and the COMMIT in one round
// trip (statements work runs through the store at once are in the transaction too). Everything
// work writes, the reservation and the SUCCEEDED envelope commit in one transaction; any error
// rolls all of it back and caches nothing.
func RunPrepared[T, P any](ctx context.Context, r *Runner, req Request, policy ResultPolicy[T],
	prepare func(ctx context.Context) (P, error), work func(ctx context.Context, p P, b *store.Batch) (T, error)) (Result[T], error) {
	if err := ValidateOwner(req.Owner); err != nil {
		return Result[T]{}, err
	}
	if req.Key == "" {
		return runUnkeyed(ctx, r, req.Owner, prepare, work)
	}
	if err := ValidateKey(req.Key); err != nil {
		return Result[T]{}, err
	}
	call := &keyedCall[T, P]{r: r, req: req, policy: policy, prepare: prepare, work: work}
	if !sharing(ctx, &req) {
		return call.run(ctx)
	}
	k := flightKey{req.Owner, req.Key}
	f, leader := r.flights.leadOrJoin(k, req.Operation, req.Body, req.Raw)
	if !leader {
		if f != nil {
			if res, ok, err := follow[T](ctx, r, f); ok || err != nil {
				return res, err
			}
		}
		// A flight with another operation or body, or a leader that failed: the database path,
		// without sharing.
		return call.run(ctx)
	}
	var res Result[T]
	var err error
	defer func() {
		if p := recover(); p != nil {
			r.flights.finish(k, f, nil, nil, "", fmt.Errorf("leader panicked: %v", p))
			panic(p)
		}
		r.flights.finish(k, f, res.Value, res.Envelope, call.fp, err)
	}()
	res, err = call.run(ctx)
	return res, err
}

// sharing reports whether req may share an in-process flight: not when it asked not to, and
// never inside an ambient transaction, whatever it asked.
func sharing(ctx context.Context, req *Request) bool {
	return (req.ShareInFlight == nil || *req.ShareInFlight) && !store.InTx(ctx)
}

// JoinInFlight shares the value of an in-process flight running for exactly req (same owner, key,
// operation and body bytes: the same fingerprint, so it need not be computed) and reports ok. It
// needs nothing prepared, so a caller can try it before building prepare and work: in a storm,
// every follower does this much and no more before it parks, and the leader's round trips wait
// for all of them (the scheduler polls the network only when no goroutine is runnable). With
// Body nil it finds the flight by Raw (see Request.Raw). ok is
// false when there is no such flight or sharing is off for req. A leader's failure is never
// inherited: then ok is false and sharing is turned off in *req, so that RunPrepared takes the
// database path for this request. It is Await and FlightResult in one call.
func JoinInFlight[T any](ctx context.Context, r *Runner, req *Request) (res Result[T], ok bool, err error) {
	j, ok, err := r.Await(ctx, req)
	if !ok || err != nil {
		return res, ok, err
	}
	return FlightResult[T](j), true, nil
}

// Flight is a finished in-process flight a follower joined (Await): its leader succeeded.
type Flight struct{ f *flight }

// Await is JoinInFlight without taking the value: it parks on the flight running for exactly req
// until the leader finishes (or ctx ends) and reports ok when the leader succeeded; FlightResult
// then takes the value. It is not generic and keeps no result on its stack, so that a follower
// parks on a short stack: every frame a parked follower holds is stack its goroutine may have to
// grow (copy) to, and a storm's followers are a thousand fresh goroutines.
func (r *Runner) Await(ctx context.Context, req *Request) (Flight, bool, error) {
	if req.Key == "" || !sharing(ctx, req) {
		return Flight{}, false, nil
	}
	// A flight exists only for a validated owner and key, so finding one validates these.
	f := r.flights.find(flightKey{req.Owner, req.Key}, req.Operation, req.Body, req.Raw)
	if f == nil {
		return Flight{}, false, nil
	}
	if err := r.flights.wait(ctx, f); err != nil {
		return Flight{}, false, err
	}
	if f.err != nil {
		noShare := false
		req.ShareInFlight = &noShare
		return Flight{}, false, nil
	}
	return Flight{f}, true, nil
}

// Key is the flight's idempotency key: the leader's, equal to every follower's.
func (j Flight) Key() string { return j.f.key }

// Operation is the flight's operation: the leader's, equal to every follower's.
func (j Flight) Operation() string { return j.f.operation }

// FlightResult is the leader's value of flight j, shared (JOINED).
func FlightResult[T any](j Flight) Result[T] {
	f := j.f
	return Result[T]{Value: f.value.(T), Outcome: Joined, Envelope: f.envelope, Fingerprint: f.fingerprint}
}

// follow is how RunPrepared joins the flight it met (SPEC §4.3), as Await does for a caller that
// looks first: it parks until the leader finishes and shares its value (JOINED). ok is false when
// the leader failed: its error is never handed on, and the caller takes the database path itself.
func follow[T any](ctx context.Context, r *Runner, f *flight) (Result[T], bool, error) {
	if err := r.flights.wait(ctx, f); err != nil {
		return Result[T]{}, false, err
	}
	if f.err != nil {
		return Result[T]{}, false, nil
	}
	return FlightResult[T](Flight{f}), true, nil
}

// runUnkeyed runs prepare and work once in one transaction, without idempotency.
func runUnkeyed[T, P any](ctx context.Context, r *Runner, owner string, prepare func(ctx context.Context) (P, error),
	work func(ctx context.Context, p P, b *store.Batch) (T, error)) (Result[T], error) {
	var v T
	if !store.InTx(ctx) {
		s, err := r.admission.enterOwner(ctx, owner)
		if err != nil {
			return Result[T]{}, err
		}
		defer r.admission.leaveOwner(owner, s)
	}
	err := r.db.TxBatch(ctx, func(ctx context.Context, b *store.Batch) error {
		p, err := prepare(ctx)
		if err != nil {
			return err
		}
		v, err = work(ctx, p, b)
		return err
	})
	if err != nil {
		return Result[T]{}, err
	}
	return Result[T]{Value: v, Outcome: Executed}, nil
}

type keyedCall[T, P any] struct {
	r   *Runner
	req Request
	// fp is the request's fingerprint, computed when the call takes the database path (a
	// follower that joins a flight never needs one).
	fp string
	// owner and key are the request's, as statement arguments: put in an interface once for
	// the statements that send them.
	owner, key any
	policy     ResultPolicy[T]
	prepare    func(ctx context.Context) (P, error)
	work       func(ctx context.Context, p P, b *store.Batch) (T, error)
}

// run is the database path: the key read, then reservation, prepare, work and SUCCEEDED in one
// transaction, in two round trips for a fresh key: BEGIN, the key read, the reservation and the
// prefetched reads in the first; the work's writes, SUCCEEDED and COMMIT in the second. A key
// this runner answered lately (most likely a retry) is read alone first, outside any
// transaction: its replay is that one round trip.
func (c *keyedCall[T, P]) run(ctx context.Context) (Result[T], error) {
	var none Result[T]
	r, req := c.r, c.req
	c.fp = Fingerprint(req.Operation, req.Body)
	c.owner, c.key = req.Owner, req.Key
	inTx := store.InTx(ctx)
	k := flightKey{req.Owner, req.Key}
	if !inTx {
		// Beyond a few requests per key on the database path, the rest wait here without a
		// connection; and one owner holds at most its share of the pool.
		ks, err := r.admission.enterKey(ctx, k)
		if err != nil {
			return none, err
		}
		defer r.admission.leaveKey(k, ks)
		os, err := r.admission.enterOwner(ctx, req.Owner)
		if err != nil {
			return none, err
		}
		defer r.admission.leaveOwner(req.Owner, os)
	}
	// Read alone first: a key answered lately, or a session that cannot write (a hot standby
	// still replays). Inside an ambient transaction the read always travels with the
	// reservation: a hit then ends nothing, and costs that one round trip.
	readFirst := !inTx && (r.recent.has(k) || r.db.WriteRefusal() != nil)
	if readFirst {
		now := r.clock.Now()
		var pre func(result json.RawMessage) (T, bool, error)
		row, err := c.readAlone(ctx, func(q store.Querier) (*keyRow, error) {
			row, p, err := c.readKeyRow(ctx, q)
			pre = p
			return row, err
		})
		if err != nil {
			return none, err
		}
		if row != nil && row.ExpiresAt.After(now) {
			return c.answered(c.hit(ctx, row, pre))
		}
	}

	var res Result[T]
	var hitErr error
	hit := false
	err := r.db.TxBatch(ctx, func(ctx context.Context, b *store.Batch) error {
		q := r.db.Q(ctx)
		for attempt := 0; ; attempt++ {
			if attempt == 5 {
				return apperr.New(apperr.Internal, "idempotency: key %q kept changing under contention; retry", req.Key)
			}
			now := r.clock.Now()
			rv, err := c.reserve(ctx, q, !readFirst && attempt == 0, now, now.Add(r.ttl))
			if err != nil {
				return err
			}
			if rv.reserved {
				break
			}
			// The key row read in the same round trip was committed before the INSERT began, so
			// the INSERT did not wait for it; any other row is read again after the conflict.
			existing, pre := rv.row, rv.pre
			if existing == nil || !existing.ExpiresAt.After(now) {
				if existing, err = readKeyAfterConflict(ctx, q, req.Owner, req.Key, rv.snapshot); err != nil {
					return err
				}
				pre = nil
			}
			if existing == nil {
				continue // deleted between our INSERT and SELECT (expired elsewhere): compete again
			}
			if !existing.ExpiresAt.After(now) {
				if _, err := q.Exec(ctx, `DELETE FROM idempotency_record WHERE owner_id = $1 AND idempotency_key = $2 AND expires_at <= $3`,
					req.Owner, req.Key, now); err != nil {
					return fmt.Errorf("delete expired key: %w", err)
				}
				continue
			}
			// A hit wrote nothing: its transaction ends with an empty COMMIT, never a rollback,
			// whatever the answer.
			hit = true
			res, hitErr = c.hit(ctx, existing, pre)
			return nil
		}
		if err := Checkpoint(ctx, StepReserved); err != nil {
			return err
		}
		p, err := c.prepare(ctx)
		if err != nil {
			return err
		}
		v, err := c.work(ctx, p, b)
		if err != nil {
			return err
		}
		result, err := c.policy.Serialize(v)
		if err != nil {
			return fmt.Errorf("serialize %s: %w", c.policy.Name(), err)
		}
		env, err := BuildEnvelope(c.policy.Name(), c.policy.Fields(), result)
		if err != nil {
			return err
		}
		if err := Checkpoint(ctx, StepSucceeded); err != nil {
			return err
		}
		// Guarded on the server: no PROCESSING row to update fails the statement, and with it
		// the transaction, though the COMMIT travels in the same round trip.
		b.Queue(StepSuccess, "record success", errReservationVanished,
			`WITH u AS (UPDATE idempotency_record SET status = 'SUCCEEDED', response = $3, updated_at = $4
				WHERE owner_id = $1 AND idempotency_key = $2 AND status = 'PROCESSING' RETURNING 1)
			SELECT 1 / count(*) FROM u`, c.owner, c.key, env, r.clock.Now())
		res = Result[T]{Value: v, Outcome: Executed, Envelope: env, Fingerprint: c.fp}
		return nil
	})
	if hit {
		// The hit's answer stands whatever became of its empty COMMIT: there was nothing to
		// commit.
		return c.answered(res, hitErr)
	}
	if err != nil {
		return none, err
	}
	return c.answered(res, nil)
}

// answered passes an answer that came from the key's row (executed, replayed, or refused by the
// hit rules) through, remembering the key: a request for it again is most likely a retry.
func (c *keyedCall[T, P]) answered(res Result[T], err error) (Result[T], error) {
	c.r.recent.add(flightKey{c.req.Owner, c.req.Key})
	return res, err
}

// readKeyRow reads the key row on q: with the policy's own statement (the row and the rows its
// result references) when it has one.
func (c *keyedCall[T, P]) readKeyRow(ctx context.Context, q store.Querier) (*keyRow, func(result json.RawMessage) (T, bool, error), error) {
	if rp, ok := c.policy.(Replayer[T]); ok {
		rep, err := rp.ReadReplay(ctx, q, store.ReplayParams{Owner: c.req.Owner, Key: c.req.Key, Module: c.req.Module})
		if err != nil || !rep.Found {
			return nil, nil, err
		}
		return &keyRow{StoredKey: rep.Key}, rep.Restore, nil
	}
	row, err := readKey(ctx, q, c.req.Owner, c.req.Key)
	return row, nil, err
}

// reservation is what the reservation's round trip returned.
type reservation[T any] struct {
	reserved bool
	// snapshot is the one the INSERT started with (to tell later whether it waited).
	snapshot string
	// row is the key row read ahead of the INSERT in the same round trip (nil: none, or not read),
	// pre its replay's restore.
	row *keyRow
	pre func(result json.RawMessage) (T, bool, error)
}

// reserve sends the reservation's round trip on q (the transaction): the key read first when
// withRead, then the INSERT of the PROCESSING row, then the request's prefetched reads, guarded
// on the reservation.
func (c *keyedCall[T, P]) reserve(ctx context.Context, q store.Querier, withRead bool, now, expires time.Time) (rv reservation[T], err error) {
	req := c.req
	tail := pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 1+len(req.Prefetch))}
	tail.Queue(reserveSQL, c.owner, c.key, req.Operation, c.fp, now, expires)
	for _, p := range req.Prefetch {
		p.QueueHeld(&tail, req.Owner, req.Key)
	}
	var br pgx.BatchResults
	if withRead {
		ahead := &aheadOf{q: q, tail: &tail}
		rv.row, rv.pre, err = c.readKeyRow(ctx, ahead)
		if ahead.br == nil { // the policy sent nothing: the tail goes alone
			ahead.br = q.SendBatch(ctx, &tail)
		}
		br = ahead.br
		if err != nil {
			_ = br.Close()
			return rv, err
		}
	} else {
		br = q.SendBatch(ctx, &tail)
	}
	defer func() {
		if cerr := br.Close(); err == nil && cerr != nil {
			err = &store.StepError{Step: StepReserved, Err: fmt.Errorf("reserve key: %w", cerr)}
		}
	}()
	if err := br.QueryRow().Scan(&rv.reserved, &rv.snapshot); err != nil {
		return rv, &store.StepError{Step: StepReserved, Err: fmt.Errorf("reserve key: %w", err)}
	}
	for _, p := range req.Prefetch {
		if err := p.TakeHeld(br, rv.reserved); err != nil {
			return rv, err
		}
	}
	return rv, nil
}

// readAlone runs the success-cache read on its own, outside any transaction, on a pooled
// connection acquired within the store's acquire timeout (OVERLOADED past it).
func (c *keyedCall[T, P]) readAlone(ctx context.Context, fn func(q store.Querier) (*keyRow, error)) (*keyRow, error) {
	conn, err := c.r.db.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	return fn(conn)
}

// hit answers the request from a live row of its key, by the rules of SPEC §4.2 in order: a row
// without its result is IDEMPOTENCY_IN_PROGRESS; then the operation, the fingerprint, the policy
// and the restore (answerStored). An error after a wait on the unique index says so.
func (c *keyedCall[T, P]) hit(ctx context.Context, row *keyRow,
	pre func(result json.RawMessage) (T, bool, error)) (Result[T], error) {
	if row.Status != "SUCCEEDED" {
		return Result[T]{}, afterWait(row.waited, inProgress(c.req.Key))
	}
	if row.Operation != c.req.Operation {
		return Result[T]{}, afterWait(row.waited, apperr.New(apperr.ScopeConflict, "key %q of owner %s is bound to operation %s, not %s; use a new key",
			c.req.Key, c.req.Owner, row.Operation, c.req.Operation))
	}
	same, err := sameRequest(row.Fingerprint, c.req, c.fp)
	if err != nil {
		return Result[T]{}, afterWait(row.waited, err)
	}
	if !same {
		return Result[T]{}, afterWait(row.waited, apperr.New(apperr.KeyReused, "key %q was first used with a different request body; a retry must send the same body, a new request needs a new key", c.req.Key))
	}
	res, err := answerStored(ctx, c.policy, c.req.Owner, c.req.Key, c.req.Module, row.Status, row.Response, pre)
	if err != nil {
		return Result[T]{}, afterWait(row.waited, err)
	}
	res.Waited, res.Fingerprint = row.waited, c.fp
	return res, nil
}

// ReplayStored is what the runner answers a request that repeats the first request of a live
// (unexpired) stored key — same operation, same fingerprint: IDEMPOTENCY_IN_PROGRESS for a row
// without its result (PROCESSING), else the stored envelope restored by policy, outcome
// REPLAYED, the envelope being the stored bytes. The runner answers every such hit through the
// same code; key inspection calls it to show what a retry of the key gets.
func ReplayStored[T any](ctx context.Context, policy ResultPolicy[T], owner, key, module, status string, response []byte) (Result[T], error) {
	return answerStored(ctx, policy, owner, key, module, status, response, nil)
}

func answerStored[T any](ctx context.Context, policy ResultPolicy[T], owner, key, module, status string, response []byte,
	pre func(result json.RawMessage) (T, bool, error)) (Result[T], error) {
	if status != "SUCCEEDED" {
		return Result[T]{}, inProgress(key)
	}
	v, err := restoreEnvelope(ctx, policy, owner, module, response, pre)
	if err != nil {
		return Result[T]{}, err
	}
	// jsonb hands the envelope back in its own text, which is the canonical form BuildEnvelope
	// wrote (package jsonb pins the two together): the first call's bytes.
	return Result[T]{Value: v, Outcome: Replayed, Envelope: response}, nil
}

var errReservationVanished = errors.New("idempotency: the reservation vanished before success was recorded")

// waitedError is an error a request got after it waited on the unique index for the
// transaction that held its key (the same reserved_xid fact that sets Result.Waited): a storm
// counts the wait alike for REPLAYED and for IDEMPOTENCY_IN_PROGRESS or a scope conflict.
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

func readKey(ctx context.Context, q store.Querier, owner, key string) (*keyRow, error) {
	var row keyRow
	err := q.QueryRow(ctx, `SELECT operation, fingerprint, status, response, expires_at
		FROM idempotency_record WHERE owner_id = $1 AND idempotency_key = $2`, owner, key).
		Scan(&row.Operation, &row.Fingerprint, &row.Status, &row.Response, &row.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	return &row, nil
}

// reserveSQL inserts the PROCESSING row. If another transaction holds the key, PostgreSQL makes
// this INSERT wait on the unique index until that transaction ends. It returns whether this call
// now holds the key, and the snapshot the INSERT started with (to tell later whether it waited).
// A key row already committed is seen first (NOT EXISTS) and no row is formed at all: forming one
// evaluates reserved_xid's default, pg_current_xact_id(), which gives the transaction an id — and
// a hit's transaction, which writes nothing, would then commit through the WAL.
const reserveSQL = `WITH ins AS (
			INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, created_at, expires_at, updated_at)
			SELECT $1, $2, $3, $4, 'PROCESSING', $5::timestamptz, $6::timestamptz, $5::timestamptz
			WHERE NOT EXISTS (SELECT 1 FROM idempotency_record WHERE owner_id = $1 AND idempotency_key = $2)
			ON CONFLICT (owner_id, idempotency_key) DO NOTHING
			RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM ins), pg_current_snapshot()::text`

// readKeyAfterConflict reads the row that beat our INSERT. waited is true when the winner's
// transaction was still running when our INSERT took its snapshot: we queued behind it on the
// unique index.
func readKeyAfterConflict(ctx context.Context, q store.Querier, owner, key, snapshot string) (*keyRow, error) {
	var row keyRow
	var visible bool
	err := q.QueryRow(ctx, `SELECT operation, fingerprint, status, response, expires_at,
			pg_visible_in_snapshot(reserved_xid, $3::pg_snapshot)
		FROM idempotency_record WHERE owner_id = $1 AND idempotency_key = $2`, owner, key, snapshot).
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
