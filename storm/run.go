package storm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// stormRun is one storm in progress.
type stormRun struct {
	env    Env
	spec   stormtypes.Spec
	col    *collector
	faults faults // for the requests this process executes
	// local serves the in-process requests and the in-process server: a kernel over a pool of
	// the storm's own (named p0) when Env.DSN is set, else Env.Kernel.
	local   *kernel.Kernel
	servers servers
	claim   string
	// tagged: every database session of the storm carries its application_name, so it can be
	// sampled and waited for.
	tagged bool
}

// Run fires spec's storm and returns its summary, verified against Env.Kernel's database.
// events, when not nil, receives one Event per finished request as it happens; it is a bounded
// channel the caller owns: Run never closes it and returns only after every event has been
// delivered (or ctx is done). Latency is measured before an event is queued, so a slow consumer
// never distorts it.
//
// The storm's own sessions (this process's pool when Env.DSN is set, its worker processes and
// servers) are named AppNamePrefix(spec.ID)…: a sampler watches their locks while the storm
// runs, and before judging, Run waits (at most settleTimeout plus the hold) until none of them
// has a transaction open. When ctx ends the storm stops: requests not yet answered are
// CANCELLED, and the summary still says what the database holds. On an error after the storm
// started, Run still returns what it measured.
func Run(ctx context.Context, env Env, spec stormtypes.Spec, events chan<- stormtypes.Event) (stormtypes.Summary, error) {
	spec, err := spec.Normalized()
	if err != nil {
		return stormtypes.Summary{}, err
	}
	if env.Kernel == nil {
		return stormtypes.Summary{}, errors.New("storm: Env.Kernel is required (the verdict is read from its database)")
	}
	home := env.Kernel.DB()
	before, err := readKeyState(ctx, home, spec)
	if err != nil {
		return stormtypes.Summary{}, fmt.Errorf("storm: read the key before the storm: %w", err)
	}
	r := &stormRun{env: env, spec: spec, local: env.Kernel, col: newCollector(ctx, spec.N, events), faults: faults{hold: spec.Hold}}
	if spec.FailFirst {
		r.faults.fail = (&faultOnce{}).fault
	}
	ownServer := spec.Via == stormtypes.ViaHTTP && len(spec.URLs) == 0 && spec.Servers <= 1
	localNeeded := ownServer || (spec.Processes == 1 && spec.Via == stormtypes.ViaInproc)
	closeLocal := func() {}
	// Against running servers (URLs) the sessions are theirs: nothing of the storm's to watch.
	r.tagged = len(spec.URLs) == 0 && (env.DSN != "" || !localNeeded)
	if localNeeded && env.DSN != "" {
		want := spec.Concurrency + 2
		if ownServer {
			want = spec.Concurrency*spec.Processes + 2
		}
		k, closeK, err := openKernel(ctx, env.DSN, kernelOptions{appName: appName(spec.ID, 'p', 0), readOnly: home.ReadOnly,
			maxConns: poolSize(want, env.MaxConns), ttl: env.Kernel.Runner().TTL(), clock: env.Kernel.Runner().Clock(),
			registry: env.Kernel.Registry})
		if err != nil {
			r.col.finish()
			return stormtypes.Summary{}, err
		}
		closeLocal = sync.OnceFunc(closeK)
		defer closeLocal()
		r.local = k
	}

	stopServers, err := r.targets(ctx, ownServer)
	if err != nil {
		r.col.finish()
		return stormtypes.Summary{}, err
	}
	var smp *sampler
	if r.tagged {
		smp = startSampler(ctx, home, stormtypes.AppNamePrefix(spec.ID), env.OnLocks)
	}

	var release time.Time
	if spec.Processes == 1 {
		release, err = runInProcess(ctx, r)
	} else {
		release, err = runChildren(ctx, r)
	}
	r.col.finish()
	stopServers()
	stopped := ctx.Err() != nil

	vctx := ctx
	if stopped {
		// A stopped storm still reports what the database holds.
		var cancel context.CancelFunc
		vctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), settleTimeout+spec.Hold+10*time.Second)
		defer cancel()
	}
	open, settleErr := 0, error(nil)
	if r.tagged {
		closeLocal() // its sessions end; a transaction still open there rolls back
		open, settleErr = settle(vctx, home, stormtypes.AppNamePrefix(spec.ID), settleTimeout+spec.Hold, stopped)
	}
	sum := r.col.summarize(spec, release, stopped, r.servers.urls)
	if smp != nil {
		sum.Locks = smp.stop()
	}
	sum.Verified = verify(vctx, home, spec, before, r.col.results, r.col.got, sum.Successes())
	if settleErr != nil {
		unread(&sum.Verified, "check that the storm's sessions had ended", settleErr)
	} else if open > 0 {
		sum.Verified.Unsettled = open
		sum.Verified.AddProblem("%d of the storm's sessions still had a transaction open %s after the last answer; the database was read anyway", open, settleTimeout+spec.Hold)
	}
	sum.Verified.Agrees = len(sum.Verified.Problems) == 0 && sum.Verified.Unread == nil
	sum.Verdict = judge(sum, spec, stopped)
	return sum, err
}

