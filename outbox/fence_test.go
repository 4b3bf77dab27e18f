package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/outbox"
	"github.com/idemwork/idemwork/store"
)

// slowProvider holds its first call until release is closed, then answers with firstErr; every
// later call succeeds at once. It counts calls per idempotency id.
type slowProvider struct {
	entered  chan struct{}
	release  chan struct{}
	firstErr error
	first    atomic.Bool
	mu       sync.Mutex
	calls    map[string]int
}

func newSlowProvider(firstErr error) *slowProvider {
	return &slowProvider{entered: make(chan struct{}), release: make(chan struct{}), firstErr: firstErr, calls: map[string]int{}}
}

func (p *slowProvider) Deliver(_ context.Context, m store.OutboxMessage) error {
	p.mu.Lock()
	p.calls[m.IdempotencyID]++
	p.mu.Unlock()
	if p.first.CompareAndSwap(false, true) {
		close(p.entered)
		<-p.release
		return p.firstErr
	}
	return nil
}

func (p *slowProvider) callsFor(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[id]
}

func auditCount(t *testing.T, b bundle, execID, action string) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_event WHERE execution_id = $1 AND action = $2`,
		execID, action).Scan(&n))
	return n
}

// outlivedLease runs worker A into a provider call that outlives its lease, lets worker B claim
// and deliver the same message meanwhile, then lets A's call return. It returns A's report.
func outlivedLease(t *testing.T, b bundle, p *slowProvider) outbox.Report {
	t.Helper()
	ctx := context.Background()
	opts := outbox.Options{Providers: map[string]outbox.Provider{"notifier": p}, Clock: b.clock, Lease: time.Minute}
	a, bw := outbox.NewWorker(b.db.DB, opts), outbox.NewWorker(b.db.DB, opts)

	var repA outbox.Report
	var errA error
	done := make(chan struct{})
	go func() {
		defer close(done)
		repA, errA = a.RunOnce(ctx, 10)
	}()
	<-p.entered
	// The lease runs out while A's provider call is still running (a provider slower than the
	// lease, or the workbench clock moved forward): the message is due again.
	b.clock.Advance(2 * time.Minute)
	repB, err := bw.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, repB.Claimed, "the message is claimed again once A's lease ran out")
	require.Equal(t, 1, repB.Delivered)

	close(p.release)
	<-done
	require.NoError(t, errA)
	return repA
}

func TestASettleWhoseLeaseRanOutNeverWritesASecondDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exec := notify(t, b, "fence-1")
	p := newSlowProvider(nil)

	repA := outlivedLease(t, b, p)

	require.Equal(t, 1, auditCount(t, b, exec, "FEATURE_F02_DELIVERED"), "exactly one DELIVERED audit event")
	m, e, attempts := status(t, b, exec)
	require.Equal(t, "DELIVERED", m)
	require.Equal(t, "DELIVERED", e)
	require.Equal(t, 2, attempts)
	require.Zero(t, repA.Delivered, "A lost its claim: its settle must not count as a delivery")
	require.Equal(t, 1, repA.Lost, "the lost claim is reported")
	require.Equal(t, 2, p.callsFor(exec), "the provider was called once per claim, never more")
}

func TestASettleWhoseLeaseRanOutNeverReopensADeliveredMessage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exec := notify(t, b, "fence-2")
	p := newSlowProvider(errors.New("provider timed out"))

	repA := outlivedLease(t, b, p)

	m, e, _ := status(t, b, exec)
	require.Equal(t, "DELIVERED", m, "a DELIVERED message is never turned back into PENDING")
	require.Equal(t, "DELIVERED", e)
	require.Equal(t, 1, auditCount(t, b, exec, "FEATURE_F02_DELIVERED"))
	require.Zero(t, repA.Retried, "A lost its claim: its failure is not a retry of a delivered message")
	require.Equal(t, 1, repA.Lost)

	b.clock.Advance(time.Hour)
	w := outbox.NewWorker(b.db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": p}, Clock: b.clock})
	rep, err := w.RunOnce(context.Background(), 10)
	require.NoError(t, err)
	require.Zero(t, rep.Claimed, "nothing is delivered again")
	require.Equal(t, 2, p.callsFor(exec))
}

// callLog records every provider call per idempotency id: how many, and whether two of them
// for one message ever ran at the same time.
type callLog struct {
	mu       sync.Mutex
	calls    map[string]int
	inFlight map[string]int
	overlaps map[string]int
}

func newCallLog() *callLog {
	return &callLog{calls: map[string]int{}, inFlight: map[string]int{}, overlaps: map[string]int{}}
}

func (l *callLog) enter(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[id]++
	if l.inFlight[id]++; l.inFlight[id] > 1 {
		l.overlaps[id]++
	}
}

func (l *callLog) leave(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight[id]--
}

// slowHonest takes d per call and honours its context: it returns when ctx ends.
func slowHonest(l *callLog, d time.Duration) outbox.Provider {
	return providerFunc(func(ctx context.Context, m store.OutboxMessage) error {
		l.enter(m.IdempotencyID)
		defer l.leave(m.IdempotencyID)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// deliverAll runs workers passes of w (each in a loop of its own) until no message of execs is
// PENDING, and returns what the passes reported.
func deliverAll(t *testing.T, b bundle, workers []*outbox.Worker, execs []string) outbox.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	var total outbox.Report
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				rep, err := w.RunOnce(ctx, 20)
				if ctx.Err() == nil {
					require.NoError(t, err)
				}
				mu.Lock()
				total.Claimed += rep.Claimed
				total.Delivered += rep.Delivered
				total.Retried += rep.Retried
				total.Failed += rep.Failed
				total.Lost += rep.Lost
				total.CutOff += rep.CutOff
				total.Unstarted += rep.Unstarted
				mu.Unlock()
				if rep.Claimed == 0 {
					time.Sleep(5 * time.Millisecond) // a poll interval, as Run has
				}
			}
		})
	}
	require.Eventually(t, func() bool {
		var pending int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox_message WHERE execution_id = ANY($1) AND status = 'PENDING'`,
			execs).Scan(&pending))
		return pending == 0
	}, 50*time.Second, 20*time.Millisecond, "every message settles")
	cancel()
	wg.Wait()
	return total
}

