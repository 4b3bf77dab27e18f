package idem

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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

// aheadOf is the Querier a policy's key read runs on when the read travels with the
// reservation: its one statement is sent first, tail behind it, in one round trip (BEGIN ahead
// of both when the transaction has not begun); the results of tail are left in br, in order, for
// the runner to read.
type aheadOf struct {
	q    Querier
	tail *pgx.Batch
	br   pgx.BatchResults // set once sent
}

var (
	_ Querier = (*aheadOf)(nil)

	errOneStatement = errors.New("idem: a key read sent with the reservation may run one query")
)

func (a *aheadOf) send(ctx context.Context, sql string, args []any) bool {
	if a.br != nil {
		return false
	}
	b := pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 1+len(a.tail.QueuedQueries))}
	b.Queue(sql, args...)
	b.QueuedQueries = append(b.QueuedQueries, a.tail.QueuedQueries...)
	a.br = a.q.SendBatch(ctx, &b)
	return true
}

func (a *aheadOf) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if !a.send(ctx, sql, args) {
		return failedRow{errOneStatement}
	}
	return a.br.QueryRow()
}

func (a *aheadOf) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if !a.send(ctx, sql, args) {
		return nil, errOneStatement
	}
	return a.br.Query()
}

func (a *aheadOf) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errOneStatement
}

func (a *aheadOf) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults {
	return failedBatch{errOneStatement}
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
