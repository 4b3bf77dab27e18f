package httpapi

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/idemwork/idemwork/apperr"
)

// readGate bounds how many reads of one owner run at once (Options.OwnerMaxReads). A read is
// mostly work for the CPUs — the server detoasting a snapshot, this process decoding and encoding
// it — so an owner holding its whole share of connections (half the pool) with reads still takes
// every CPU from the others: the owner's reads beyond this bound wait here, holding nothing, and
// past the wait are 503 OVERLOADED. The default bound is half this process's Ps (GOMAXPROCS), at
// least 1: a read is a chain — this process, the database's backend, this process again — that
// keeps about one CPU busy, so an owner's reads at most take half the CPUs and every other owner
// finds the other half free (an idle P waiting on the network sees its request at once, instead
// of a busy one noticing it at the scheduler's next poll). Measured in the fairness cell, 5 runs
// alternated (docs/benchmarks.md): the other owner's p99 under the flood was lower in every pair
// than with a slot per P, and the flooding owner's reads took about twice as long.
// At most OwnerReadQueue(bound) wait — ReadQueueFactor per slot, or per
// CPU when there are more CPUs than slots: a client that keeps 100 reads in flight is paced by
// its turns, parked at no cost, rather than refused and firing again at once. The rest of a
// flood is refused on arrival, spread over the time it arrives in, instead of waking together when their waits run
// out (2,000 reads released at once all timed out in the same instant, and the burst of their
// answers stalled every other owner's reads for seconds). Entries exist only while someone holds
// or waits for them. Another owner never queues here behind the flood: each owner has slots of
// its own.
type readGate struct {
	max, maxWaiting int
	wait            time.Duration

	mu     sync.Mutex
	owners map[string]*readSlots
}

type readSlots struct {
	slots   chan struct{}
	refs    int // holders and waiters
	waiting int
}

// ReadQueueFactor is how many reads of one owner may wait for each of its read slots (or each
// CPU, when there are more: OwnerReadQueue).
const ReadQueueFactor = 64

// OwnerReadQueue is how many reads of one owner may wait when maxReads of them run at once.
func OwnerReadQueue(maxReads int) int {
	return ReadQueueFactor * max(maxReads, runtime.GOMAXPROCS(0))
}

// DefaultOwnerMaxReads is Options.OwnerMaxReads when 0: half this process's Ps (GOMAXPROCS), at
// least 1.
func DefaultOwnerMaxReads() int { return max(runtime.GOMAXPROCS(0)/2, 1) }

func newReadGate(maxReads int, wait time.Duration) *readGate {
	if maxReads <= 0 {
		maxReads = DefaultOwnerMaxReads()
	}
	return &readGate{max: maxReads, maxWaiting: OwnerReadQueue(maxReads), wait: wait, owners: map[string]*readSlots{}}
}

// enter takes one of owner's read slots, waiting at most the gate's wait; release gives it back.
func (g *readGate) enter(ctx context.Context, owner string) (release func(), err error) {
	g.mu.Lock()
	s := g.owners[owner]
	if s == nil {
		s = &readSlots{slots: make(chan struct{}, g.max)}
		g.owners[owner] = s
	}
	s.refs++
	g.mu.Unlock()
	leave := func() {
		g.mu.Lock()
		if s.refs--; s.refs == 0 {
			delete(g.owners, owner)
		}
		g.mu.Unlock()
	}
	select {
	case s.slots <- struct{}{}:
	default:
		g.mu.Lock()
		if s.waiting >= g.maxWaiting {
			g.mu.Unlock()
			leave()
			return nil, apperr.New(apperr.Overloaded, "owner %s already runs %d reads at once (http.owner_max_reads) with %d more waiting; retry shortly", owner, g.max, g.maxWaiting)
		}
		s.waiting++
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			s.waiting--
			g.mu.Unlock()
		}()
		t := time.NewTimer(g.wait)
		defer t.Stop()
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			leave()
			return nil, ctx.Err()
		case <-t.C:
			leave()
			return nil, apperr.New(apperr.Overloaded, "owner %s already runs %d reads at once (http.owner_max_reads) and none finished within %s; retry shortly", owner, g.max, g.wait)
		}
	}
	return func() {
		<-s.slots
		leave()
	}, nil
}
