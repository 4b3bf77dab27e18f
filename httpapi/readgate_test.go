package httpapi

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
)

// By default one owner runs as many reads at once as half the Ps (at least 1), leaving the
// other half to every other owner, and as many wait as ReadQueueFactor per slot or per CPU,
// whichever are more: a client with 100 reads in flight is paced by its turns, not refused.
func TestAnOwnersReadSlotsAndQueueFollowTheCPUs(t *testing.T) {
	t.Parallel()
	g := newReadGate(0, time.Second)
	require.Equal(t, max(runtime.GOMAXPROCS(0)/2, 1), g.max)
	require.Equal(t, DefaultOwnerMaxReads(), g.max)
	require.Equal(t, ReadQueueFactor*runtime.GOMAXPROCS(0), g.maxWaiting)
	require.Equal(t, ReadQueueFactor*max(runtime.GOMAXPROCS(0), 1), OwnerReadQueue(1))
	require.Equal(t, ReadQueueFactor*max(runtime.GOMAXPROCS(0), 50), OwnerReadQueue(50))
}

// An owner whose reads fill its slots and its whole queue does not delay another owner's read
// by one place: each owner has slots and a queue of its own, so alice's read enters at once
// while bob's flood waits and the rest of it is refused OVERLOADED on arrival.
func TestAnotherOwnersReadEntersAtOnceWhileOneOwnersFloodFillsItsQueue(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g := newReadGate(2, time.Minute)
	var held []func()
	for range 2 {
		leave, err := g.enter(ctx, "bob")
		require.NoError(t, err)
		held = append(held, leave)
	}
	entered := make(chan func(), g.maxWaiting)
	for range g.maxWaiting {
		go func() {
			if leave, err := g.enter(ctx, "bob"); err == nil {
				entered <- leave
			}
		}()
	}
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.owners["bob"].waiting == g.maxWaiting
	}, 30*time.Second, time.Millisecond, "bob's queue fills")

	_, err := g.enter(ctx, "bob")
	require.Equal(t, apperr.Overloaded, apperr.CodeOf(err), "bob's read beyond his queue is refused at once")

	aliceCtx, aliceCancel := context.WithCancel(ctx)
	aliceCancel() // entering must not wait at all: a cancelled context would end any wait
	leave, err := g.enter(aliceCtx, "alice")
	require.NoError(t, err, "alice enters at once, ahead of bob's %d waiting reads", g.maxWaiting)
	leave()

	for _, l := range held {
		l()
	}
	for range g.maxWaiting {
		(<-entered)()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Empty(t, g.owners, "no entry outlives its holders and waiters")
}
