package outbox_test

import (
	"context"
	"errors"
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