// Issue 28: a provider that honours its context but is slow enough that one worker's whole
// batch, called one after another, would outlive a batch-wide lease (12 × 600 ms against a
// 4 s lease). Each message has a lease of its own, taken just before its call: 3 workers deliver
// 12 messages with one call each, and no two calls of one message ever overlap.
func TestASlowProviderThatHonoursItsContextIsCalledOncePerMessageAndNeverTwiceAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var execs []string
	for i := range 12 {
		execs = append(execs, notify(t, b, fmt.Sprintf("slow-%02d", i)))
	}
	calls := newCallLog()
	opts := outbox.Options{Providers: map[string]outbox.Provider{"notifier": slowHonest(calls, 600*time.Millisecond)}, Clock: b.clock,
		Lease: 4 * time.Second, CallTimeout: 1500 * time.Millisecond, Concurrency: 2, BaseBackoff: 50 * time.Millisecond}
	workers := []*outbox.Worker{outbox.NewWorker(b.db.DB, opts), outbox.NewWorker(b.db.DB, opts), outbox.NewWorker(b.db.DB, opts)}

	rep := deliverAll(t, b, workers, execs)

	for _, e := range execs {
		m, ex, attempts := status(t, b, e)
		require.Equal(t, "DELIVERED", m)
		require.Equal(t, "DELIVERED", ex)
		require.Equal(t, 1, attempts, "one claim per message")
		require.Equal(t, 1, calls.calls[e], "one provider call per message")
		require.Zero(t, calls.overlaps[e], "no two calls of one message at once")
		require.Equal(t, 1, auditCount(t, b, e, "FEATURE_F02_DELIVERED"))
	}
	require.Equal(t, 12, rep.Claimed)
	require.Equal(t, 12, rep.Delivered)
	require.Zero(t, rep.Lost, "no lease ran out under a call")
	require.Zero(t, rep.CutOff)
}

