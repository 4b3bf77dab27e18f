package storm

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/stormrows"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// blockersEvery is how often a sample also says what the waiting sessions wait on (it calls
// pg_blocking_pids, which takes the lock manager's locks: not on every sample).
const blockersEvery = 250 * time.Millisecond

// sampler reads the storm's sessions every SampleEvery until stopped.
type sampler struct {
	db     *store.DB
	prefix string
	notify func(stormtypes.LockSample)

	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	last stormtypes.LockSample
	n    int
}

func startSampler(ctx context.Context, db *store.DB, prefix string, notify func(stormtypes.LockSample)) *sampler {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &sampler{db: db, prefix: prefix, notify: notify, cancel: cancel, done: make(chan struct{})}
	go s.loop(sctx, ctx.Done())
	return s
}

func (s *sampler) loop(ctx context.Context, stormDone <-chan struct{}) {
	defer close(s.done)
	t := time.NewTicker(stormtypes.SampleEvery)
	defer t.Stop()
	var blockersAt time.Time
	for {
		sample, err := s.sample(ctx, time.Since(blockersAt) >= blockersEvery)
		if err == nil {
			if len(sample.Blockers) > 0 {
				blockersAt = sample.At
			}
			s.mu.Lock()
			s.n++
			if len(sample.Blockers) == 0 && sample.Waiting > 0 {
				sample.Blockers = s.last.Blockers // read at most every blockersEvery: the last ones stand
			}
			if sample.Waiting > s.last.PeakWaiting {
				sample.PeakWaiting, sample.PeakAt = sample.Waiting, sample.At
			} else {
				sample.PeakWaiting, sample.PeakAt = s.last.PeakWaiting, s.last.PeakAt
			}
			s.last = sample
			s.mu.Unlock()
			if s.notify != nil {
				s.notify(sample)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample takes one look; with blockers it also asks whom the waiters wait on.
func (s *sampler) sample(ctx context.Context, blockers bool) (stormtypes.LockSample, error) {
	x := stormtypes.LockSample{At: time.Now()}
	c, err := stormrows.AppSessions(ctx, s.db, s.prefix)
	if err != nil {
		return x, err
	}
	x.Waiting, x.InXact, x.Sessions = c.Waiting, c.InXact, c.Sessions
	if x.Waiting == 0 || !blockers {
		return x, nil
	}
	bs, err := stormrows.AppBlockers(ctx, s.db, s.prefix, 3)
	if err != nil {
		return x, err
	}
	x.Blockers = make([]stormtypes.Blocker, 0, len(bs))
	for _, b := range bs {
		x.Blockers = append(x.Blockers, stormtypes.Blocker{PID: b.PID, Application: b.Application, State: b.State, XactMs: b.XactMs, Query: b.Query,
			LockType: b.LockType, Waiters: b.Waiters, Storm: strings.HasPrefix(b.Application, s.prefix)})
	}
	return x, nil
}

// stop ends sampling and returns what it saw.
func (s *sampler) stop() stormtypes.LockStats {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	st := stormtypes.LockStats{PeakWaiting: s.last.PeakWaiting, Samples: s.n, EveryMs: float64(stormtypes.SampleEvery.Microseconds()) / 1000}
	if !s.last.PeakAt.IsZero() {
		at := s.last.PeakAt
		st.PeakAt = &at
	}
	return st
}

// settleTimeout bounds how long a storm waits for its own sessions' transactions to end before
// it reads the verdict anyway (and says so).
const settleTimeout = 10 * time.Second

// settle waits until none of the storm's sessions has a transaction open, at most bound, and
// returns how many still had one. A request cut short by a stop, or a worker process that died,
// can leave its backend finishing (or rolling back) after the request returned; judging then
// would read the database halfway. A backend waiting on a lock notices that its client left
// only when it wakes, so after a stop the storm's own still-active statements are cancelled
// first (pg_cancel_backend; its clients have all returned by then).
func settle(ctx context.Context, db *store.DB, prefix string, bound time.Duration, stopped bool) (int, error) {
	deadline := time.Now().Add(bound)
	if stopped {
		if err := stormrows.CancelAppStatements(ctx, db, prefix); err != nil {
			return 0, err
		}
	}
	for {
		open, err := stormrows.AppOpenTransactions(ctx, db, prefix)
		if err == nil && open == 0 {
			return 0, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return open, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}
