package idem

import "github.com/jackc/pgx/v5"

// slab is where one call's queued statements live: the reservation, the work's writes, the
// success row — a keyed call queues about eight, each its own allocation through pgx.Batch.Queue
// (and the batch's slice grown three times over). It is part of the call's own allocation; a
// statement past its room is queued by pgx.Batch.Queue as before. Nothing queued outlives the
// call: every plan is sent, or dropped, before the call returns.
type slab struct {
	qs [slabRoom]pgx.QueuedQuery
	n  int
}

// slabRoom covers a feature run's plan (reservation and prefetch, four writes, success) with a
// little room for a work that queues more.
const slabRoom = 10

// queue appends sql with args to b, as b.Queue does.
func (s *slab) queue(b *pgx.Batch, sql string, args ...any) *pgx.QueuedQuery {
	if s == nil || s.n == len(s.qs) {
		return b.Queue(sql, args...)
	}
	q := &s.qs[s.n]
	s.n++
	q.SQL, q.Arguments = sql, args
	if b.QueuedQueries == nil {
		b.QueuedQueries = make([]*pgx.QueuedQuery, 0, 8)
	}
	b.QueuedQueries = append(b.QueuedQueries, q)
	return q
}
