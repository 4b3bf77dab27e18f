package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/storm"
)

// The workloads.
const (
	FreshKey   = "fresh-key"
	FeatureRun = "feature-run"
	ReplayHit  = "replay-hit"
)

// Defaults of Options.
const (
	DefaultDuration = 7 * time.Second
	DefaultSlice    = 250 * time.Millisecond
	// MaxClients bounds --clients (the pool needs one connection per client).
	MaxClients = 128
	// MaxRTT bounds --rtt.
	MaxRTT = time.Second
	// DefaultMemMaxContentLength is MEM-001's rule when Env does not say.
	DefaultMemMaxContentLength = 2000
)

// DefaultClients and DefaultRows are the cells `idemwork bench` measures without flags.
var (
	DefaultClients = []int{1, 4, 16}
	DefaultRows    = []int{0, 100_000}
)

// Options chooses what Run measures.
type Options struct {
	// Duration is the measured time of each cell (a workload at one client count and one table
	// size), split evenly between the runner, the raw and the limit side; a warm-up slice per side
	// comes on top.
	Duration time.Duration
	// Slice is how long one side runs before the other takes over.
	Slice time.Duration
	// Clients are the client counts every workload runs at.
	Clients []int
	// Rows are filler levels, ascending: every workload runs at the first; fresh-key and
	// replay-hit run again after loading up to each further level (growth).
	Rows []int
	// NoStorm skips the storms; StormRounds repeats them (default 3, the median is reported).
	NoStorm     bool
	StormRounds int
	// NoFairness skips the fairness cell (one owner's read flood against another's reads).
	NoFairness bool
	// RTT, when positive, puts every connection of the run (all sides, the storms and their
	// worker processes) behind a loopback proxy that delays each direction by RTT/2: the round
	// trip of a network between the application and PostgreSQL.
	RTT time.Duration
	// VerifyEvents, when positive, adds the verify cell: an owner with about that many audit
	// events is loaded, then verified (issue 22's goal: a million in 60 s).
	VerifyEvents int
}

// Normalized fills the defaults and checks o.
func (o Options) Normalized() (Options, error) {
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Slice == 0 {
		o.Slice = DefaultSlice
	}
	if o.Duration < 20*time.Millisecond || o.Slice < 10*time.Millisecond {
		return o, fmt.Errorf("bench: --duration must be at least 20ms and --slice at least 10ms")
	}
	if o.RTT < 0 || o.RTT > MaxRTT {
		return o, fmt.Errorf("bench: --rtt wants a round trip of 0 (none) to %s, got %s", MaxRTT, o.RTT)
	}
	if len(o.Clients) == 0 {
		o.Clients = DefaultClients
	}
	if o.Rows == nil {
		o.Rows = DefaultRows
	}
	if len(o.Rows) == 0 {
		o.Rows = []int{0}
	}
	for _, c := range o.Clients {
		if c < 1 || c > MaxClients {
			return o, fmt.Errorf("bench: --clients wants counts of 1-%d, got %d", MaxClients, c)
		}
	}
	for _, r := range o.Rows {
		if r < 0 || r > 100_000_000 {
			return o, fmt.Errorf("bench: --rows wants filler levels of 0-100000000, got %d", r)
		}
	}
	if o.VerifyEvents < 0 || o.VerifyEvents > 100_000_000 {
		return o, fmt.Errorf("bench: --verify-events wants 0 (none) to 100000000 audit events, got %d", o.VerifyEvents)
	}
	o.Clients = slices.Clone(o.Clients)
	o.Rows = slices.Clone(o.Rows)
	slices.Sort(o.Rows)
	o.Rows = slices.Compact(o.Rows)
	if o.StormRounds <= 0 {
		o.StormRounds = DefaultStormRound
	}
	return o, nil
}

