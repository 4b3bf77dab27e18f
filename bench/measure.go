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

	"github.com/idemwork/idemwork/storm/stormtypes"
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
	// Limit is the physical limit: the runner's statements in one round trip (a write), or one
	// primary-key SELECT of the key row (a replay).
	Limit Side `json:"limit"`
	// Ratio is runner ops/s ÷ raw ops/s: above 1 the runner is faster than the naive SQL.
	Ratio float64 `json:"ratio"`
	// Efficiency is runner ops/s ÷ limit ops/s: how close the runner comes to the limit (1).
	Efficiency float64 `json:"efficiency"`
	// RoundTrips is each side's round trips per op (the sides' roundTripsPerOp, together).
	RoundTrips SideRoundTrips `json:"roundTrips"`
	// SlicesPerSide is how many alternating slices each side ran.
	SlicesPerSide int `json:"slicesPerSide"`
}

// SideRoundTrips is the round trips of one op, per side.
type SideRoundTrips struct {
	Runner float64 `json:"runner"`
	Raw    float64 `json:"raw"`
	Limit  float64 `json:"limit"`
}

// sideKind is one side of a cell; the values index allSides.
type sideKind int

const (
	sideRunner sideKind = iota
	sideRaw
	sideLimit
)

var allSides = []sideKind{sideRunner, sideRaw, sideLimit}

func (k sideKind) String() string { return [...]string{"runner", "raw", "limit"}[k] }

// workload is the three sides' ops and what keeps them supplied.
type workload struct {
	name               string
	runner, raw, limit op
	// before, when set, runs ahead of each slice (outside the timed part) with how many ops the
	// coming slice of side may do at most, as far as the side's slices so far tell.
	before func(ctx context.Context, side sideKind, need int) error
}

func (wl workload) op(side sideKind) op {
	return [...]op{wl.runner, wl.raw, wl.limit}[side]
}

// sideRun accumulates one side of a cell over its slices.
type sideRun struct {
	op      op
	kind    sideKind
	workers []*worker
	ops     int
	elapsed time.Duration
	mallocs uint64
	maxRate float64 // ops/s of the fastest slice so far
	slices  int
}

func newSideRun(o op, kind sideKind, clients int) *sideRun {
	s := &sideRun{op: o, kind: kind, workers: make([]*worker, clients)}
	for i := range s.workers {
		s.workers[i] = &worker{id: i, lat: make([]time.Duration, 0, 4096), keyBuf: make([]byte, 0, 64)}
	}
	return s
}

// cellPlan is how a cell's time is cut between its sides: slices per side, each of slice
// length, after one warm-up slice per side.
func cellPlan(duration, slice time.Duration) (int, time.Duration) {
	perSide := duration / time.Duration(len(allSides))
	if slice > perSide {
		slice = perSide
	}
	n := int((perSide + slice/2) / slice)
	return max(n, 1), slice
}

// rotations order the sides round by round: over every six rounds each side runs first, second
// and third twice, and follows each other side as often as it precedes it.
var rotations = [6][3]int{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}, {0, 2, 1}, {1, 0, 2}}

// rotation is the sides (indexed like allSides) in the order of round i.
func rotation[T any](sides []T, i int) []T {
	r := rotations[i%len(rotations)]
	return []T{sides[r[0]], sides[r[1]], sides[r[2]]}
}

// measureCell runs the three sides of wl alternately, in slices ordered round by round as
// rotations says, until each had its third of the cell's duration.
func (h *harness) measureCell(ctx context.Context, wl workload, clients int) (Workload, error) {
	n, slice := cellPlan(h.opts.Duration, h.opts.Slice)
	sides := make([]*sideRun, len(allSides))
	for i, k := range allSides {
		sides[i] = newSideRun(wl.op(k), k, clients)
	}
	// Warm-up, discarded: new connections and their statement caches, first buffer growth.
	for _, s := range sides {
		if err := h.slice(ctx, wl, s, clients, min(slice, 200*time.Millisecond), false); err != nil {
			return Workload{}, err
		}
	}
	for i := range n {
		for _, s := range rotation(sides, i) {
			if err := h.slice(ctx, wl, s, clients, slice, true); err != nil {
				return Workload{}, err
			}
		}
	}
	cell := Workload{Name: wl.name, Clients: clients, Runner: sides[sideRunner].result(), Raw: sides[sideRaw].result(),
		Limit: sides[sideLimit].result(), SlicesPerSide: n}
	if cell.Raw.OpsPerSec > 0 {
		cell.Ratio = cell.Runner.OpsPerSec / cell.Raw.OpsPerSec
	}
	if cell.Limit.OpsPerSec > 0 {
		cell.Efficiency = cell.Runner.OpsPerSec / cell.Limit.OpsPerSec
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
		if err := wl.before(ctx, s.kind, need); err != nil {
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
		return fmt.Errorf("bench: %s %s with %d clients: %w", wl.name, s.kind, clients, err)
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

// percentileMs is the nearest-rank percentile p of d, in milliseconds (stormtypes.Percentile, the
// same rank the storm summary uses).
func percentileMs(d []time.Duration, p float64) float64 {
	ms := make([]float64, len(d))
	for i, v := range d {
		ms[i] = float64(v) / float64(time.Millisecond)
	}
	slices.Sort(ms)
	return stormtypes.Percentile(ms, p)
}
