package storm

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
)

// What a storm injects into the work of the requests that execute goes through idem's
// checkpoints (idem.WithFault), the commit unit's own step boundaries, so only a request that
// holds the key's reservation ever meets it:
//
//   - FailFirst: the first request of the whole storm to reach the audit step of its work fails
//     there, so its transaction (record, revision, execution, audit, reservation) rolls back
//     and another request has to execute. "First to reach the audit step" is the first
//     attempt, in whichever process it runs.
//   - Hold: the executing request pauses at the end of its work, before SUCCEEDED and COMMIT,
//     with its transaction (and so its reservation on the unique index) open; every other
//     request on the key queues behind it where the Locks view and the sampler can see it.

func injected(step string) error {
	return apperr.New(CodeInjectedFault, "injected failure after the %s step (--fail-first): the whole transaction rolled back", step)
}

// faults is a storm's injections for one process.
type faults struct {
	fail idem.FaultFunc // nil: no FailFirst
	hold time.Duration
}

func (f faults) none() bool { return f.fail == nil && f.hold <= 0 }

// bind returns ctx carrying the faults for the requests run under it; a hold ends early, with
// ctx's error, when ctx ends (a stopped storm does not sit out its holds).
func (f faults) bind(ctx context.Context) context.Context {
	if f.none() {
		return ctx
	}
	return idem.WithFault(ctx, func(step string) error {
		if f.fail != nil {
			if err := f.fail(step); err != nil {
				return err
			}
		}
		if step == idem.StepSucceeded && f.hold > 0 {
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
	if step == idem.StepAudit && f.fired.CompareAndSwap(false, true) {
		return injected(step)
	}
	return nil
}

// claimFault fires once across processes: each process tries at most once, and only the one
// that creates the claim file (O_EXCL, atomic in the kernel) fails its step.
func claimFault(path string) idem.FaultFunc {
	var tried atomic.Bool
	return func(step string) error {
		if step != idem.StepAudit || !tried.CompareAndSwap(false, true) {
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