// Env is where Run measures.
type Env struct {
	// DSN is the database Run writes into: it migrates it and loads filler into it. Give it a
	// scratch database (CreateScratch).
	DSN string
	// Display names the server in the report (never a password).
	Display string
	// Executable, WorkerArgs and WorkerEnv start the multi-process storm's children (see
	// storm.Env; default: this binary's `storm-worker`). WorkerDSNVar, when set, names the
	// environment variable through which the children get the database URL: Run sets it to the
	// URL it measures through (the proxy's under RTT), so the children go where the rest goes.
	Executable   string
	WorkerArgs   []string
	WorkerEnv    []string
	WorkerDSNVar string
	// Serve serves the HTTP API over a kernel, as `idemwork serve` does: the fairness cell
	// measures through it (nil: the cell is skipped).
	Serve storm.ServeFunc
	// FloodArgs, when set, start the fairness cell's flood in a child process (Executable
	// FloodArgs…, which runs FloodMain); nil fires it from this process.
	FloodArgs []string
	// Progress receives a line per finished step (nil: quiet).
	Progress io.Writer
	// MemMaxContentLength is MEM-001's rule (default 2000).
	MemMaxContentLength int
}

// Report is everything Run measured.
type Report struct {
	Setup      Setup        `json:"setup"`
	Workloads  []Workload   `json:"workloads"`
	Growth     []Growth     `json:"growth"`
	RoundTrips []RoundTrips `json:"roundTrips"`
	Storm      *StormReport `json:"storm"`
	// Fairness is issue 28's cell: another owner's read p99 under one owner's read flood.
	Fairness *FairnessReport `json:"fairness"`
	// Verify is the verify cell (null without --verify-events).
	Verify *VerifyCell `json:"verify"`
	// Targets are issue 16's (and 22's) goals this run has cells for, met or not.
	Targets []Target `json:"targets"`
}

// Setup describes the run.
type Setup struct {
	Database          string  `json:"database"`
	Server            string  `json:"server"`
	Fsync             string  `json:"fsync"`
	SynchronousCommit string  `json:"synchronousCommit"`
	CPUs              int     `json:"cpus"`
	Go                string  `json:"go"`
	CellMs            float64 `json:"cellMs"`
	SliceMs           float64 `json:"sliceMs"`
	Clients           []int   `json:"clients"`
	Rows              []int   `json:"rows"`
	ElapsedSeconds    float64 `json:"elapsedSeconds"`
	// RTTMs is the round trip the proxy adds (0: no proxy, the server's own endpoint).
	RTTMs float64 `json:"rttMs"`
	// Proxy says where the proxy listened and what it forwarded to (null without one).
	Proxy *ProxySetup `json:"proxy"`
	// RoundTripMs is the median time of SELECT 1 on the measured pool: what one round trip costs
	// in this run, network and server together.
	RoundTripMs float64 `json:"roundTripMs"`
}

// ProxySetup is the latency proxy of a run.
type ProxySetup struct {
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"` // "tcp 127.0.0.1:5432", "unix /path/.s.PGSQL.5432"
}

type harness struct {
	env  Env
	opts Options
	// dsn is where every pool of the run connects: env.DSN, or the proxy in front of it.
	dsn string
	db  *store.DB
	// raw is the hand-written side's pool on the same database, sized like the store's.
	raw    *pgxpool.Pool
	fx     *fixtures
	memMax int
}

func (h *harness) logf(format string, args ...any) {
	if h.env.Progress != nil {
		fmt.Fprintf(h.env.Progress, format, args...)
	}
}

// workloads binds the three workloads to t.
func workloads(t *target) []workload {
	feature := func(ctx context.Context, side sideKind, need int) error {
		return t.fx.records(side).ensure(ctx, t.pool, need)
	}
	return []workload{
		{name: FreshKey, runner: t.runnerFreshKey, raw: t.rawFreshKey, limit: t.limitFreshKey},
		{name: FeatureRun, runner: t.runnerFeatureRun, raw: t.rawFeatureRun, limit: t.limitFeatureRun, before: feature},
		{name: ReplayHit, runner: t.runnerReplayHit, raw: t.rawReplayHit, limit: t.limitReplayHit},
	}
}

// poolConns sizes the measured pool: a connection per client and a few for setup.
func poolConns(clients []int) int32 { return int32(max(slices.Max(clients), 8) + 2) }

