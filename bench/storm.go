package bench

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/storm"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// Storm sizes.
const (
	StormRequests     = 1000 // in-process requests on one key, all released at once
	StormProcesses    = 4
	StormPerProcess   = 100
	StormPoolConns    = 64 // the in-process storm's pool (idemwork's default for the embedded cluster)
	DefaultStormRound = 3
)

// StormReport compares how long same-key storms take to resolve with one lone request.
type StormReport struct {
	// Lone is the latency of one create on a fresh key with nothing else running.
	Lone LoneLatency `json:"lone"`
	Runs []StormRun  `json:"runs"`
}

// LoneLatency summarises the lone requests, taken between the storms.
type LoneLatency struct {
	P50Ms   float64 `json:"p50Ms"`
	P99Ms   float64 `json:"p99Ms"`
	Samples int     `json:"samples"`
}

// StormRun is one kind of storm, repeated.
type StormRun struct {
	Name        string `json:"name"`
	Requests    int    `json:"requests"`
	Processes   int    `json:"processes"`
	Concurrency int    `json:"concurrency"` // per process
	Share       bool   `json:"share"`
	// WallMs is the median, over the repeats, of the time from release to the last response;
	// WallsMs lists every repeat.
	WallMs  float64   `json:"wallMs"`
	WallsMs []float64 `json:"wallsMs"`
	// VsLone is WallMs ÷ the lone request's p50.
	VsLone float64 `json:"vsLone"`
	// P50Ms and P99Ms are per-request latencies of the median repeat.
	P50Ms    float64        `json:"p50Ms"`
	P99Ms    float64        `json:"p99Ms"`
	Outcomes map[string]int `json:"outcomes"` // of the median repeat
	Waited   int            `json:"waited"`
	// Verified is true when every repeat left exactly one execution for its key and every
	// response named it.
	Verified bool     `json:"verified"`
	Problems []string `json:"problems,omitempty"`
}

type stormShot struct {
	wall     time.Duration
	lat      []time.Duration
	outcomes map[string]int
	waited   int
	problems []string
}