// targets decides where HTTP requests go: the given URLs (whose token must act as the storm's
// owner), the in-process server, or spec.Servers serving children. The returned func stops
// what it started.
func (r *stormRun) targets(ctx context.Context, ownServer bool) (func(), error) {
	spec := r.spec
	nothing := func() {}
	switch {
	case spec.Via != stormtypes.ViaHTTP:
		return nothing, nil
	case len(spec.URLs) > 0:
		r.servers = servers{urls: spec.URLs, token: spec.Token}
		c := newHTTPClient(1, 0)
		defer c.CloseIdleConnections()
		return nothing, checkTokenOwner(ctx, c, r.servers, spec.Owner())
	}
	token := "storm-" + stormtypes.RandomHex(16)
	if ownServer {
		url, stop, err := startServer(ctx, r.env.Serve, r.local, token, spec.Owner(), r.env.MaxBodyBytes, r.faults)
		if err != nil {
			return nil, err
		}
		r.servers = servers{urls: []string{url}, token: token}
		return stop, nil
	}
	urls, stop, err := startServers(ctx, r, token)
	if err != nil {
		return nil, err
	}
	r.servers = servers{urls: urls, token: token}
	return stop, nil
}

// startServer serves the API over k on a loopback port through serve, accepting token for owner
// and injecting f into its requests' work; stop shuts it down (in-flight requests finish) and
// may be called more than once.
func startServer(ctx context.Context, serve ServeFunc, k *kernel.Kernel, token, owner string, maxBody int64, f faults) (string, func(), error) {
	if serve == nil {
		return "", nil, errors.New("storm: a storm over HTTP without --url serves the API itself, and its host gave it no server (Env.Serve, WorkerSession.Serve)")
	}
	opts := ServeOptions{Tokens: map[string]string{token: owner}, MaxBodyBytes: maxBody}
	k = f.on(k)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("storm: listen on loopback: %w", err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = serve(sctx, k, ln, opts)
	}()
	stop := func() {
		cancel()
		<-done
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// runInProcess fires the storm from this process: through the storm's kernel, or over HTTP.
func runInProcess(ctx context.Context, r *stormRun) (time.Time, error) {
	spec := r.spec
	var t Target
	if spec.Via == stormtypes.ViaHTTP {
		ht, err := NewHTTPTarget(r.servers.urls, r.servers.token, spec, spec.Concurrency)
		if err != nil {
			return time.Time{}, err
		}
		t = ht
	} else {
		t = NewKernelTarget(r.faults.on(r.local), spec)
	}
	defer t.Close()
	if err := t.Warm(ctx, spec.Concurrency); err != nil {
		return time.Time{}, err
	}
	release := make(chan struct{})
	var parked, wg sync.WaitGroup
	parked.Add(spec.Concurrency)
	wg.Go(func() {
		fire(ctx, spec.N, spec.Concurrency, 0, os.Getpid(), t, &parked, release, r.col.add)
	})
	parked.Wait()
	released := time.Now()
	close(release)
	wg.Wait()
	return released, ctx.Err()
}

// fire runs c workers; each marks itself parked, waits for release, then takes request indices
// base..base+n-1 in turn until none are left.
func fire(ctx context.Context, n, c, base, pid int, t Target, parked *sync.WaitGroup, release <-chan struct{}, emit func(stormtypes.Event)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			parked.Done()
			select {
			case <-release:
			case <-ctx.Done():
				return
			}
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				start := time.Now()
				ev := t.Do(ctx, base+i)
				ev.LatencyMs = msSince(start)
				ev.Index, ev.PID = base+i, pid
				emit(ev)
			}
		})
	}
	wg.Wait()
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// poolSize is want connections within a cap (0: none).
func poolSize(want, limit int) int {
	if limit > 0 && limit < want {
		return limit
	}
	return want
}

// warmPool opens n connections (at most the pool's size) before the barrier, so requests
// collide on the unique index rather than queue for connections or pay for handshakes.
func warmPool(ctx context.Context, db *store.DB, n int) error {
	if err := db.Warm(ctx, n); err != nil {
		return fmt.Errorf("storm: open %d connections: %w", min(n, db.MaxConns()), err)
	}
	return nil
}

// collector keeps one result per request index and forwards events to the caller's channel
// through an internal queue of N slots, so a worker never blocks on a slow consumer.
type collector struct {
	mu      sync.Mutex
	results []stormtypes.Event
	got     []bool
	last    time.Time
	queue   chan stormtypes.Event
	done    chan struct{}
}

func newCollector(ctx context.Context, n int, events chan<- stormtypes.Event) *collector {
	c := &collector{results: make([]stormtypes.Event, n), got: make([]bool, n), done: make(chan struct{})}
	if events == nil {
		close(c.done)
		return c
	}
	// The forwarder gets the channel itself, not the field: finish clears the field, and the
	// goroutine may not have started reading by then.
	queue := make(chan stormtypes.Event, n)
	c.queue = queue
	go func() {
		defer close(c.done)
		for ev := range queue {
			select {
			case events <- ev:
			case <-ctx.Done():
				for range queue { // the consumer may be gone: drop the rest
				}
				return
			}
		}
	}()
	return c
}

// add records ev; a duplicate or out-of-range index (a confused child) is dropped.
func (c *collector) add(ev stormtypes.Event) {
	c.mu.Lock()
	if ev.Index < 0 || ev.Index >= len(c.results) || c.got[ev.Index] {
		c.mu.Unlock()
		return
	}
	c.got[ev.Index] = true
	c.results[ev.Index] = ev
	c.last = time.Now()
	c.mu.Unlock()
	if c.queue != nil {
		c.queue <- ev
	}
}

// finish waits until every queued event reached the caller. No add may follow.
func (c *collector) finish() {
	if c.queue != nil {
		close(c.queue)
		c.queue = nil
	}
	<-c.done
}
