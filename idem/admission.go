package idem

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemwork/idemwork/apperr"
)

// Limits bound what writes take from the database, so one key's queue, or one owner's, cannot
// hold every connection of the pool (SPEC §9 OVERLOADED).
type Limits struct {
	// KeyMaxConns is how many requests of one (owner, key) may be on the database path at once
	// (reading the key, waiting on its unique index); more wait in this process, holding no
	// connection, until one of them finishes. Sharing being off (Request.ShareInFlight) bypasses
	// the in-process flight, not this bound. 0: DefaultKeyMaxConns.
	KeyMaxConns int
	// OwnerMaxConns is how many connections one owner's writes may hold at once; a write beyond it
	// waits up to AcquireTimeout for one of them, then fails OVERLOADED. 0: half the pool.
	OwnerMaxConns int
	// AcquireTimeout bounds each wait for an owner's share (the pool's own wait is bounded by the
	// store's acquire timeout). 0: DefaultAcquireTimeout.
	AcquireTimeout time.Duration
}

// Defaults of Limits.
const (
	DefaultKeyMaxConns    = 8
	DefaultAcquireTimeout = 5 * time.Second
)

// admission hands out the per-key and per-owner shares of Limits. Entries exist only while
// someone holds or waits for them.
type admission struct {
	keyMax, ownerMax int
	timeout          time.Duration

	mu                   sync.Mutex
	keys                 map[flightKey]*share
	owners               map[string]*share
	freeKeys, freeOwners []*share
	keyWaiting           atomic.Int64
	ownerInUse           atomic.Int64
}

// share is a counting semaphore with a reference count for its map entry.
type share struct {
	slots chan struct{}
	refs  int
}

func newAdmission(l Limits, poolSize int) *admission {
	if l.KeyMaxConns <= 0 {
		l.KeyMaxConns = DefaultKeyMaxConns
	}
	if l.OwnerMaxConns <= 0 {
		l.OwnerMaxConns = max(poolSize/2, 1)
	}
	if l.AcquireTimeout <= 0 {
		l.AcquireTimeout = DefaultAcquireTimeout
	}
	return &admission{keyMax: l.KeyMaxConns, ownerMax: l.OwnerMaxConns, timeout: l.AcquireTimeout,
		keys: map[flightKey]*share{}, owners: map[string]*share{}}
}

func get[K comparable](a *admission, m map[K]*share, k K, size int, free *[]*share) *share {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := m[k]
	if s == nil {
		if n := len(*free); n > 0 {
			s, *free = (*free)[n-1], (*free)[:n-1]
		} else {
			s = &share{slots: make(chan struct{}, size)}
		}
		m[k] = s
	}
	s.refs++
	return s
}

// put drops a reference; an entry nobody holds or waits for leaves the map, and its (empty)
// semaphore is kept for the next key, a bounded few of them.
func put[K comparable](a *admission, m map[K]*share, k K, s *share, free *[]*share) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s.refs--; s.refs == 0 {
		delete(m, k)
		if len(*free) < 64 {
			*free = append(*free, s)
		}
	}
}

// enterKey waits, holding no connection, until the key has a free turn on the database path
// (or ctx ends). leaveKey gives the turn back.
func (a *admission) enterKey(ctx context.Context, k flightKey) (*share, error) {
	s := get(a, a.keys, k, a.keyMax, &a.freeKeys)
	select {
	case s.slots <- struct{}{}:
	default:
		a.keyWaiting.Add(1)
		select {
		case s.slots <- struct{}{}:
			a.keyWaiting.Add(-1)
		case <-ctx.Done():
			a.keyWaiting.Add(-1)
			put(a, a.keys, k, s, &a.freeKeys)
			return nil, ctx.Err()
		}
	}
	return s, nil
}

func (a *admission) leaveKey(k flightKey, s *share) {
	<-s.slots
	put(a, a.keys, k, s, &a.freeKeys)
}

// enterOwner takes one of the owner's shares of the pool, waiting at most the acquire timeout.
// leaveOwner gives it back.
func (a *admission) enterOwner(ctx context.Context, owner string) (*share, error) {
	s := get(a, a.owners, owner, a.ownerMax, &a.freeOwners)
	select {
	case s.slots <- struct{}{}:
	default:
		t := time.NewTimer(a.timeout)
		defer t.Stop()
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			put(a, a.owners, owner, s, &a.freeOwners)
			return nil, ctx.Err()
		case <-t.C:
			put(a, a.owners, owner, s, &a.freeOwners)
			return nil, apperr.New(apperr.Overloaded, "owner %s already holds %d database connections (its share of the pool) and none became free within %s; retry shortly", owner, a.ownerMax, a.timeout)
		}
	}
	a.ownerInUse.Add(1)
	return s, nil
}

func (a *admission) leaveOwner(owner string, s *share) {
	a.ownerInUse.Add(-1)
	<-s.slots
	put(a, a.owners, owner, s, &a.freeOwners)
}
