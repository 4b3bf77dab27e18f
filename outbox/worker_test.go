package outbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/outbox"
)

func TestMain(m *testing.M) { testdb.Main(m) }

type bundle struct {
	db       *testdb.DB
	k        *kernel.Kernel
	clock    *idem.OffsetClock
	provider *outbox.MemoryProvider
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := testdb.New(t)
	clock := &idem.OffsetClock{}
	k := kernel.New(db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{Runner: idem.Options{Clock: clock}})
	return bundle{db: db, k: k, clock: clock, provider: outbox.NewMemoryProvider()}
}

// notify creates an OPEN commitment and runs F02 (outbox mode), returning the execution id.
func notify(t *testing.T, b bundle, key string) string {
	t.Helper()
	ctx := context.Background()
	c, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleCommitment, Title: "c", Payload: []byte(`{"status":"OPEN"}`)})
	require.NoError(t, err)
	res, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleCommitment, RecordID: c.Record.ID, FeatureID: "F02", Key: key})
	require.NoError(t, err)
	require.Equal(t, "PENDING", res.Execution.Status)
	return res.Execution.ID
}

func status(t *testing.T, b bundle, execID string) (msg, exec string, attempts int) {
	t.Helper()
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT m.status, e.status, m.attempts FROM outbox_message m
		JOIN feature_execution e ON e.owner_id = m.owner_id AND e.id = m.execution_id WHERE m.execution_id = $1`, execID).Scan(&msg, &exec, &attempts))
	return
}

func TestTheWorkerDeliversOutsideTheBusinessTransactionAndSettlesTheExecution(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exec := notify(t, b, "n1")
	w := outbox.NewWorker(b.db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": b.provider}, Clock: b.clock})
	rep, err := w.RunOnce(context.Background(), 10)
	require.NoError(t, err)
	require.Equal(t, outbox.Report{Claimed: 1, Delivered: 1}, rep)
	m, e, attempts := status(t, b, exec)
	require.Equal(t, "DELIVERED", m)
	require.Equal(t, "DELIVERED", e)
	require.Equal(t, 1, attempts)
	require.Equal(t, 1, b.provider.Delivered())
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_event WHERE execution_id = $1 AND action = 'FEATURE_F02_DELIVERED'`, exec).Scan(&n))
	require.Equal(t, 1, n)

	rep, err = w.RunOnce(context.Background(), 10)
	require.NoError(t, err)
	require.Zero(t, rep.Claimed, "a delivered message is never claimed again")
}

