package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"idemwork/storm"
)

// Side is what one side of a cell measured.
type Side struct {
	OpsPerSec float64 `json:"opsPerSec"`
	P50Ms     float64 `json:"p50Ms"`
	P99Ms     float64 `json:"p99Ms"`
	// AllocsPerOp is runtime.MemStats.Mallocs over the side's slices divided by its ops: the
	// process's allocations, pgx's included (both sides pay those alike).
	AllocsPerOp float64 `json:"allocsPerOp"`
	Ops         int     `json:"ops"`
	// RoundTripsPerOp is counted once per workload on a traced pool (see RoundTrips).
	RoundTripsPerOp float64 `json:"roundTripsPerOp"`
}

// Workload is one cell: a workload at one client count and one table size.
type Workload struct {
	Name    string `json:"name"`
	Clients int    `json:"clients"`
	// Rows is the filler level of the cell (rows of other owners bulk-loaded per table);
	// KeysInTable is the idempotency_record row count when the cell started (filler plus what the
	// bench itself wrote so far).
	Rows        int   `json:"rows"`
	KeysInTable int64 `json:"keysInTable"`
	Runner      Side  `json:"runner"`
	Raw         Side  `json:"raw"`
	// Ratio is runner ops/s ÷ raw ops/s: above 1 the runner is faster than the naive SQL.
	Ratio float64 `json:"ratio"`
	// SlicesPerSide is how many alternating slices each side ran.
	SlicesPerSide int `json:"slicesPerSide"`
}

// workload is one pair of ops and what keeps them supplied.
type workload struct {
	name        string
	runner, raw op
	// before, when set, runs ahead of each slice (outside the timed part) with how many ops the
	// coming slice may do at most, as far as the side's slices so far tell.
	before func(ctx context.Context, runner bool, need int) error
}

// sideRun accumulates one side of a cell over its slices.
type sideRun struct {
	op      op
	runner  bool
	workers []*worker
	ops     int
	elapsed time.Duration
	mallocs uint64
	maxRate float64 // ops/s of the fastest slice so far
	slices  int
}

func newSideRun(o op, runner bool, clients int) *sideRun {
	s := &sideRun{op: o, runner: runner, workers: make([]*worker, clients)}
	for i := range s.workers {
		s.workers[i] = &worker{id: i, lat: make([]time.Duration, 0, 4096), keyBuf: make([]byte, 0, 64)}
	}
	return s
}

func (s *sideRun) name() string {
	if s.runner {
		return "runner"
	}
	return "raw"
}

// cellPlan is how a cell's time is cut: slices per side, each of slice length, after one warm-up
// slice per side.
func cellPlan(duration, slice time.Duration) (int, time.Duration) {
	perSide := duration / 2
	if slice > perSide {
		slice = perSide
	}
	n := int((perSide + slice/2) / slice)
	return max(n, 1), slice
}

// measureCell runs the two sides of wl alternately (runner, raw, raw, runner, …) in slices until
// each had half of the cell's duration.
func (h *harness) measureCell(ctx context.Context, wl workload, clients int) (Workload, error) {
	n, slice := cellPlan(h.opts.Duration, h.opts.Slice)
	sides := [2]*sideRun{newSideRun(wl.runner, true, clients), newSideRun(wl.raw, false, clients)}
	// Warm-up, discarded: new connections and their statement caches, first buffer growth.
	for _, s := range sides {
		if err := h.slice(ctx, wl, s, clients, min(slice, 200*time.Millisecond), false); err != nil {
			return Workload{}, err
		}
	}
	for i := range n {
		first, second := sides[0], sides[1]
		if i%2 == 1 {
			first, second = second, first
		}
		for _, s := range []*sideRun{first, second} {
			if err := h.slice(ctx, wl, s, clients, slice, true); err != nil {
				return Workload{}, err
			}
		}
	}
	cell := Workload{Name: wl.name, Clients: clients, Runner: sides[0].result(), Raw: sides[1].result(), SlicesPerSide: n}
	if cell.Raw.OpsPerSec > 0 {
		cell.Ratio = cell.Runner.OpsPerSec / cell.Raw.OpsPerSec
	}
	return cell, nil
}

// slice runs one side with clients closed-loop workers for d.
func (h *harness) slice(ctx context.Context, wl workload, s *sideRun, clients int, d time.Duration, measure bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if wl.before != nil {
		// Half again the fastest rate so far over d, plus a floor for the first slice.
		need := int(s.maxRate*d.Seconds()*1.5) + 200*clients
		if err := wl.before(ctx, s.runner, need); err != nil {
			return err
		}
	}
	counts := make([]int, clients)
	errs := make([]error, clients)
	var failed atomic.Bool
	var wg sync.WaitGroup
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	deadline := start.Add(d)
	for i := range clients {
		w := s.workers[i]
		w.clients = clients
		wg.Go(func() {
			for !failed.Load() {
				t0 := time.Now()
				if !t0.Before(deadline) {
					return
				}
				err := s.op(ctx, w)
				lat := time.Since(t0)
				if err != nil {
					errs[i] = err
					failed.Store(true)
					return
				}
				w.seq++
				counts[i]++
				if measure {
					w.lat = append(w.lat, lat)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench: %s %s with %d clients: %w", wl.name, s.name(), clients, err)
	}
	ops := 0
	for _, c := range counts {
		ops += c
	}
	s.maxRate = max(s.maxRate, float64(ops)/elapsed.Seconds())
	if measure {
		s.ops += ops
		s.elapsed += elapsed
		s.mallocs += after.Mallocs - before.Mallocs
		s.slices++
	}
	return nil
}

func (s *sideRun) result() Side {
	var all []time.Duration
	for _, w := range s.workers {
		all = append(all, w.lat...)
	}
	r := Side{Ops: s.ops}
	if s.ops == 0 || s.elapsed <= 0 {
		return r
	}
	r.OpsPerSec = float64(s.ops) / s.elapsed.Seconds()
	r.AllocsPerOp = float64(s.mallocs) / float64(s.ops)
	r.P50Ms, r.P99Ms = percentileMs(all, 50), percentileMs(all, 99)
	return r
}

// percentileMs is the nearest-rank percentile p of d, in milliseconds (storm.Percentile, the
// same rank the storm summary uses).
func percentileMs(d []time.Duration, p float64) float64 {
	ms := make([]float64, len(d))
	for i, v := range d {
		ms[i] = float64(v) / float64(time.Millisecond)
	}
	slices.Sort(ms)
	return storm.Percentile(ms, p)
}
