// The kernel and what every write shares. Each write has its own file (create.go, patch.go,
// feature.go, review.go; restore.go replays a stored key); their common steps are in write.go.

package kernel

import (
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
	idMu         sync.Mutex
	entropy      *ulid.MonotonicEntropy
}

// Options configures a Kernel.
type Options struct {
	// Observe, when set, is told of each prepare-time step ("prepare", "read-current",
	// "module-rules"); tests use it to prove a cache hit skips them all.
	Observe func(step string)
}

// New returns a kernel writing through runner (whose database it uses).
func New(runner *idem.Runner, reg *Registry, opts Options) *Kernel {
	k := &Kernel{db: runner.DB(), runner: runner, Registry: reg, observe: opts.Observe,
		entropy: ulid.Monotonic(rand.Reader, 0)}
	k.recordPolicy = recordSnapshotPolicy{k}
	k.reviewPolicy = commitmentReviewPolicy{k}
	return k
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
	k.idMu.Lock()
	defer k.idMu.Unlock()
	return ulid.MustNew(ulid.Timestamp(t), k.entropy).String()
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