// nextDue reads when the message of execID is due next.
func nextDue(t *testing.T, b bundle, execID string) time.Time {
	t.Helper()
	var at time.Time
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT next_attempt_at FROM outbox_message WHERE execution_id = $1`, execID).Scan(&at))
	return at
}

// within asserts that d is the n-th delay of base doubling, ±JitterPercent.
func within(t *testing.T, d, base time.Duration, n int, msg string) {
	t.Helper()
	withinAfter(t, d, 0, base, n, msg)
}

// withinAfter is within for a delay measured from a moment up to slack before the one the
// worker counted from (the pass's own time: its claim and the provider call).
func withinAfter(t *testing.T, d, slack, base time.Duration, n int, msg string) {
	t.Helper()
	nominal := float64(base << (n - 1))
	j := float64(outbox.JitterPercent) / 100
	require.GreaterOrEqual(t, float64(d), nominal*(1-j)-float64(time.Millisecond), msg)
	require.LessOrEqual(t, float64(d), nominal*(1+j)+float64(slack+time.Millisecond), msg)
}

func TestAFailingProviderIsRetriedWithADoublingJitteredBackoffThenFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exec := notify(t, b, "n2")
	b.provider.FailNext(100)
	w := outbox.NewWorker(b.db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": b.provider}, Clock: b.clock,
		MaxAttempts: 3, BaseBackoff: time.Minute})
	ctx := context.Background()

	before := b.clock.Now()
	rep, err := w.RunOnce(ctx, 10)
	require.NoError(t, err)
	pass := b.clock.Now().Sub(before)
	require.Equal(t, 1, rep.Retried)
	first := nextDue(t, b, exec).Sub(before)
	withinAfter(t, first, pass, time.Minute, 1, "the first retry waits the base backoff, ±jitter")
	rep, err = w.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Zero(t, rep.Claimed, "not due before its backoff")

	b.clock.Advance(first + time.Second)
	before = b.clock.Now()
	rep, err = w.RunOnce(ctx, 10)
	require.NoError(t, err)
	pass = b.clock.Now().Sub(before)
	require.Equal(t, 1, rep.Retried)
	second := nextDue(t, b, exec).Sub(before)
	withinAfter(t, second, pass, time.Minute, 2, "the second retry waits twice as long, ±jitter")
	require.Greater(t, second, first, "the backoff grows")

	b.clock.Advance(second + time.Second)
	rep, err = w.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Failed)
	m, e, attempts := status(t, b, exec)
	require.Equal(t, "FAILED", m)
	require.Equal(t, "FAILED", e)
	require.Equal(t, 3, attempts)
	require.Equal(t, 3, b.provider.Calls(exec))
}

func TestTheBackoffScheduleDoublesWithJitterUpToItsCap(t *testing.T) {
	t.Parallel()
	w := outbox.NewWorker(nil, outbox.Options{BaseBackoff: time.Second, MaxBackoff: 20 * time.Second})
	for n := 1; n <= 4; n++ { // 1 s, 2 s, 4 s, 8 s nominal
		seen := map[time.Duration]bool{}
		for range 50 {
			d := w.Backoff(n)
			within(t, d, time.Second, n, "attempt "+string(rune('0'+n)))
			seen[d] = true
		}
		require.Greater(t, len(seen), 1, "attempt %d: the delay is jittered, not fixed", n)
	}
	for n := 5; n <= 40; n++ { // 16 s nominal, then far beyond the cap
		d := w.Backoff(n)
		require.LessOrEqual(t, d, 20*time.Second, "attempt %d: never above the cap", n)
		require.GreaterOrEqual(t, d, 12*time.Second, "attempt %d", n)
	}
	require.Equal(t, 20*time.Second, w.Backoff(40), "far past the cap the delay is the cap")
}

func TestAProviderCallIsCutOffBelowTheLease(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	b := setup(t)
	exec := notify(t, b, "n-timeout")
	hang := providerFunc(func(ctx context.Context, _ model.OutboxMessage) error {
		<-ctx.Done()
		return ctx.Err()
	})
	w := outbox.NewWorker(b.db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": hang}, Clock: b.clock,
		Lease: 3 * time.Second, CallTimeout: 100 * time.Millisecond})
	require.Equal(t, 100*time.Millisecond, w.CallTimeout())
	start := time.Now()
	rep, err := w.RunOnce(ctx, 10)
	require.NoError(t, err)
	// Cut off at the 100 ms call timeout: a fixed 10 s, or the 3 s lease, would be past this bound;
	// a loaded machine's scheduling is not near it.
	require.Less(t, time.Since(start), 3*time.Second, "the call timeout, not a fixed 10 s nor the lease, ends a hung call")
	require.Equal(t, 1, rep.Retried)
	var lastErr string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT last_error FROM outbox_message WHERE execution_id = $1`, exec).Scan(&lastErr))
	require.Contains(t, lastErr, "timed out after 100ms")

	long := outbox.NewWorker(b.db.DB, outbox.Options{Lease: 2 * time.Second, CallTimeout: 5 * time.Second})
	require.Equal(t, time.Second, long.CallTimeout(), "a call timeout at or above the lease is kept below it")
}

func TestACrashBetweenTheCallAndTheSettleRedeliversUnderTheSameIdempotencyID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exec := notify(t, b, "n-crash")
	crashes := 1
	w := outbox.NewWorker(b.db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": b.provider}, Clock: b.clock,
		Lease: time.Minute, AfterCall: func(context.Context, model.OutboxMessage, error) error {
			if crashes > 0 {
				crashes--
				return errors.New("simulated crash")
			}
			return nil
		}})
	ctx := context.Background()
	rep, err := w.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, outbox.Report{Claimed: 1, Abandoned: 1}, rep)
	m, _, _ := status(t, b, exec)
	require.Equal(t, "PENDING", m, "nothing was settled")

	b.clock.Advance(time.Minute + time.Second)
	rep, err = w.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, outbox.Report{Claimed: 1, Delivered: 1}, rep)
	require.Equal(t, 2, b.provider.Calls(exec), "delivered again after the lease ran out")
	require.Equal(t, 1, b.provider.Delivered(), "under the same idempotency id: one effect")
	require.Equal(t, 1, auditCount(t, b, exec, "FEATURE_F02_DELIVERED"))
}

type providerFunc func(ctx context.Context, m model.OutboxMessage) error

func (f providerFunc) Deliver(ctx context.Context, m model.OutboxMessage) error { return f(ctx, m) }

func TestConcurrentWorkersNeverClaimTheSameMessage(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	b := setup(t)
	for i := 0; i < 8; i++ {
		notify(t, b, "k"+string(rune('a'+i)))
	}
	var mu sync.Mutex
	claimed := 0
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := outbox.NewWorker(b.db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": b.provider}, Clock: b.clock})
			rep, err := w.RunOnce(ctx, 8)
			require.NoError(t, err)
			mu.Lock()
			claimed += rep.Claimed
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.Equal(t, 8, claimed, "each message is claimed by exactly one worker")
	require.Equal(t, 8, b.provider.Delivered())
}
