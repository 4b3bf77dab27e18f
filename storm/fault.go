package storm

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// What a storm injects into the work of the requests that execute goes through the kernel's
// checkpoints (kernel.WithFaults: a kernel of the storm's own, never a flag in a context), the
// commit unit's own step boundaries, so only a request that holds the key's reservation ever
// meets it:
//
//   - FailFirst: the first request of the whole storm to reach the audit step of its work fails
//     there, so its transaction (record, revision, execution, audit, reservation) rolls back
//     and another request has to execute. "First to reach the audit step" is the first
//     attempt, in whichever process it runs.
//   - Hold: the executing request pauses at the end of its work, before SUCCEEDED and COMMIT,
//     with its transaction (and so its reservation on the unique index) open; every other
//     request on the key queues behind it where the Locks view and the sampler can see it.

func injected(step string) error {
	return apperr.New(stormtypes.CodeInjectedFault, "injected failure after the %s step (--fail-first): the whole transaction rolled back", step)
}

// faults is a storm's injections for one process.
type faults struct {
	fail func(step string) error // nil: no FailFirst
	hold time.Duration
}

func (f faults) none() bool { return f.fail == nil && f.hold <= 0 }

// on returns k injecting the faults into the work of its writes (k itself when there are
// none); a hold ends early, with the request context's error, when that ends (a stopped storm
// does not sit out its holds).
func (f faults) on(k *kernel.Kernel) *kernel.Kernel {
	if f.none() {
		return k
	}
	return k.WithFaults(func(ctx context.Context, step string) error {
		if f.fail != nil {
			if err := f.fail(step); err != nil {
				return err
			}
		}
		if step == kernel.StepSucceeded && f.hold > 0 {
			t := time.NewTimer(f.hold)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
}

// faultOnce fires once per process.
type faultOnce struct{ fired atomic.Bool }

func (f *faultOnce) fault(step string) error {
	if step == kernel.StepAudit && f.fired.CompareAndSwap(false, true) {
		return injected(step)
	}
	return nil
}

// claimFault fires once across processes: each process tries at most once, and only the one
// that creates the claim file (O_EXCL, atomic in the kernel) fails its step.
func claimFault(path string) func(step string) error {
	var tried atomic.Bool
	return func(step string) error {
		if step != kernel.StepAudit || !tried.CompareAndSwap(false, true) {
			return nil
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if errors.Is(err, os.ErrExist) {
			return nil
		}
		if err != nil {
			return err // an unusable claim file fails this attempt as any error would
		}
		_ = f.Close()
		return injected(step)
	}
}
