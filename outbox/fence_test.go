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

	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/outbox"
)

// heldProvider holds every call until the test answers it: each call hands the channel its
// answer goes to over calls, in the order the calls start. It counts calls per idempotency id.
type heldProvider struct {
	calls chan chan error
	mu    sync.Mutex
	count map[string]int
}

func newHeldProvider() *heldProvider {
	return &heldProvider{calls: make(chan chan error), count: map[string]int{}}
}

func (p *heldProvider) Deliver(ctx context.Context, m model.OutboxMessage) error {
	p.mu.Lock()
	p.count[m.IdempotencyID]++
	p.mu.Unlock()
	answer := make(chan error, 1) // buffered: the test's answer never blocks
	select {
	case p.calls <- answer:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-answer:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *heldProvider) callsFor(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count[id]
}

// recv receives from ch, failing the test when nothing comes within 30 s.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("waited 30 s for %s", what)
		var zero T
		return zero
	}
}

type pass struct {
	rep outbox.Report
	err error
}

// startPass runs one pass of w in the background; its report comes on the channel returned.
func startPass(ctx context.Context, w *outbox.Worker) <-chan pass {
	done := make(chan pass, 1)
	go func() {
		rep, err := w.RunOnce(ctx, 10)
		done <- pass{rep, err}
	}()
	return done
}

func auditCount(t *testing.T, b bundle, execID, action string) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_event WHERE execution_id = $1 AND action = $2`,
		execID, action).Scan(&n))
	return n
}

// overlappingClaims runs worker A into a provider call that outlives its lease, then lets
// worker B claim the same message again (its lease ran out) and start a call of its own. Both
// calls are held: it returns their answer channels and the channels A's and B's passes report
// on. The call timeout is far above the test's waits, so neither call is cut off.
func overlappingClaims(t *testing.T, ctx context.Context, b bundle, p *heldProvider) (callA, callB chan error, passA, passB <-chan pass) {
	t.Helper()
	opts := outbox.Options{Providers: map[string]outbox.Provider{"notifier": p}, Clock: b.clock, Lease: time.Minute, CallTimeout: 50 * time.Second}
	passA = startPass(ctx, outbox.NewWorker(b.db.DB, opts))
	callA = recv(t, p.calls, "A's provider call")
	// The lease runs out while A's provider call is still running (a provider slower than the
	// lease, or the workbench clock moved forward): the message is due again.
	b.clock.Advance(2 * time.Minute)
	passB = startPass(ctx, outbox.NewWorker(b.db.DB, opts))
	callB = recv(t, p.calls, "B's provider call")
	return callA, callB, passA, passB
}

// outlivedLease is overlappingClaims where B's call delivers and B settles before A's call
// answers aAnswer. It returns A's report.
func outlivedLease(t *testing.T, b bundle, p *heldProvider, aAnswer error) outbox.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	callA, callB, passA, passB := overlappingClaims(t, ctx, b, p)
	callB <- nil
	repB := recv(t, passB, "B's pass")
	require.NoError(t, repB.err)
	require.Equal(t, outbox.Report{Claimed: 1, Delivered: 1}, repB.rep, "the message is claimed again once A's lease ran out, and delivered")

	callA <- aAnswer
	repA := recv(t, passA, "A's pass")
	require.NoError(t, repA.err)
	return repA.rep
}

func TestASettleWhoseLeaseRanOutNeverWritesASecondDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exec := notify(t, b, "fence-1")
	p := newHeldProvider()

	repA := outlivedLease(t, b, p, nil)

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
	p := newHeldProvider()

	repA := outlivedLease(t, b, p, errors.New("provider timed out"))

	m, e, _ := status(t, b, exec)
	require.Equal(t, "DELIVERED", m, "a DELIVERED message is never turned back into PENDING")
	require.Equal(t, "DELIVERED", e)
	require.Equal(t, 1, auditCount(t, b, exec, "FEATURE_F02_DELIVERED"))
	require.Zero(t, repA.Retried, "A lost its claim: its failure is not a retry of a delivered message")
	require.Equal(t, 1, repA.Lost)

	b.clock.Advance(time.Hour)
	w := outbox.NewWorker(b.db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": p}, Clock: b.clock})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := w.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Zero(t, rep.Claimed, "nothing is delivered again")
	require.Equal(t, 2, p.callsFor(exec))
}

// outboxRow is what a settle writes to a message.
type outboxRow struct {
	Status      string
	Attempts    int
	NextAttempt time.Time
	LastError   *string
}

func readOutboxRow(t *testing.T, b bundle, execID string) outboxRow {
	t.Helper()
	var r outboxRow
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT status, attempts, next_attempt_at, last_error FROM outbox_message
		WHERE execution_id = $1`, execID).Scan(&r.Status, &r.Attempts, &r.NextAttempt, &r.LastError))
	return r
}

// SPEC §7: the settle is fenced by the claim's token (its attempt), not by the message's status.
// While B's call runs the message is PENDING, as it was when A claimed it, and A's late settle —
// a delivery or a failure — still changes nothing: it would otherwise settle the message under
// B's running call, or end B's lease early with a retry that a third worker claims while B's
// call still runs.
func TestASettleWhoseLeaseRanOutChangesNothingWhileTheNewClaimsCallRuns(t *testing.T) {
	t.Parallel()
	for name, answer := range map[string]error{"delivered": nil, "failed": errors.New("provider timed out")} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			exec := notify(t, b, "fence-"+name)
			p := newHeldProvider()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			callA, callB, passA, passB := overlappingClaims(t, ctx, b, p)
			claimedByB := readOutboxRow(t, b, exec)
			require.Equal(t, "PENDING", claimedByB.Status)
			require.Equal(t, 2, claimedByB.Attempts)

			callA <- answer
			repA := recv(t, passA, "A's pass")
			require.NoError(t, repA.err)
			require.Equal(t, outbox.Report{Claimed: 1, Lost: 1}, repA.rep, "A's lease ran out: its settle is lost, whatever its call answered")
			require.Equal(t, claimedByB, readOutboxRow(t, b, exec), "B's claim is untouched: still PENDING, its lease, no error")
			require.Zero(t, auditCount(t, b, exec, "FEATURE_F02_DELIVERED"))

			callB <- nil
			repB := recv(t, passB, "B's pass")
			require.NoError(t, repB.err)
			require.Equal(t, outbox.Report{Claimed: 1, Delivered: 1}, repB.rep, "B's settle is the one that counts")
			m, e, attempts := status(t, b, exec)
			require.Equal(t, []string{"DELIVERED", "DELIVERED"}, []string{m, e})
			require.Equal(t, 2, attempts)
			require.Equal(t, 1, auditCount(t, b, exec, "FEATURE_F02_DELIVERED"))
		})
	}
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
	return providerFunc(func(ctx context.Context, m model.OutboxMessage) error {
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
	p := providerFunc(func(_ context.Context, m model.OutboxMessage) error {
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
