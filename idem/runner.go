package idem

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

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
	// batch sends the flow's plans (plan.go): which statements share a round trip.
	batch batcher
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

// shares reports whether the request may share an in-process flight: not when it asked not to,
// and never inside the caller's transaction, whatever it asked.
func (req *Request) shares() bool {
	return (req.ShareInFlight == nil || *req.ShareInFlight) && req.Tx == nil
}

// validate checks the owner, and the key when there is one, against their alphabets.
func (req *Request) validate() error {
	if err := idemtype.ValidateOwner(req.Owner); err != nil {
		return err
	}
	if req.Key == "" {
		return nil
	}
	return idemtype.ValidateKey(req.Key)
}

// call is one RunPrepared or RunAhead call.
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
	// queued holds the statements the call queues (slab.go).
	queued slab
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
	// The flow, step by step: call.run in flow.go.
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
