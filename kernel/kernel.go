// The kernel and what every write shares. Each write has its own file (create.go, patch.go,
// feature.go, review.go; restore.go replays a stored key); their common steps are in write.go.

package kernel

import (
	"context"
	"crypto/rand"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/store"
)

// Kernel writes records, revisions, executions, reviews and audit events through the runner,
// one transaction per request.
type Kernel struct {
	db       *store.DB
	runner   *idem.Runner
	Registry *Registry

	recordPolicy recordSnapshotPolicy
	reviewPolicy commitmentReviewPolicy
	observe      func(step string)
	faults       FaultFunc
	ids          *idSource
	// sharing parks identical concurrent writes on one leader (share.go).
	sharing *sharing
}

// Options configures a Kernel.
type Options struct {
	// Observe, when set, is told of each prepare-time step ("prepare", "read-current",
	// "module-rules"); tests use it to prove a cache hit skips them all.
	Observe func(step string)
	// Runner configures the kernel's idempotency runner (TTL, clock, limits). Its schema is the
	// database's: the runner's statements name the schema that holds idemwork's tables.
	Runner idem.Options
}

// New returns a kernel writing to db through an idempotency runner of its own, built on the
// runner library's public API with db as its driver.
func New(db *store.DB, reg *Registry, opts Options) *Kernel {
	ro := opts.Runner
	if ro.Schema == "" {
		ro.Schema = db.Connection().Schema
	}
	k := &Kernel{db: db, runner: idem.NewRunner(db, ro), Registry: reg, observe: opts.Observe,
		ids: &idSource{entropy: ulid.Monotonic(rand.Reader, 0)}, sharing: &sharing{}}
	k.recordPolicy = recordSnapshotPolicy{k}
	k.reviewPolicy = commitmentReviewPolicy{k}
	return k
}

// idSource hands out ULIDs, monotonic within the process.
type idSource struct {
	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
}

// FaultFunc decides whether a step of the commit unit fails: consulted after each step (see the
// Step constants) with the write's context, a non-nil error fails that step as a real error
// would, and the whole transaction rolls back. A storm's --fail-first and --hold inject through
// it, as the fault tests do.
type FaultFunc func(ctx context.Context, step string) error

// WithFaults returns a kernel over the same database, runner and registry whose writes consult f
// after each step of the commit unit. The receiver is unchanged.
func (k *Kernel) WithFaults(f FaultFunc) *Kernel {
	c := *k
	c.faults = f
	return &c
}

// checkpoint reports the end of a step: the injected failure for it, if any.
func (k *Kernel) checkpoint(ctx context.Context, step string) error {
	if k.faults == nil {
		return nil
	}
	return k.faults(ctx, step)
}

// Steps of the commit unit, in order, as a FaultFunc is told of them after each
// (StepSucceeded before the success row). A write queued in the transaction keeps the step it
// belongs to: when the server refuses it, the request fails with an *idem.StepError of that step.
const (
	StepReserved  = idem.StepReserve // the runner's own step, named in the kernel's list so a FaultFunc sees every step in one place
	StepRecord    = "record"
	StepRevision  = "revision"
	StepExecution = "execution" // the feature execution and, for an outbox feature, its message
	StepReview    = "review"
	StepAudit     = "audit"
	StepSucceeded = "before-succeeded"
)

