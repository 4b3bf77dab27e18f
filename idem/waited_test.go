package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
)

type runResult struct {
	res idem.Result[widget]
	err error
}

// await receives a call's result, failing the test when none comes within 30 s.
func await(t *testing.T, ch <-chan runResult, what string) runResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("waited 30 s for %s", what)
		return runResult{}
	}
}

// queuedBehind runs a call under key whose work holds its reservation open, then a second call
// of the same key with body label that does not share in-process flights (as another process
// would not): it waits until that call queues on the unique index, lets the first commit, and
// returns both results.
func queuedBehind(t *testing.T, ctx context.Context, b *testBundle, key, label string) (first, queued runResult) {
	t.Helper()
	g := newGate(t)
	firstDone, queuedDone := make(chan runResult, 1), make(chan runResult, 1)
	go func() {
		res, err := b.runHeld(ctx, idem.Request{Owner: "alice", Key: key}, "one", held{g: g})
		firstDone <- runResult{res, err}
	}()
	g.AwaitHeld(t)
	go func() {
		res, err := b.run(ctx, idem.Request{Owner: "alice", Key: key, ShareInFlight: boolp(false)}, label)
		queuedDone <- runResult{res, err}
	}()
	require.Eventually(t, func() bool {
		return b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
	}, 30*time.Second, 10*time.Millisecond, "the second call queues on the unique index")
	g.Open()
	return await(t, firstDone, "the first call"), await(t, queuedDone, "the queued call")
}

// SPEC §4.2 and §4.4: a request that waited on the unique index for the transaction holding its
// key is REPLAYED from the row that transaction committed, with waited true; a replay of a key
// already committed did not wait.
func TestACallThatQueuedOnTheUniqueIndexReplaysTheCommittedResultAndSaysItWaited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	first, queued := queuedBehind(t, ctx, b, "k", "one")

	require.NoError(t, first.err)
	require.Equal(t, idemtype.Executed, first.res.Outcome)
	require.False(t, first.res.Waited, "the call that reserved the key waited for no one")
	require.NoError(t, queued.err)
	require.Equal(t, idemtype.Replayed, queued.res.Outcome)
	require.True(t, queued.res.Waited, "it queued behind the first call's transaction")
	require.Equal(t, first.res.Value, queued.res.Value)
	require.Equal(t, int32(1), b.works.Load())

	again, err := b.run(ctx, idem.Request{Owner: "alice", Key: "k", ShareInFlight: boolp(false)}, "one")
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	require.False(t, again.Waited, "a replay of a committed key waits for no one")
}

// An error a request gets after such a wait says so too (idem.WaitedOnIndex): here another
// body under the key, IDEMPOTENCY_KEY_REUSED.
func TestAnErrorAfterAWaitOnTheUniqueIndexSaysItWaited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	first, queued := queuedBehind(t, ctx, b, "k", "two")

	require.NoError(t, first.err)
	requireCode(t, queued.err, apperr.KeyReused)
	require.True(t, idem.WaitedOnIndex(queued.err), "the reuse was found after a wait on the index")

	_, err := b.run(ctx, idem.Request{Owner: "alice", Key: "k", ShareInFlight: boolp(false)}, "two")
	requireCode(t, err, apperr.KeyReused)
	require.False(t, idem.WaitedOnIndex(err), "found at once, on a committed key")
}