// Run migrates env.DSN's database and measures every workload, the storms and growth.
func Run(ctx context.Context, env Env, opts Options) (Report, error) {
	opts, err := opts.Normalized()
	if err != nil {
		return Report{}, err
	}
	started := time.Now()
	dsn, proxy, err := startProxy(env.DSN, opts.RTT)
	if err != nil {
		return Report{}, err
	}
	if proxy != nil {
		defer proxy.Close()
	}
	db, err := store.Open(ctx, dsn, store.Options{Migrate: true, MaxConns: poolConns(opts.Clients)})
	if err != nil {
		return Report{}, err
	}
	defer db.Close()
	raw, err := rawPool(ctx, dsn, poolConns(opts.Clients), nil)
	if err != nil {
		return Report{}, err
	}
	defer raw.Close()
	h := &harness{env: env, opts: opts, dsn: dsn, db: db, raw: raw, fx: newFixtures(), memMax: env.MemMaxContentLength}
	if h.memMax <= 0 {
		h.memMax = DefaultMemMaxContentLength
	}
	cellMs, sliceMs := func() (float64, float64) {
		n, slice := cellPlan(opts.Duration, opts.Slice)
		return ms(2 * time.Duration(n) * slice), ms(slice)
	}()
	rep := Report{Workloads: []Workload{}, Growth: []Growth{}, Setup: Setup{Database: env.Display, CPUs: runtime.NumCPU(),
		Go: runtime.Version(), CellMs: cellMs, SliceMs: sliceMs, Clients: opts.Clients, Rows: opts.Rows, RTTMs: ms(opts.RTT)}}
	if proxy != nil {
		network, addr := proxy.Upstream()
		rep.Setup.Proxy = &ProxySetup{Listen: proxy.Addr().String(), Upstream: network + " " + addr}
	}
	if err := db.Q(ctx).QueryRow(ctx, `SELECT version(), current_setting('fsync'), current_setting('synchronous_commit')`).
		Scan(&rep.Setup.Server, &rep.Setup.Fsync, &rep.Setup.SynchronousCommit); err != nil {
		return rep, err
	}
	if rep.Setup.RoundTripMs, err = roundTripMs(ctx, db); err != nil {
		return rep, err
	}
	h.logf("bench: %s; %s; fsync=%s synchronous_commit=%s\n", env.Display, rep.Setup.Server, rep.Setup.Fsync, rep.Setup.SynchronousCommit)
	if proxy != nil {
		h.logf("bench: every connection through a %s round-trip proxy on %s to %s\n", opts.RTT, rep.Setup.Proxy.Listen, rep.Setup.Proxy.Upstream)
	}
	h.logf("bench: one round trip (SELECT 1, median) takes %.3f ms\n", rep.Setup.RoundTripMs)

	main, err := newTarget(db, raw, h.fx, h.memMax)
	if err != nil {
		return rep, err
	}
	wls := workloads(main)
	replayKeys := min(max(16*slices.Max(opts.Clients), 64), 512)
	if err := main.provisionReplayKeys(ctx, replayKeys, 8); err != nil {
		return rep, err
	}
	if opts.Rows[0] > 0 {
		if err := h.fill(ctx, 0, opts.Rows[0]); err != nil {
			return rep, err
		}
	}

	if rep.RoundTrips, err = h.countRoundTrips(ctx); err != nil {
		return rep, err
	}
	trips := map[string]RoundTrips{}
	for _, rt := range rep.RoundTrips {
		trips[rt.Workload] = rt
		h.logf("  round trips per op  %-12s runner %.1f  raw %.1f  limit %.1f\n", rt.Workload, rt.Runner.PerOp, rt.Raw.PerOp, rt.Limit.PerOp)
		if u := rt.RunnerUnseen; u != nil {
			h.logf("  round trips per op  %-12s runner %.1f for a key another process committed\n", rt.Workload, u.PerOp)
		}
	}

	cell := func(wl workload, clients, rows int) error {
		var keys int64
		if err := db.Q(ctx).QueryRow(ctx, `SELECT count(*) FROM idempotency_record`).Scan(&keys); err != nil {
			return err
		}
		c, err := h.measureCell(ctx, wl, clients)
		if err != nil {
			return err
		}
		c.Rows, c.KeysInTable = rows, keys
		rt := trips[wl.name]
		c.Runner.RoundTripsPerOp, c.Raw.RoundTripsPerOp, c.Limit.RoundTripsPerOp = rt.Runner.PerOp, rt.Raw.PerOp, rt.Limit.PerOp
		c.RoundTrips = SideRoundTrips{Runner: rt.Runner.PerOp, Raw: rt.Raw.PerOp, Limit: rt.Limit.PerOp}
		rep.Workloads = append(rep.Workloads, c)
		h.logf("  %-12s clients=%-3d rows=%-8d runner %8.0f ops/s  raw %8.0f ops/s  limit %8.0f ops/s  ratio %.2f  efficiency %.2f\n",
			c.Name, c.Clients, c.Rows, c.Runner.OpsPerSec, c.Raw.OpsPerSec, c.Limit.OpsPerSec, c.Ratio, c.Efficiency)
		return nil
	}
	for _, wl := range wls {
		for _, c := range opts.Clients {
			if err := cell(wl, c, opts.Rows[0]); err != nil {
				return rep, err
			}
		}
	}
	if n := h.fx.runnerRecords.reused.Load() + h.fx.rawRecords.reused.Load() + h.fx.limitRecords.reused.Load(); n > 0 {
		h.logf("  note: %d feature runs reused a record (the supply ran short)\n", n)
	}

	if !opts.NoStorm {
		h.logf("  storms (%d rounds)…\n", opts.StormRounds)
		if rep.Storm, err = h.runStorms(ctx, opts.StormRounds); err != nil {
			return rep, err
		}
	}

	if !opts.NoFairness && env.Serve != nil {
		h.logf("  fairness: %d GETs of a %d-revision record by one owner (%v in flight), another owner's GETs meanwhile…\n", FairnessFlood, FairnessRevisions, FairnessInFlight)
		if rep.Fairness, err = h.runFairness(ctx, FairnessFlood, FairnessInFlight); err != nil {
			return rep, err
		}
		f := rep.Fairness
		for _, fl := range f.Floods {
			h.logf("  fairness: %d in flight: other owner's GET p99 %.2f ms alone, %.2f ms under the flood (p50 %.2f, max %.2f, %d samples): ratio %.2f (want ≤ %.0f)\n",
				fl.InFlight, fl.AloneP99Ms, fl.LoadedP99Ms, fl.LoadedP50Ms, fl.LoadedMaxMs, fl.Samples, fl.Ratio, f.Target)
		}
	}

	grown := map[string]bool{FreshKey: true, ReplayHit: true}
	for i := 1; i < len(opts.Rows); i++ {
		if err := h.fill(ctx, opts.Rows[i-1], opts.Rows[i]); err != nil {
			return rep, err
		}
		for _, wl := range wls {
			if !grown[wl.name] {
				continue
			}
			for _, c := range opts.Clients {
				if err := cell(wl, c, opts.Rows[i]); err != nil {
					return rep, err
				}
			}
		}
	}
	rep.Growth = growth(rep.Workloads, opts.Rows)
	if opts.VerifyEvents > 0 {
		h.logf("  verify of an owner with %d audit events…\n", opts.VerifyEvents)
		if rep.Verify, err = h.measureVerify(ctx, opts.VerifyEvents); err != nil {
			return rep, err
		}
		h.logf("  verify --owner %s: %d audit events (%.0f rows/s) in %.1fs, ok %v\n", rep.Verify.Owner, rep.Verify.AuditEvents,
			rep.Verify.RowsPerSecond, rep.Verify.Seconds, rep.Verify.OK)
	}
	rep.Targets = targets(rep)
	rep.Setup.ElapsedSeconds = time.Since(started).Seconds()
	return rep, nil
}

// growth compares the grown cells with the same workload and clients at the first level.
func growth(cells []Workload, rows []int) []Growth {
	type k struct {
		name    string
		clients int
	}
	first := map[k]Workload{}
	for _, c := range cells {
		if c.Rows == rows[0] {
			first[k{c.Name, c.Clients}] = c
		}
	}
	out := []Growth{}
	for _, c := range cells {
		f, ok := first[k{c.Name, c.Clients}]
		if !ok || c.Rows == rows[0] || (c.Name != FreshKey && c.Name != ReplayHit) {
			continue
		}
		g := Growth{Name: c.Name, Clients: c.Clients, Rows: c.Rows, Ratio: c.Ratio, Efficiency: c.Efficiency}
		if f.Runner.OpsPerSec > 0 && f.Raw.OpsPerSec > 0 {
			g.RunnerVsFirst, g.RawVsFirst = c.Runner.OpsPerSec/f.Runner.OpsPerSec, c.Raw.OpsPerSec/f.Raw.OpsPerSec
		}
		if f.Limit.OpsPerSec > 0 {
			g.LimitVsFirst = c.Limit.OpsPerSec / f.Limit.OpsPerSec
		}
		out = append(out, g)
	}
	return out
}