// runWrite runs a kernel write through the runner (idem.RunPrepared): in ctx's ambient
// transaction when it carries one (SPEC §3: the call joins it, and shares no flight), else in a
// transaction of the runner's own, whose context carries it as the ambient one, so the
// kernel's repositories (the prefetched record's Get, a policy's Restore) reach it. work queues
// its writes in a store.Batch; they travel with the success row and COMMIT.
func runWrite[T, P any](ctx context.Context, k *Kernel, req idem.Request, policy idem.ResultPolicy[T],
	prepare func(ctx context.Context) (P, error), work func(ctx context.Context, b *store.Batch, p P) (T, error)) (idem.Result[T], error) {
	if tx, ok := k.db.AmbientTx(ctx); ok {
		req.Tx = tx
	}
	return idem.RunPrepared(ctx, k.runner, req, policy,
		func(ctx context.Context, _ idem.Querier) (P, error) {
			if err := k.checkpoint(ctx, StepReserved); err != nil {
				var zero P
				return zero, err
			}
			return prepare(ctx)
		},
		func(ctx context.Context, tx *idem.Tx, p P) (T, error) {
			var b store.Batch
			v, err := work(ctx, &b, p)
			if err == nil {
				err = b.QueueIn(tx)
			}
			if err == nil {
				err = k.checkpoint(ctx, StepSucceeded)
			}
			return v, err
		})
}

// runCreate is runWrite for a write whose prepare reads nothing (a create): through
// idem.RunAhead, so a fresh key is one round trip — prepare and work on the client, their
// writes guarded on the reservation they travel behind (store.Batch.QueueIn). With faults
// injected (tests, a storm's --fail-first and --hold) it is runWrite: a fault checkpoint is a
// step of the transaction, and a step held must hold the key and what it locked.
func runCreate[T, P any](ctx context.Context, k *Kernel, req idem.Request, policy idem.ResultPolicy[T],
	prepare func(ctx context.Context) (P, error), work func(ctx context.Context, b *store.Batch, p P) (T, error)) (idem.Result[T], error) {
	if k.faults != nil {
		return runWrite(ctx, k, req, policy, prepare, work)
	}
	if tx, ok := k.db.AmbientTx(ctx); ok {
		req.Tx = tx
	}
	return idem.RunAhead(ctx, k.runner, req, policy, prepare,
		func(ctx context.Context, tx *idem.Tx, p P) (T, error) {
			var b store.Batch
			v, err := work(ctx, &b, p)
			if err == nil {
				err = b.QueueIn(tx)
			}
			return v, err
		})
}

// DB is the kernel's database.
func (k *Kernel) DB() *store.DB { return k.db }

// Runner is the kernel's idempotency runner.
func (k *Kernel) Runner() *idem.Runner { return k.runner }

func (k *Kernel) note(step string) {
	if k.observe != nil {
		k.observe(step)
	}
}

// newID returns a ULID, monotonic within this process.
func (k *Kernel) newID(t time.Time) string {
	k.ids.mu.Lock()
	defer k.ids.mu.Unlock()
	return ulid.MustNew(ulid.Timestamp(t), k.ids.entropy).String()
}

// Operations of SPEC §4.1.

// OpReview is the operation of creating a commitment review.
func OpReview(recordID string) string {
	return ModuleCommitment + ":record:" + recordID + ":review:create"
}

// OpLegacyIdentityCreate is the disabled legacy operation whose receipts may be redacted.
const OpLegacyIdentityCreate = "identity:create"

// module returns a writable module or the error a write to it gets, before any runner or
// repository is touched.
func (k *Kernel) writableModule(code string) (*Module, error) {
	m, err := k.Registry.Module(code)
	if err != nil {
		return nil, err
	}
	if m.Legacy {
		return nil, apperr.New(apperr.LegacyWriteDisable, "%s is a legacy module: every write is disabled; its old receipts stay readable", code)
	}
	return m, nil
}

// now is the runner's clock in UTC at PostgreSQL's precision (microseconds), so a value written
// and one read back from a timestamptz column are the same.
func (k *Kernel) now() time.Time { return k.runner.Clock().Now().UTC().Truncate(time.Microsecond) }

// RequireWritable is the rule every write entry point (CLI command, HTTP route, TUI form,
// storm) applies before calling Create, Patch, RunFeature or CreateReview: on a read-only
// session a write request is refused with READ_ONLY up front (a hot standby says so; a schema
// newer than this binary is SCHEMA_NOT_READY), a replay included, though the runner itself would
// answer a replay from its cache without writing.
func (k *Kernel) RequireWritable() error { return k.db.WriteRefusal() }
