package outbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"idemwork/idem"
	"idemwork/internal/testdb"
	"idemwork/kernel"
	"idemwork/outbox"
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
	k := kernel.New(idem.NewRunner(db.DB, idem.Options{Clock: clock}), kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
	return bundle{db: db, k: k, clock: clock, provider: outbox.NewMemoryProvider()}
}

// notify creates an OPEN commitment and runs F02 (outbox mode), returning the execution id.
func notify(t *testing.T, b bundle, key string) string {
	t.Helper()
	ctx := context.Background()
	c, err := b.k.Create(ctx, kernel.CreateInput{Owner: "alice", Module: kernel.ModuleCommitment, Title: "c", Payload: []byte(`{"status":"OPEN"}`)})
	require.NoError(t, err)
	res, err := b.k.RunFeature(ctx, kernel.FeatureInput{Owner: "alice", Module: kernel.ModuleCommitment, RecordID: c.Record.ID, FeatureID: "F02", Key: key})
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

func TestAFailingProviderIsRetriedWithBackoffThenFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	exec := notify(t, b, "n2")
	b.provider.FailNext(100)
	w := outbox.NewWorker(b.db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": b.provider}, Clock: b.clock,
		MaxAttempts: 3, BaseBackoff: time.Minute})
	ctx := context.Background()

	rep, err := w.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Retried)
	rep, err = w.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Zero(t, rep.Claimed, "not due before its backoff")

	b.clock.Advance(61 * time.Second)
	rep, err = w.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Retried)
	b.clock.Advance(121 * time.Second) // the second backoff doubles
	rep, err = w.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Failed)
	m, e, attempts := status(t, b, exec)
	require.Equal(t, "FAILED", m)
	require.Equal(t, "FAILED", e)
	require.Equal(t, 3, attempts)
}

func TestConcurrentWorkersNeverClaimTheSameMessage(t *testing.T) {
	t.Parallel()
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
			rep, err := w.RunOnce(context.Background(), 8)
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
