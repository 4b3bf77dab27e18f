// Package outbox delivers outbox messages outside any business transaction (SPEC §7): a worker
// claims due messages with FOR UPDATE SKIP LOCKED in a short transaction, calls the provider
// with the message's idempotency id after that transaction has committed, and then records
// DELIVERED, a retry after an exponential, jittered and capped backoff, or FAILED, settling the
// feature execution and writing an audit event in the same settling transaction.
//
// A claim is a lease, and every message has its own: a pass claims one message at a time, right
// before its provider call starts (up to Concurrency calls at once), so no message waits behind
// another one's call while its lease runs. The call is cancelled at CallTimeout, which is
// strictly shorter than what remains of the lease when the call starts (checked before calling;
// a claim that came back too late is not called), and a provider that ignores its cancellation
// is cut off shortly after it and counted: the worker stops waiting, settles the attempt as
// failed, and whatever that call returns later is dropped. So a claim never outlives its call,
// and a provider that honours its context is never called twice for one message while a call is
// in flight. The claim's attempt number is its token, and the settle is fenced by it, so a worker
// whose lease ran out anyway (its process stalled, or the workbench clock was moved past it)
// never overwrites what the worker that claimed the message again wrote: it logs the lost lease
// and changes nothing. River bounds a job's run the same way: its timeout is shorter than the
// window after which a stuck job is rescued.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/sethvargo/go-retry"

	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/outboxrows"
)

// Provider is a real external system. Deliver must be idempotent on msg.IdempotencyID: a
// message can be delivered again after a crash between the call and the settling commit, or
// after a failed attempt. Deliver must return soon after ctx ends: a call that does not is cut
// off (Report.CutOff) and may then overlap the message's next attempt.
type Provider interface {
	Deliver(ctx context.Context, msg model.OutboxMessage) error
}

// Clock gives the worker's notion of now (the runner's movable clock in the workbench).
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// Defaults of Options.
const (
	DefaultMaxAttempts = 5
	DefaultBaseBackoff = 500 * time.Millisecond
	DefaultMaxBackoff  = 5 * time.Minute
	DefaultLease       = 30 * time.Second
	DefaultCallTimeout = 10 * time.Second
	DefaultConcurrency = 4
	// MaxCutOffGrace bounds how long the worker waits, past CallTimeout, for a provider to
	// return after its context ended before it cuts the call off.
	MaxCutOffGrace = time.Second
	// JitterPercent spreads each retry delay by ±20 %, so messages that failed together do not
	// all come due in the same instant.
	JitterPercent = 20
)

// Options configures a Worker. Zero values take the defaults above.
type Options struct {
	Providers map[string]Provider
	Clock     Clock
	// MaxAttempts is how many provider calls a message gets before it is FAILED.
	MaxAttempts int
	// BaseBackoff is the delay after the first failed attempt; each later one doubles it, with
	// ±JitterPercent jitter, and never exceeds MaxBackoff.
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
	// Lease is how long a claimed message is hidden from other workers while its provider call
	// runs; if this worker dies, the message becomes due again after it.
	Lease time.Duration
	// CallTimeout bounds one provider call. It is kept below the lease: a CallTimeout of zero or
	// at least the Lease becomes half the Lease.
	CallTimeout time.Duration
	// Concurrency is how many provider calls one pass runs at once, each on a message claimed
	// for it alone just before the call (default DefaultConcurrency).
	Concurrency int
	// AfterCall, when set, runs after each provider call and before its settle. An error makes
	// the worker abandon the claim unsettled, as a crash between the call and the settle would:
	// the message comes due again when the lease runs out and is delivered again under the same
	// idempotency id (demos and tests use it to show that).
	AfterCall func(ctx context.Context, m model.OutboxMessage, callErr error) error
	// Logger receives lost leases, abandoned claims and Run's errors (nil: discarded).
	Logger *slog.Logger
}

// Worker delivers due messages.
type Worker struct {
	db   *store.DB
	opts Options
}

