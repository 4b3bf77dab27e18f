package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/outbox"
)

func notifyAs(t *testing.T, b bundle, owner, key string) string {
	t.Helper()
	ctx := context.Background()
	c, err := b.k.Create(ctx, model.CreateInput{Owner: owner, Module: kernel.ModuleCommitment, Title: "c", Payload: []byte(`{"status":"OPEN"}`)})
	require.NoError(t, err)
	res, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: owner, Module: kernel.ModuleCommitment, RecordID: c.Record.ID, FeatureID: "F02", Key: key})
	require.NoError(t, err)
	return res.Execution.ID
}

func messageID(t *testing.T, b bundle, execID string) string {
	t.Helper()
	var id string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT id FROM outbox_message WHERE execution_id = $1`, execID).Scan(&id))
	return id
}

func TestAScopedPassClaimsOnlyItsOwnersOrItsOwnMessages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	a1, a2, bob := notifyAs(t, b, "alice", "a1"), notifyAs(t, b, "alice", "a2"), notifyAs(t, b, "bob", "b1")
	w := outbox.NewWorker(b.db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": b.provider}, Clock: b.clock})

	rep, err := w.RunScoped(ctx, outbox.Scope{OwnerID: "alice", MessageIDs: []string{messageID(t, b, a2)}}, 10)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Delivered)
	for exec, want := range map[string]string{a1: "PENDING", a2: "DELIVERED", bob: "PENDING"} {
		m, _, _ := status(t, b, exec)
		require.Equal(t, want, m, "only the named message is claimed")
	}

	rep, err = w.RunScoped(ctx, outbox.Scope{OwnerID: "alice"}, 10)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Delivered, "alice's other message")
	m, _, attempts := status(t, b, bob)
	require.Equal(t, "PENDING", m, "an owner's pass never touches another owner's messages")
	require.Zero(t, attempts)

	_, err = w.RunScoped(ctx, outbox.Scope{MessageIDs: []string{"x"}}, 10)
	require.Error(t, err, "message ids are an owner's")
}

func TestTheCrashSwitchAbandonsClaimsOnlyWhileItIsOnAndTheRedeliveryHasOneEffect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	exec := notifyAs(t, b, "alice", "crash-switch")
	crash := &outbox.CrashSwitch{}
	w := outbox.NewWorker(b.db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": b.provider}, Clock: b.clock,
		Lease: 20 * time.Second, AfterCall: crash.AfterCall})

	crash.Set(true)
	require.True(t, crash.On())
	rep, err := w.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, outbox.Report{Claimed: 1, Abandoned: 1}, rep)
	m, e, attempts := status(t, b, exec)
	require.Equal(t, []string{"PENDING", "PENDING"}, []string{m, e}, "the provider delivered; the rows do not know")
	require.Equal(t, 1, attempts)
	require.True(t, b.provider.HasDelivered(exec))

	crash.Set(false)
	b.clock.Advance(20*time.Second + time.Millisecond)
	rep, err = w.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, outbox.Report{Claimed: 1, Delivered: 1}, rep, "off again: the next claim settles")
	require.Equal(t, 2, b.provider.Calls(exec), "called again with the same idempotency id")
	require.Equal(t, 1, b.provider.Delivered(), "one effect at the provider")
	require.Equal(t, 1, auditCount(t, b, exec, "FEATURE_F02_DELIVERED"))
}

func TestTheBackoffRangeIsWhatBackoffDrawsFrom(t *testing.T) {
	t.Parallel()
	w := outbox.NewWorker(nil, outbox.Options{BaseBackoff: 500 * time.Millisecond, MaxBackoff: 3 * time.Second})
	for n, want := range map[int][2]time.Duration{
		1: {400 * time.Millisecond, 600 * time.Millisecond},
		2: {800 * time.Millisecond, 1200 * time.Millisecond},
		3: {1600 * time.Millisecond, 2400 * time.Millisecond},
		4: {3 * time.Second, 3 * time.Second}, // 4 s nominal: capped at both ends
		9: {3 * time.Second, 3 * time.Second},
	} {
		lo, hi := w.BackoffRange(n)
		require.Equal(t, want, [2]time.Duration{lo, hi}, "attempt %d", n)
		for range 30 {
			d := w.Backoff(n)
			require.GreaterOrEqual(t, d, lo, "attempt %d", n)
			require.LessOrEqual(t, d, hi, "attempt %d", n)
		}
	}
	require.Equal(t, 500*time.Millisecond, w.Options().BaseBackoff)
	require.Equal(t, outbox.DefaultMaxAttempts, w.Options().MaxAttempts, "the defaults filled in")
}
