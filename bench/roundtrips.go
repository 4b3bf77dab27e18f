package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/store"
)

// RoundTrips is what one op of a workload sends to the server, per side.
type RoundTrips struct {
	Workload string         `json:"workload"`
	Runner   RoundTripTrace `json:"runner"`
	Raw      RoundTripTrace `json:"raw"`
	Limit    RoundTripTrace `json:"limit"`
	// RunnerUnseen, for the replay, is the runner's replay of a key it has not answered itself
	// (committed by another process): its key read travels with BEGIN and the reservation, as a
	// fresh key's does, and the hit ends with an empty COMMIT. Runner is the replay of a key the
	// runner answered, as every replay of the cells is (their runner committed the keys).
	RunnerUnseen *RoundTripTrace `json:"runnerUnseen,omitempty"`
}

// RoundTripTrace counts the round trips of one op, one client, warm statement cache: each
// Exec/Query/QueryRow (BEGIN and COMMIT included) is one, a pgx.Batch is one, and a statement
// prepared for the first time on a connection adds one (none once warm). Statements lists one
// op's, in order, with StatementMs their mean time from send to result (network + server). OpMs is
// a whole op; ClientMs = OpMs − the statements: the time the op spends in Go around and between
// its statements.
type RoundTripTrace struct {
	PerOp       float64   `json:"perOp"`
	Statements  []string  `json:"statements"`
	StatementMs []float64 `json:"statementMs"`
	OpMs        float64   `json:"opMs"`
	ClientMs    float64   `json:"clientMs"`
}

// rtTracer records what pgx sends on a separate small pool where ops run one at a time.
type rtTracer struct {
	mu    sync.Mutex
	spans []span // one per round trip
}

type span struct {
	sql        string
	stmts      []tracedStmt // what the round trip sent (none for a prepare)
	start, end time.Time
}

// tracedStmt is one statement as sent: its exact text and its arguments' Go types.
type tracedStmt struct {
	sql      string
	argTypes []string
}

func newTracedStmt(sql string, args []any) tracedStmt {
	types := make([]string, len(args))
	for i, a := range args {
		types[i] = fmt.Sprintf("%T", a)
	}
	return tracedStmt{sql: sql, argTypes: types}
}

// flatten lists the statements of spans in the order they were sent, round trips aside.
func flatten(spans []span) []tracedStmt {
	var out []tracedStmt
	for _, s := range spans {
		out = append(out, s.stmts...)
	}
	return out
}

var (
	_ pgx.QueryTracer   = (*rtTracer)(nil)
	_ pgx.BatchTracer   = (*rtTracer)(nil)
	_ pgx.PrepareTracer = (*rtTracer)(nil)
)

func (t *rtTracer) begin(sql string, stmts []tracedStmt) {
	t.mu.Lock()
	t.spans = append(t.spans, span{sql: sql, stmts: stmts, start: time.Now()})
	t.mu.Unlock()
}

func (t *rtTracer) finish(keep bool) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.spans); n > 0 {
		if keep {
			t.spans[n-1].end = now
		} else {
			t.spans = t.spans[:n-1]
		}
	}
}

func (t *rtTracer) take() []span {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.spans
	t.spans = nil
	return s
}

func (t *rtTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.begin(shortSQL(d.SQL), []tracedStmt{newTracedStmt(d.SQL, d.Args)})
	return ctx
}

func (t *rtTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) { t.finish(true) }

func (t *rtTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	parts := make([]string, 0, d.Batch.Len())
	stmts := make([]tracedStmt, 0, d.Batch.Len())
	for _, q := range d.Batch.QueuedQueries {
		parts = append(parts, shortSQL(q.SQL))
		stmts = append(stmts, newTracedStmt(q.SQL, q.Arguments))
	}
	t.begin("batch["+strings.Join(parts, "; ")+"]", stmts)
	return ctx
}