// NewWorker returns a worker over db.
func NewWorker(db *store.DB, opts Options) *Worker {
	if opts.Clock == nil {
		opts.Clock = systemClock{}
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if opts.BaseBackoff <= 0 {
		opts.BaseBackoff = DefaultBaseBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = max(DefaultMaxBackoff, opts.BaseBackoff)
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.CallTimeout >= opts.Lease {
		opts.CallTimeout = opts.Lease / 2
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Worker{db: db, opts: opts}
}

// MaxAttempts is how many provider calls a message gets before it is FAILED.
func (w *Worker) MaxAttempts() int { return w.opts.MaxAttempts }

// Options are the worker's settings with the defaults filled in: a demo builds a worker of its
// own (its own provider and crash switch) with the same attempts, backoff and lease.
func (w *Worker) Options() Options { return w.opts }

// Lease is how long a claim hides a message.
func (w *Worker) Lease() time.Duration { return w.opts.Lease }

// CallTimeout bounds one provider call (always below the lease).
func (w *Worker) CallTimeout() time.Duration { return w.opts.CallTimeout }

// cutOffGrace is how long a call may run past its CallTimeout before the worker stops waiting
// for it: a quarter of the lease's margin over the call timeout, at most MaxCutOffGrace, so the
// call, the grace and the settle all fit in the lease.
func (w *Worker) cutOffGrace() time.Duration {
	return min((w.opts.Lease-w.opts.CallTimeout)/4, MaxCutOffGrace)
}

// Backoff is the delay before the retry that follows failed attempt number attempt (1 for the
// first call): BaseBackoff·2^(attempt-1), ±JitterPercent, capped at MaxBackoff. Each call draws
// its own jitter.
func (w *Worker) Backoff(attempt int) time.Duration {
	b := retry.WithCappedDuration(w.opts.MaxBackoff, retry.WithJitterPercent(JitterPercent, retry.NewExponential(w.opts.BaseBackoff)))
	var d time.Duration
	for range max(attempt, 1) {
		d, _ = b.Next()
	}
	return d
}

// BackoffRange is the interval Backoff(attempt) draws from: BaseBackoff·2^(attempt-1)
// ±JitterPercent, each end capped at MaxBackoff.
func (w *Worker) BackoffRange(attempt int) (lo, hi time.Duration) {
	d := w.opts.BaseBackoff
	for i := 1; i < attempt && d < w.opts.MaxBackoff; i++ {
		d *= 2
	}
	lo = time.Duration(float64(d) * (100 - JitterPercent) / 100)
	hi = time.Duration(float64(d) * (100 + JitterPercent) / 100)
	return min(lo, w.opts.MaxBackoff), min(hi, w.opts.MaxBackoff)
}

// Report counts what one pass did.
type Report struct {
	Claimed   int `json:"claimed"`
	Delivered int `json:"delivered"`
	Retried   int `json:"retried"`
	Failed    int `json:"failed"`
	// Lost counts claims whose lease ran out before their settle: another worker claimed or
	// settled the message meanwhile, and this one wrote nothing.
	Lost int `json:"lost"`
	// Abandoned counts claims AfterCall left unsettled.
	Abandoned int `json:"abandoned"`
	// CutOff counts provider calls that ignored their context: still running a moment after
	// CallTimeout, they were cut off and settled as failed attempts; what they return later is
	// dropped.
	CutOff int `json:"cutOff"`
	// Unstarted counts claims that came back with no more of their lease left than CallTimeout
	// and the cut-off grace (the claim itself was that slow): they were not called, and come due
	// when the lease runs out.
	Unstarted int `json:"unstarted"`
}

func (r *Report) add(o Report) {
	r.Claimed += o.Claimed
	r.Delivered += o.Delivered
	r.Retried += o.Retried
	r.Failed += o.Failed
	r.Lost += o.Lost
	r.Abandoned += o.Abandoned
	r.CutOff += o.CutOff
	r.Unstarted += o.Unstarted
}

// Outcomes of settling one claim: the message's status, and for DELIVERED and FAILED also the
// execution's and the outcome its audit action names (store.FeatureAction).
const (
	settledDelivered = store.FeatureDelivered
	settledFailed    = store.FeatureFailed
	settledRetry     = "PENDING"
)

// Scope narrows a pass: to one owner's messages, or to some of them (MessageIDs needs
// OwnerID). The zero Scope is every due message.
type Scope struct {
	OwnerID    string
	MessageIDs []string
}

// RunOnce claims up to limit due messages and settles each.
func (w *Worker) RunOnce(ctx context.Context, limit int) (Report, error) {
	return w.RunScoped(ctx, Scope{}, limit)
}

// RunScoped is RunOnce over the due messages in scope only: the workbench's pass delivers the
// owner on screen, a demo its own message, and neither touches anyone else's.
//
// Messages are claimed only when a call slot is free for each (at most Concurrency calls run at
// once), so each message's lease starts just before its own call; none waits behind another's.
func (w *Worker) RunScoped(ctx context.Context, scope Scope, limit int) (Report, error) {
	var (
		mu       sync.Mutex
		rep      Report
		firstErr error
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	slots := make(chan struct{}, w.opts.Concurrency)
	for claimed := 0; claimed < limit && !failed(); {
		// Wait for a free call slot, then take every slot free now: that many messages are
		// claimed together, each called at once, so each one's lease starts at its call.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			fail(ctx.Err())
			continue
		}
		free := 1
	more:
		for free < limit-claimed {
			select {
			case slots <- struct{}{}:
				free++
			default:
				break more
			}
		}
		now := w.opts.Clock.Now()
		leaseUntil := now.Add(w.opts.Lease)
		msgs, err := outboxrows.Claim(ctx, w.db, outboxrows.ClaimParams{Now: now, LeaseUntil: leaseUntil, Limit: free,
			OwnerID: scope.OwnerID, IDs: scope.MessageIDs})
		if err != nil {
			fail(err)
		}
		for range free - len(msgs) {
			<-slots
		}
		claimed += len(msgs)
		for _, m := range msgs {
			wg.Go(func() {
				defer func() { <-slots }()
				one, err := w.process(ctx, m, leaseUntil)
				mu.Lock()
				rep.add(one)
				mu.Unlock()
				if err != nil {
					fail(err)
				}
			})
		}
		if len(msgs) < free {
			break // nothing more is due now
		}
	}
	wg.Wait()
	return rep, firstErr
}

// process calls the provider for one claimed message and settles the claim.
func (w *Worker) process(ctx context.Context, m model.OutboxMessage, leaseUntil time.Time) (Report, error) {
	rep := Report{Claimed: 1}
	// The call may only start if it ends (CallTimeout, and the grace of a provider that
	// ignores its context) before the lease does.
	if left := leaseUntil.Sub(w.opts.Clock.Now()); left <= w.opts.CallTimeout+w.cutOffGrace() {
		w.opts.Logger.Warn("outbox: the claim came back with too little of its lease left to call the provider within it; it runs out unsettled",
			"message", m.ID, "owner", m.OwnerID, "attempt", m.Attempts, "leaseLeft", left, "callTimeout", w.opts.CallTimeout)
		rep.Unstarted++
		return rep, nil
	}
	// The provider call happens here, with no transaction open.
	callErr, cut := w.deliver(ctx, m)
	if cut {
		w.opts.Logger.Warn("outbox: the provider ignored its context and was cut off; its attempt is settled as failed and what it returns is dropped",
			"message", m.ID, "owner", m.OwnerID, "attempt", m.Attempts, "callTimeout", w.opts.CallTimeout)
		rep.CutOff++
	}
	if w.opts.AfterCall != nil {
		if err := w.opts.AfterCall(ctx, m, callErr); err != nil {
			w.opts.Logger.Warn("outbox: claim abandoned before its settle", "message", m.ID, "attempt", m.Attempts, "reason", err)
			rep.Abandoned++
			return rep, nil
		}
	}
	// A call that was cut off may still be running: its message is not due again before its
	// lease would have run out, whatever the backoff says.
	notBefore := time.Time{}
	if cut {
		notBefore = leaseUntil
	}
	outcome, err := w.settle(ctx, m, callErr, notBefore)
	if errors.Is(err, outboxrows.ErrLeaseLost) {
		w.opts.Logger.Warn("outbox: lease lost; the settle changed nothing", "message", m.ID, "owner", m.OwnerID,
			"attempt", m.Attempts, "lease", w.opts.Lease, "callError", errString(callErr))
		rep.Lost++
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	switch outcome {
	case settledDelivered:
		rep.Delivered++
	case settledFailed:
		rep.Failed++
	default:
		rep.Retried++
	}
	return rep, nil
}

// Run delivers until ctx ends, polling every interval. A failed pass is logged and the next
// one runs as usual: a lost connection must not stop delivery for good.
func (w *Worker) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := w.RunOnce(ctx, 20); err != nil && ctx.Err() == nil {
			w.opts.Logger.Error("outbox: delivery pass failed", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// deliver calls the provider with CallTimeout. A provider that has not returned a short grace
// after its context ended is cut off (cut is true): the worker stops waiting, and the call's
// eventual result goes nowhere.
func (w *Worker) deliver(ctx context.Context, m model.OutboxMessage) (err error, cut bool) {
	p, ok := w.opts.Providers[m.Provider]
	if !ok {
		return fmt.Errorf("no provider %q is configured", m.Provider), false
	}
	callCtx, cancel := context.WithTimeout(ctx, w.opts.CallTimeout)
	defer cancel()
	done := make(chan error, 1) // buffered: a call that was cut off still ends without a reader
	go func() { done <- p.Deliver(callCtx, m) }()
	select {
	case err = <-done:
	case <-callCtx.Done():
		grace := time.NewTimer(w.cutOffGrace())
		defer grace.Stop()
		select {
		case err = <-done:
		case <-grace.C:
			return fmt.Errorf("the provider ignored its context: still running %s after its %s call timeout, it was cut off (its call may still be running)",
				w.cutOffGrace(), w.opts.CallTimeout), true
		}
	}
	if err != nil && callCtx.Err() != nil && ctx.Err() == nil {
		return fmt.Errorf("the provider call timed out after %s: %w", w.opts.CallTimeout, err), false
	}
	return err, false
}

// settle records the provider call's result and, for DELIVERED or FAILED, settles the
// execution and audits it, all in one transaction and only while the claim still holds. A retry
// comes due after its backoff, and not before notBefore.
func (w *Worker) settle(ctx context.Context, m model.OutboxMessage, callErr error, notBefore time.Time) (string, error) {
	status := settledDelivered
	var lastErr *string
	now := w.opts.Clock.Now()
	next := now
	if callErr != nil {
		s := callErr.Error()
		lastErr = &s
		status = settledRetry
		if m.Attempts >= w.opts.MaxAttempts {
			status = settledFailed
		} else {
			next = now.Add(w.Backoff(m.Attempts))
			if next.Before(notBefore) {
				next = notBefore
			}
		}
	}
	err := w.db.Tx(ctx, func(ctx context.Context) error {
		if err := outboxrows.Settle(ctx, w.db, outboxrows.SettleParams{OwnerID: m.OwnerID, ID: m.ID, ClaimedAttempt: m.Attempts,
			Status: status, LastError: lastErr, NextAttemptAt: next, Now: now}); err != nil {
			return err
		}
		if status == settledRetry {
			return nil
		}
		e, err := outboxrows.SettleExecution(ctx, w.db, outboxrows.SettleExecutionParams{OwnerID: m.OwnerID, ID: m.ExecutionID, Status: status, Now: now})
		if errors.Is(err, store.ErrNotFound) {
			// The message was still ours but its execution is settled already: the two disagree,
			// and writing a second settlement would only hide it. Nothing commits.
			return fmt.Errorf("outbox message %s is PENDING but its execution %s is not: refusing to settle it again", m.ID, m.ExecutionID)
		}
		if err != nil {
			return err
		}
		detail, _ := json.Marshal(map[string]any{"outboxMessageId": m.ID, "provider": m.Provider, "attempts": m.Attempts})
		return w.db.InsertAudit(ctx, model.AuditEvent{ID: ulid.Make().String(), OwnerID: m.OwnerID, ModuleCode: e.ModuleCode,
			RecordID: &e.RecordID, Action: store.FeatureAction(e.FeatureID, status), Revision: &e.RecordRevision, ExecutionID: &m.ExecutionID,
			IdempotencyKey: e.IdempotencyKey, Detail: detail, At: now})
	})
	return status, err
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
