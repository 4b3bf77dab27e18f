package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"idemwork/store"
)

// RoundTrips is what one op of a workload sends to the server, per side.
type RoundTrips struct {
	Workload string         `json:"workload"`
	Runner   RoundTripTrace `json:"runner"`
	Raw      RoundTripTrace `json:"raw"`
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
	start, end time.Time
}

var (
	_ pgx.QueryTracer   = (*rtTracer)(nil)
	_ pgx.BatchTracer   = (*rtTracer)(nil)
	_ pgx.PrepareTracer = (*rtTracer)(nil)
)

func (t *rtTracer) begin(sql string) {
	t.mu.Lock()
	t.spans = append(t.spans, span{sql: sql, start: time.Now()})
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
	t.begin(shortSQL(d.SQL))
	return ctx
}

func (t *rtTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) { t.finish(true) }

func (t *rtTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	parts := make([]string, 0, d.Batch.Len())
	for _, q := range d.Batch.QueuedQueries {
		parts = append(parts, shortSQL(q.SQL))
	}
	t.begin("batch[" + strings.Join(parts, "; ") + "]")
	return ctx
}

func (t *rtTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (t *rtTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     { t.finish(true) }

func (t *rtTracer) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	t.begin("(prepare)")
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

// countRoundTrips runs each workload's ops on a traced pool over the same database: a few
// warm-up ops (statement caches), then measured ones one at a time, and returns per side the
// round trips per op and where an op's time goes.
func (h *harness) countRoundTrips(ctx context.Context, wls []workload, bind func(*target) []workload) ([]RoundTrips, error) {
	tr := &rtTracer{}
	// Both sides on small traced pools of their own over the same database; what Open sends
	// before the first op is dropped with the warm-up's spans.
	db, err := store.Open(ctx, h.env.DSN, store.Options{MaxConns: 2, Tracer: tr})
	if err != nil {
		return nil, fmt.Errorf("bench: traced pool: %w", err)
	}
	defer db.Close()
	pool, err := rawPool(ctx, h.env.DSN, 2, tr)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	traced := bind(newTarget(db, pool, h.fx, h.memMax))
	const warm, measured = 5, 40
	out := make([]RoundTrips, 0, len(wls))
	for i, wl := range traced {
		if wl.before != nil {
			for _, runner := range []bool{true, false} {
				if err := wl.before(ctx, runner, warm+measured); err != nil {
					return nil, err
				}
			}
		}
		// The sides alternate op by op, like the cells' slices, so drift hits both.
		sides := [2]struct {
			o     op
			w     *worker
			ops   [][]span
			total time.Duration
		}{{o: wl.runner, w: &worker{clients: 1}}, {o: wl.raw, w: &worker{clients: 1}}}
		for j := range warm + measured {
			for k := range 2 {
				s := &sides[(j+k)%2]
				tr.take()
				t0 := time.Now()
				if err := s.o(ctx, s.w); err != nil {
					return nil, fmt.Errorf("bench: round trips of %s: %w", wl.name, err)
				}
				d := time.Since(t0)
				s.w.seq++
				spans := tr.take()
				if j >= warm {
					s.ops = append(s.ops, spans)
					s.total += d
				}
			}
		}
		out = append(out, RoundTrips{Workload: wls[i].name,
			Runner: summarizeTrace(sides[0].ops, sides[0].total), Raw: summarizeTrace(sides[1].ops, sides[1].total)})
	}
	return out, nil
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