// runStorms alternates the three storms rounds times, with lone requests between them.
func (h *harness) runStorms(ctx context.Context, rounds int) (*StormReport, error) {
	db, err := store.Open(ctx, h.dsn, store.Options{MaxConns: StormPoolConns})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	k := kernel.New(db, kernel.NewRegistry(kernel.NewRules(h.memMax)), kernel.Options{})

	// Warm every connection of the pool, and its statement cache on the contended path too: a
	// no-share storm queues on the unique index and takes the after-conflict read.
	if _, err := h.inprocStorm(ctx, k, StormPoolConns*3, false); err != nil {
		return nil, err
	}
	if _, err := h.inprocStorm(ctx, k, StormPoolConns*3, false); err != nil {
		return nil, err
	}
	// And the process at a storm's size: the first 1,000 goroutines this process runs at once
	// allocate their goroutines, their stacks and the runtime's wait records, which later storms
	// reuse. A first storm that pays for them (and for the GC they bring on) measures the
	// process's warm-up, not the storm.
	if _, err := h.inprocStorm(ctx, k, StormRequests, true); err != nil {
		return nil, err
	}

	type kind struct {
		run  StormRun
		fire func() (stormShot, error)
	}
	kinds := []*kind{
		{run: StormRun{Name: "inproc-share", Requests: StormRequests, Processes: 1, Concurrency: StormRequests, Share: true},
			fire: func() (stormShot, error) { return h.inprocStorm(ctx, k, StormRequests, true) }},
		{run: StormRun{Name: "inproc-no-share", Requests: StormRequests, Processes: 1, Concurrency: StormRequests, Share: false},
			fire: func() (stormShot, error) { return h.inprocStorm(ctx, k, StormRequests, false) }},
		{run: StormRun{Name: fmt.Sprintf("%d-processes", StormProcesses), Requests: StormProcesses * StormPerProcess,
			Processes: StormProcesses, Concurrency: min(StormPerProcess, stormtypes.DefaultConcurrency), Share: true},
			fire: func() (stormShot, error) { return h.processStorm(ctx, k) }},
		{run: StormRun{Name: "inproc-floor", Requests: StormRequests, Processes: 1, Concurrency: StormRequests, Share: true},
			fire: func() (stormShot, error) { return h.floorStorm(ctx, k, StormRequests) }},
	}
	shots := make([][]stormShot, len(kinds))
	var lone []time.Duration
	w := &worker{keyBuf: make([]byte, 0, 64)}
	for range rounds {
		for i, kd := range kinds {
			for range 5 {
				t0 := time.Now()
				if _, err := k.Create(ctx, model.CreateInput{Owner: Owner, Module: kernel.ModuleNote, Key: w.newKey("lone-"),
					Title: noteTitle, Payload: notePayload}); err != nil {
					return nil, fmt.Errorf("bench: lone request: %w", err)
				}
				lone = append(lone, time.Since(t0))
			}
			shot, err := kd.fire()
			if err != nil {
				return nil, fmt.Errorf("bench: storm %s: %w", kd.run.Name, err)
			}
			shots[i] = append(shots[i], shot)
		}
	}
	rep := &StormReport{Lone: LoneLatency{P50Ms: percentileMs(lone, 50), P99Ms: percentileMs(lone, 99), Samples: len(lone)}}
	for i, kd := range kinds {
		r := kd.run
		ss := shots[i]
		sort.Slice(ss, func(a, b int) bool { return ss[a].wall < ss[b].wall })
		r.Verified = true
		for _, s := range ss {
			r.WallsMs = append(r.WallsMs, ms(s.wall))
			if len(s.problems) > 0 {
				r.Verified = false
				r.Problems = append(r.Problems, s.problems...)
			}
		}
		med := ss[len(ss)/2]
		r.WallMs = ms(med.wall)
		if rep.Lone.P50Ms > 0 {
			r.VsLone = r.WallMs / rep.Lone.P50Ms
		}
		r.P50Ms, r.P99Ms = percentileMs(med.lat, 50), percentileMs(med.lat, 99)
		r.Outcomes, r.Waited = med.outcomes, med.waited
		rep.Runs = append(rep.Runs, r)
	}
	return rep, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// inprocStorm releases n goroutines at once, each creating the same record with the same key,
// and times release → last response.
func (h *harness) inprocStorm(ctx context.Context, k *kernel.Kernel, n int, share bool) (stormShot, error) {
	w := &worker{keyBuf: make([]byte, 0, 64)}
	in := model.CreateInput{Owner: Owner, Module: kernel.ModuleNote, Key: w.newKey("storm-"), Title: noteTitle,
		Payload: notePayload, ShareInFlight: &share}
	type result struct {
		end      time.Time
		lat      time.Duration
		outcome  string
		waited   bool
		recordID string
	}
	results := make([]result, n)
	var parked, done sync.WaitGroup
	parked.Add(n)
	release := make(chan struct{})
	var start time.Time
	for i := range n {
		done.Go(func() {
			parked.Done()
			<-release
			t0 := time.Now()
			res, err := k.Create(ctx, in)
			r := result{end: time.Now(), lat: time.Since(t0), outcome: string(res.Outcome), waited: res.Waited}
			if err != nil {
				r.outcome = errorCode(err)
			} else if res.Record != nil {
				r.recordID = res.Record.ID
			}
			results[i] = r
		})
	}
	parked.Wait()
	start = time.Now()
	close(release)
	done.Wait()

	shot := stormShot{outcomes: map[string]int{}}
	ids := map[string]bool{}
	var last time.Time
	for _, r := range results {
		shot.outcomes[r.outcome]++
		shot.lat = append(shot.lat, r.lat)
		if r.waited {
			shot.waited++
		}
		if r.recordID != "" {
			ids[r.recordID] = true
		}
		if r.end.After(last) {
			last = r.end
		}
	}
	shot.wall = last.Sub(start)
	if shot.outcomes[string(idemtype.Executed)] != 1 {
		shot.problems = append(shot.problems, fmt.Sprintf("%d EXECUTED, want 1", shot.outcomes[string(idemtype.Executed)]))
	}
	if len(ids) != 1 || shot.outcomes[string(idemtype.Executed)]+shot.outcomes[string(idemtype.Replayed)]+shot.outcomes[string(idemtype.Joined)] != n {
		shot.problems = append(shot.problems, fmt.Sprintf("%d distinct records over %d responses (%v)", len(ids), n, shot.outcomes))
	}
	var revisions, audits int
	if err := k.DB().Q(ctx).QueryRow(ctx, `SELECT (SELECT count(*) FROM record_revision WHERE owner_id = $1 AND idempotency_key = $2),
			(SELECT count(*) FROM audit_event WHERE owner_id = $1 AND idempotency_key = $2)`, Owner, in.Key).Scan(&revisions, &audits); err != nil {
		return shot, err
	}
	if revisions != 1 || audits != 1 {
		shot.problems = append(shot.problems, fmt.Sprintf("the database holds %d revisions and %d audit events for the key, want 1 and 1", revisions, audits))
	}
	return shot, nil
}

// floorStorm is the in-process shared storm's floor: the same n goroutines released at once,
// the first to run doing a lone create on a fresh key while every other only takes a mutex and
// parks on a channel that create's end closes — what the scheduler alone costs to wake, park and
// wake again n goroutines around one request, with none of the runner's work per follower.
func (h *harness) floorStorm(ctx context.Context, k *kernel.Kernel, n int) (stormShot, error) {
	w := &worker{keyBuf: make([]byte, 0, 64)}
	in := model.CreateInput{Owner: Owner, Module: kernel.ModuleNote, Key: w.newKey("floor-"), Title: noteTitle, Payload: notePayload}
	var mu sync.Mutex
	var leader chan struct{}
	ends := make([]time.Time, n)
	lat := make([]time.Duration, n)
	var outcome idemtype.Outcome
	var leaderErr error
	var parked, done sync.WaitGroup
	parked.Add(n)
	release := make(chan struct{})
	for i := range n {
		done.Go(func() {
			parked.Done()
			<-release
			t0 := time.Now()
			mu.Lock()
			ch, follow := leader, leader != nil
			if !follow {
				leader = make(chan struct{})
				ch = leader
			}
			mu.Unlock()
			if follow {
				<-ch
			} else {
				res, err := k.Create(ctx, in)
				outcome, leaderErr = res.Outcome, err
				close(ch)
			}
			ends[i], lat[i] = time.Now(), time.Since(t0)
		})
	}
	parked.Wait()
	start := time.Now()
	close(release)
	done.Wait()
	if leaderErr != nil {
		return stormShot{}, leaderErr
	}
	shot := stormShot{lat: lat, outcomes: map[string]int{string(outcome): 1, "PARKED": n - 1}}
	var last time.Time
	for _, e := range ends {
		if e.After(last) {
			last = e
		}
	}
	shot.wall = last.Sub(start)
	if outcome != idemtype.Executed {
		shot.problems = append(shot.problems, fmt.Sprintf("the floor's create was %s, not EXECUTED", outcome))
	}
	return shot, nil
}

// processStorm is `idemwork storm --n 400 --processes 4 create`: four child processes of this
// binary (storm-worker) behind a barrier, verified by the storm engine.
func (h *harness) processStorm(ctx context.Context, k *kernel.Kernel) (stormShot, error) {
	w := &worker{keyBuf: make([]byte, 0, 64)}
	spec := stormtypes.Spec{Op: stormtypes.OpCreate, N: StormProcesses * StormPerProcess, Processes: StormProcesses, Share: true,
		Create: model.CreateInput{Owner: Owner, Module: kernel.ModuleNote, Key: w.newKey("pstorm-"), Title: noteTitle, Payload: notePayload}}
	env := h.stormEnv(k)
	events := make(chan stormtypes.Event, spec.N)
	var lat []time.Duration
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for ev := range events {
			lat = append(lat, time.Duration(ev.LatencyMs*float64(time.Millisecond)))
		}
	}()
	sum, err := storm.Run(ctx, env, spec, events)
	close(events)
	<-collected
	if err != nil {
		return stormShot{}, err
	}
	shot := stormShot{wall: time.Duration(sum.WallMs * float64(time.Millisecond)), lat: lat, outcomes: sum.Outcomes, waited: sum.Waited}
	if !sum.Verified.Agrees {
		shot.problems = append(shot.problems, sum.Verified.Problems...)
		if len(sum.Verified.Problems) == 0 {
			shot.problems = append(shot.problems, "the storm engine's verification disagrees")
		}
	}
	return shot, nil
}

// errorCode is the code of a failed request (INTERNAL when uncoded).
func errorCode(err error) string { return string(apperr.CodeOf(err)) }

// stormEnv is the multi-process storm's environment: its children connect to the URL the run
// measures through (the proxy's under --rtt), given in the job and, when the host names one, in
// the worker's own variable.
func (h *harness) stormEnv(k *kernel.Kernel) storm.Env {
	workerEnv := slices.Clone(h.env.WorkerEnv)
	if h.env.WorkerDSNVar != "" {
		workerEnv = append(workerEnv, h.env.WorkerDSNVar+"="+h.dsn)
	}
	return storm.Env{Kernel: k, DSN: h.dsn, Executable: h.env.Executable, WorkerArgs: h.env.WorkerArgs, WorkerEnv: workerEnv}
}
