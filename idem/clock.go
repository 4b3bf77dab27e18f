package idem

import (
	"context"
	"sync/atomic"
	"time"
)

// Clock is the runner's notion of now: reservations, expiry and validity all use it, so tests
// and the TUI can move time to watch keys expire.
type Clock interface {
	Now() time.Time
}

// OffsetClock is the system clock shifted by an adjustable offset; the zero value is the
// system clock. It is safe for concurrent use.
type OffsetClock struct{ offset atomic.Int64 }

// Now returns the shifted time, in UTC and truncated to PostgreSQL's microseconds so values
// round-trip through timestamptz unchanged.
func (c *OffsetClock) Now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load())).UTC().Truncate(time.Microsecond)
}

// Advance moves the clock forward (or back, for a negative d).
func (c *OffsetClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// Offset is how far the clock is from the system clock.
func (c *OffsetClock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// Reset returns to the system clock.
func (c *OffsetClock) Reset() { c.offset.Store(0) }

// Fault injection: tests (and storms demonstrating a failed leader) put a FaultFunc in the
// context; the runner and the kernel call Checkpoint after each step of the commit unit, and a
// non-nil error from the func fails that step like a real error would.

// FaultFunc decides whether the named step fails.
type FaultFunc func(step string) error

type faultKey struct{}

// WithFault returns a context whose steps consult f.
func WithFault(ctx context.Context, f FaultFunc) context.Context {
	return context.WithValue(ctx, faultKey{}, f)
}

// Checkpoint reports the end of a step; it returns the injected failure for that step, if any.
func Checkpoint(ctx context.Context, step string) error {
	if f, ok := ctx.Value(faultKey{}).(FaultFunc); ok && f != nil {
		return f(step)
	}
	return nil
}

// Steps of the commit unit, in order, as passed to Checkpoint after each (StepSucceeded before
// the success update). A write queued in the transaction's batch keeps the step it belongs to:
// when the server refuses it, the request fails with a *store.StepError of that step.
const (
	StepReserved  = "reservation"
	StepRecord    = "record"
	StepRevision  = "revision"
	StepExecution = "execution" // the feature execution and, for an outbox feature, its message
	StepReview    = "review"
	StepAudit     = "audit"
	StepSucceeded = "before-succeeded"
	// StepSuccess is the success update's own step (no checkpoint follows it: the COMMIT does).
	StepSuccess = "success"
)
