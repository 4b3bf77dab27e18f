package idem

import (
	"sync"

	"github.com/jackc/pgx/v5"
)

// Prefetch is a read prepare needs whose statement does not depend on the reservation (the
// current row a call updates, with its lock). The runner sends it in the reservation's round
// trip, right behind the INSERT, where the statement itself must run only for a transaction
// that won the reservation — guarded by EXISTS (SELECT 1 FROM <Runner.Table> WHERE owner_id =
// $owner AND idempotency_key = $key AND reserved_xid = pg_current_xact_id_if_assigned()) — so
// that behind a reservation that lost it reads and locks nothing, and prepare never runs.
type Prefetch interface {
	// QueueHeld queues the read in b, guarded to run only in a transaction that holds the
	// reservation of (owner, key).
	QueueHeld(b *pgx.Batch, owner, key string)
	// TakeHeld reads its result from br (in queue order, whatever the reservation's outcome);
	// held says whether the reservation was won.
	TakeHeld(br pgx.BatchResults, held bool) error
}

// recentKeys are the keys this runner answered lately (executed, replayed, or refused from
// their row): a request for one of them is most likely a retry, whose replay is one read on its
// own; any other key is most likely fresh, and its read travels with BEGIN and the reservation.
// It only chooses the round trips, never an outcome. Bounded: two generations of at most
// recentPerGeneration keys, the older dropped whole when the newer fills.
type recentKeys struct {
	mu       sync.Mutex
	cur, old map[flightKey]struct{}
}

const recentPerGeneration = 8192

func (s *recentKeys) add(k flightKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cur[k]; ok {
		return
	}
	if s.cur == nil || len(s.cur) >= recentPerGeneration {
		s.old, s.cur = s.cur, make(map[flightKey]struct{}, 64)
	}
	s.cur[k] = struct{}{}
}

func (s *recentKeys) has(k flightKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cur[k]; ok {
		return true
	}
	_, ok := s.old[k]
	return ok
}