// A provider slower than the call timeout fails every attempt (honestly: it returns when its
// context ends): each message is called again only after such a failure, once per attempt, never
// while a call of it is in flight, and fails after MaxAttempts.
func TestAProviderSlowerThanTheCallTimeoutIsCalledAgainOnlyAfterEachFailedAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var execs []string
	for i := range 12 {
		execs = append(execs, notify(t, b, fmt.Sprintf("too-slow-%02d", i)))
	}
	calls := newCallLog()
	opts := outbox.Options{Providers: map[string]outbox.Provider{"notifier": slowHonest(calls, 10*time.Second)}, Clock: b.clock,
		Lease: 4 * time.Second, CallTimeout: 500 * time.Millisecond, Concurrency: 2, MaxAttempts: 2,
		BaseBackoff: 50 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	workers := []*outbox.Worker{outbox.NewWorker(b.db.DB, opts), outbox.NewWorker(b.db.DB, opts), outbox.NewWorker(b.db.DB, opts)}

	rep := deliverAll(t, b, workers, execs)

	for _, e := range execs {
		m, ex, attempts := status(t, b, e)
		require.Equal(t, "FAILED", m)
		require.Equal(t, "FAILED", ex)
		require.Equal(t, 2, attempts)
		require.Equal(t, 2, calls.calls[e], "one call per attempt: the second only after the first failed")
		require.Zero(t, calls.overlaps[e], "no two calls of one message at once")
		require.Equal(t, 1, auditCount(t, b, e, "FEATURE_F02_FAILED"))
	}
	require.Equal(t, 24, rep.Claimed)
	require.Zero(t, rep.Lost)
	require.Zero(t, rep.CutOff, "a provider that honours its context is never cut off")
}

// A provider that ignores its context is cut off shortly after the call timeout and counted;
// its attempt is settled as failed and not due again before its lease would have run out, and
// what it answers later (a success) settles nothing: the message is delivered, and audited, once.
func TestAProviderThatIgnoresItsContextIsCutOffCountedAndNeverSettlesTwice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exec := notify(t, b, "ignores-ctx")
	calls := newCallLog()
	late := make(chan struct{})
	returned := make(chan struct{})
	var first atomic.Bool
	p := providerFunc(func(_ context.Context, m store.OutboxMessage) error {
		calls.enter(m.IdempotencyID)
		defer calls.leave(m.IdempotencyID)
		if first.CompareAndSwap(false, true) {
			defer close(returned)
			<-late // deaf to its context: it answers when the test lets it
		}
		return nil
	})
	w := outbox.NewWorker(b.db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": p}, Clock: b.clock,
		Lease: 5 * time.Second, CallTimeout: 200 * time.Millisecond, BaseBackoff: 10 * time.Millisecond})
	ctx := context.Background()

	claimedAt := b.clock.Now()
	start := time.Now()
	var rep outbox.Report
	var err error
	passed := make(chan struct{})
	go func() {
		defer close(passed)
		rep, err = w.RunOnce(ctx, 10)
	}()
	select {
	case <-passed:
	case <-time.After(20 * time.Second):
		close(late)
		t.Fatal("the pass waits for a provider that ignores its context")
	}
	require.NoError(t, err)
	require.Less(t, time.Since(start), 5*time.Second, "the worker stopped waiting for the deaf call before its lease ran out")
	require.Equal(t, outbox.Report{Claimed: 1, Retried: 1, CutOff: 1}, rep)
	m, e, attempts := status(t, b, exec)
	require.Equal(t, []string{"PENDING", "PENDING"}, []string{m, e})
	require.Equal(t, 1, attempts)
	require.False(t, nextDue(t, b, exec).Before(claimedAt.Add(5*time.Second)), "not due again before the cut-off call's lease would have run out")
	var lastErr string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT last_error FROM outbox_message WHERE execution_id = $1`, exec).Scan(&lastErr))
	require.Contains(t, lastErr, "ignored its context")

	b.clock.Advance(6 * time.Second)
	rep, err = w.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, outbox.Report{Claimed: 1, Delivered: 1}, rep)

	close(late) // the deaf call answers "delivered" at last
	<-returned
	require.Equal(t, 2, calls.calls[exec])
	m, e, attempts = status(t, b, exec)
	require.Equal(t, []string{"DELIVERED", "DELIVERED"}, []string{m, e})
	require.Equal(t, 2, attempts)
	require.Equal(t, 1, auditCount(t, b, exec, "FEATURE_F02_DELIVERED"), "settled once")
	rep, err = w.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Zero(t, rep.Claimed)
}
