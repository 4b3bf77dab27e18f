package storm

import (
	"context"
	"errors"
	"os"
	"sync/atomic"

	"idemwork/apperr"
	"idemwork/idem"
)

// The FailFirst fault: the first request of the whole storm to reach the audit step of its work
// fails there, so its transaction (record, revision, execution, audit, reservation) rolls back
// and another request has to execute. Only a request holding the key's reservation runs work,
// so "first to reach the audit step" is the first attempt, in whichever process it runs.

func injected(step string) error {
	return apperr.New(CodeInjectedFault, "injected failure after the %s step (--fail-first): the whole transaction rolled back", step)
}

// faultOnce fires once per process.
type faultOnce struct{ fired atomic.Bool }

func (f *faultOnce) fault(step string) error {
	if step == idem.StepAudit && f.fired.CompareAndSwap(false, true) {
		return injected(step)
	}
	return nil
}

// withFault returns ctx carrying the storm's fault, or ctx unchanged when f is nil.
func withFault(ctx context.Context, f idem.FaultFunc) context.Context {
	if f == nil {
		return ctx
	}
	return idem.WithFault(ctx, f)
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
