package idem

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemwork/idemwork/internal/failedpgx"
)

// The flow (flow.go) asks for its statements in SPEC §4.2's order — the key read, the
// reservation and the prefetched reads, the work's queued writes, the success row, COMMIT — as
// a plan: pgx batches of statements, each read back in order. Which of them share a round trip
// is the batcher's decision, and only its: batching, it reads a key answered lately alone (a
// retry's replay: one round trip), pipelines any other key's read with BEGIN and the
// reservation (aheadOf), sends RunAhead's whole transaction in one round trip, and leaves the
// work's writes and the success row for the driver's final round trip with COMMIT. Unbatched
// (a test's switch, export_test.go's Unbatched: a service gains nothing from more round trips),
// each statement of the same plans takes a round trip of its own, BEGIN and COMMIT too: the
// same statements in the same order, the same results. Nothing but round trips may depend on
// the switch (plan_test.go runs SPEC §4.2's scenarios both ways).

// batcher executes the flow's plans.
type batcher struct {
	// oneByOne sends each statement in its own round trip.
	oneByOne bool
}

// readsAlone reports whether the key is read alone, before any transaction, rather than with
// the reservation: batching, for a key answered lately (recent: most likely a retry, whose
// replay is then one round trip); unbatched, never — the read is the plan's first statement.
func (b batcher) readsAlone(recent bool) bool { return recent && !b.oneByOne }

// send sends plan on q (in one round trip, batching); its results are read in order.
func (b batcher) send(ctx context.Context, q Querier, plan *pgx.Batch) pgx.BatchResults {
	if b.oneByOne {
		return &oneByOne{ctx: ctx, q: q, plan: plan.QueuedQueries}
	}
	return q.SendBatch(ctx, plan)
}

// sendAll sends plan on q and reads it to its end (nothing when it is empty): the first error.
func (b batcher) sendAll(ctx context.Context, q Querier, plan *pgx.Batch) error {
	if plan.Len() == 0 {
		return nil
	}
	return b.send(ctx, q, plan).Close()
}

// flush sends, unbatched, what the work queued in final and the success row behind it, so the
// driver's COMMIT goes alone; batching, they wait for the COMMIT's round trip.
func (b batcher) flush(ctx context.Context, q Querier, final *pgx.Batch) error {
	if !b.oneByOne {
		return nil
	}
	err := b.sendAll(ctx, q, final)
	final.QueuedQueries = final.QueuedQueries[:0]
	return err
}

// ahead returns the Querier a policy's key read runs on when the read travels in front of
// tail: batching, its one statement and tail go in one round trip; unbatched, each alone, in
// the same order. Either way the results of tail are left in the aheadOf's br (sendRest sends
// tail alone when the read sent nothing).
func (b batcher) ahead(q Querier, tail *pgx.Batch, s *slab) *aheadOf {
	return &aheadOf{q: q, tail: tail, oneByOne: b.oneByOne, slab: s}
}

// aheadOf is the Querier of a key read sent in front of tail (see batcher.ahead); its
// statement is sent first, tail behind it (BEGIN ahead of both when the transaction has not
// begun); the results of tail are left in br, in order, for the runner to read.
type aheadOf struct {
	q        Querier
	tail     *pgx.Batch
	br       pgx.BatchResults // set once sent
	oneByOne bool
	slab     *slab // where the read's statement is queued
}

var (
	_ Querier = (*aheadOf)(nil)

	errOneStatement = errors.New("idem: a key read sent with the reservation may run one query")
)

// sendRest sends tail when the read sent nothing, and returns its results.
func (a *aheadOf) sendRest(ctx context.Context, b batcher) pgx.BatchResults {
	if a.br == nil {
		a.br = b.send(ctx, a.q, a.tail)
	}
	return a.br
}

func (a *aheadOf) send(ctx context.Context, sql string, args []any) bool {
	if a.br != nil {
		return false
	}
	b := pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 1+len(a.tail.QueuedQueries))}
	a.slab.queue(&b, sql, args...)
	b.QueuedQueries = append(b.QueuedQueries, a.tail.QueuedQueries...)
	a.br = batcher{oneByOne: a.oneByOne}.send(ctx, a.q, &b)
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
		return failedpgx.Rows(errOneStatement), errOneStatement
	}
	return a.br.Query()
}

func (a *aheadOf) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errOneStatement
}

func (a *aheadOf) SendBatch(context.Context, *pgx.Batch) pgx.BatchResults {
	return failedBatch{errOneStatement}
}

// oneByOne is a plan's results read as the statements are sent, each alone in its round trip
// when its result is read, on q. As in a pipelined batch, once a statement failed the ones behind
// it are not run and report its error.
type oneByOne struct {
	ctx  context.Context
	q    Querier
	plan []*pgx.QueuedQuery
	err  error
}

var _ pgx.BatchResults = (*oneByOne)(nil)

var errPlanRead = errors.New("idem: read past the end of a plan")

func (s *oneByOne) next() (*pgx.QueuedQuery, error) {
	if s.err != nil {
		return nil, s.err
	}
	if len(s.plan) == 0 {
		return nil, errPlanRead
	}
	q := s.plan[0]
	s.plan = s.plan[1:]
	return q, nil
}

func (s *oneByOne) Exec() (pgconn.CommandTag, error) {
	q, err := s.next()
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := s.q.Exec(s.ctx, q.SQL, q.Arguments...)
	s.err = err
	return tag, err
}

func (s *oneByOne) Query() (pgx.Rows, error) {
	q, err := s.next()
	if err != nil {
		return failedpgx.Rows(err), err
	}
	rows, err := s.q.Query(s.ctx, q.SQL, q.Arguments...)
	s.err = err
	return rows, err
}

func (s *oneByOne) QueryRow() pgx.Row {
	q, err := s.next()
	if err != nil {
		return failedRow{err}
	}
	return oneRow{s, s.q.QueryRow(s.ctx, q.SQL, q.Arguments...)}
}

// oneRow is a row of a oneByOne: its error stops the plan, as a QueryRow's error in a batch does.
type oneRow struct {
	s   *oneByOne
	row pgx.Row
}

func (r oneRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		r.s.err = err
	}
	return err
}

// Close sends the statements not read yet, running their callbacks, as a batch's Close does;
// it returns the first error.
func (s *oneByOne) Close() error {
	for len(s.plan) > 0 && s.err == nil {
		n, q := len(s.plan), s.plan[0]
		if q.Fn == nil {
			_, _ = s.Exec()
			continue
		}
		if err := q.Fn(s); err != nil && s.err == nil {
			s.err = err
		}
		if len(s.plan) == n { // a callback that read nothing
			s.plan = s.plan[1:]
		}
	}
	s.plan = nil
	return s.err
}

func (s *oneByOne) Tx() pgx.Tx { return nil }