func (t *rtTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (t *rtTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     { t.finish(true) }

func (t *rtTracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	t.begin("(prepare)", nil)
	return ctx
}

func (t *rtTracer) TracePrepareEnd(_ context.Context, _ *pgx.Conn, d pgx.TracePrepareEndData) {
	t.finish(!d.AlreadyPrepared) // a statement already prepared sent nothing
}

// shortSQL is a statement with its whitespace collapsed, cut at 400 bytes.
func shortSQL(sql string) string {
	s := strings.Join(strings.Fields(sql), " ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// countRoundTrips runs each workload's ops on traced pools over the same database (through the
// proxy when there is one): first one runner op of each write workload, whose statements the
// limit side learns; then a few warm-up ops (statement caches) and measured ones one at a time,
// the three sides alternating op by op. It returns per side the round trips per op and where an
// op's time goes, and fails when a write's limit op did not send exactly the runner's statements.
func (h *harness) countRoundTrips(ctx context.Context) ([]RoundTrips, error) {
	tr := &rtTracer{}
	// Every side on small traced pools of their own over the same database; what Open sends
	// before the first op is dropped with the warm-up's spans.
	db, err := store.Open(ctx, h.dsn, store.Options{MaxConns: 2, Tracer: tr})
	if err != nil {
		return nil, fmt.Errorf("bench: traced pool: %w", err)
	}
	defer db.Close()
	pool, err := rawPool(ctx, h.dsn, 2, tr)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	t, err := newTarget(db, pool, h.fx, h.memMax)
	if err != nil {
		return nil, err
	}
	if err := t.learnPlans(ctx, tr); err != nil {
		return nil, err
	}
	const warm, measured = 5, 40
	out := []RoundTrips{}
	for _, wl := range workloads(t) {
		if wl.before != nil {
			for _, side := range allSides {
				if err := wl.before(ctx, side, warm+measured); err != nil {
					return nil, err
				}
			}
		}
		sides := make([]*traced, len(allSides))
		for i, side := range allSides {
			sides[i] = &traced{o: wl.op(side), w: &worker{clients: 1}}
		}
		var unseen *RoundTripTrace
		if wl.name == ReplayHit {
			// This runner has answered none of the keys (the cells' runner committed them): its
			// first replay of each is a replay of another process's key. Trace those, then replay
			// as the cells' runner does, keys it has answered.
			first := &traced{o: wl.op(sideRunner), w: &worker{clients: 1}}
			for j := range warm + measured {
				if err := first.once(ctx, tr, j >= warm); err != nil {
					return nil, fmt.Errorf("bench: round trips of %s: %w", wl.name, err)
				}
			}
			u := summarizeTrace(first.ops, first.total)
			unseen = &u
		}
		// The sides alternate op by op, like the cells' slices, so drift hits all alike.
		for j := range warm + measured {
			for _, s := range rotation(sides, j) {
				if err := s.once(ctx, tr, j >= warm); err != nil {
					return nil, fmt.Errorf("bench: round trips of %s: %w", wl.name, err)
				}
			}
		}
		runner, limit := sides[sideRunner], sides[sideLimit]
		if _, ok := writePaths[wl.name]; ok {
			if err := sameStatements(wl.name, flatten(runner.ops[len(runner.ops)-1]), flatten(limit.ops[len(limit.ops)-1])); err != nil {
				return nil, err
			}
		}
		out = append(out, RoundTrips{Workload: wl.name, Runner: summarizeTrace(runner.ops, runner.total),
			Raw: summarizeTrace(sides[sideRaw].ops, sides[sideRaw].total), Limit: summarizeTrace(limit.ops, limit.total), RunnerUnseen: unseen})
	}
	return out, nil
}

// traced is one side's op as the round-trip count runs it, and the spans of its measured ops.
type traced struct {
	o     op
	w     *worker
	ops   [][]span
	total time.Duration
}

// once runs the op alone on the traced pools and, when measured, keeps its spans and time.
func (s *traced) once(ctx context.Context, tr *rtTracer, measured bool) error {
	tr.take() // whatever came before belongs to no op
	t0 := time.Now()
	if err := s.o(ctx, s.w); err != nil {
		return err
	}
	d := time.Since(t0)
	s.w.seq++
	if spans := tr.take(); measured {
		s.ops = append(s.ops, spans)
		s.total += d
	}
	return nil
}

// summarizeTrace averages the ops' spans per position (the paths are deterministic; if the ops
// differ in shape, the statement times are those of the last op).
func summarizeTrace(ops [][]span, total time.Duration) RoundTripTrace {
	n := len(ops)
	last := ops[n-1]
	trips, same := 0, true
	var inStatements time.Duration
	for _, op := range ops {
		trips += len(op)
		same = same && len(op) == len(last)
		for _, s := range op {
			inStatements += s.end.Sub(s.start)
		}
	}
	t := RoundTripTrace{PerOp: float64(trips) / float64(n), OpMs: ms(total) / float64(n),
		ClientMs: ms(total-inStatements) / float64(n)}
	for i, s := range last {
		t.Statements = append(t.Statements, s.sql)
		d := s.end.Sub(s.start)
		if same {
			d = 0
			for _, op := range ops {
				d += op[i].end.Sub(op[i].start)
			}
			d /= time.Duration(n)
		}
		t.StatementMs = append(t.StatementMs, ms(d))
	}
	return t
}
