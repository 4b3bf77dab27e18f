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

	"github.com/jackc/pgx/v5/pgxpool"

	"idemwork/httpapi"
	"idemwork/idem"
)

// Run fires spec's storm and returns its summary, verified against Env.Kernel's database.
// events, when not nil, receives one Event per finished request as it happens; it is a bounded
// channel the caller owns: Run never closes it and returns only after every event has been
// delivered (or ctx is done). Latency is measured before an event is queued, so a slow consumer
// never distorts it. On an error after the storm started, Run still returns what it measured.
func Run(ctx context.Context, env Env, spec Spec, events chan<- Event) (Summary, error) {
	spec, err := spec.Normalized()
	if err != nil {
		return Summary{}, err
	}
	if env.Kernel == nil {
		return Summary{}, errors.New("storm: Env.Kernel is required (the verdict is read from its database)")
	}
	col := newCollector(ctx, spec.N, events)

	var fault idem.FaultFunc
	if spec.FailFirst {
		fault = (&faultOnce{}).fault
	}
	target := httpTarget{url: spec.URL, token: spec.Token}
	if spec.Via == ViaHTTP && spec.URL == "" {
		stop, t, err := startServer(ctx, env, spec, fault)
		if err != nil {
			col.finish()
			return Summary{}, err
		}
		defer stop()
		target = t
	}

	var release time.Time
	if spec.Processes == 1 {
		release, err = runInProcess(ctx, env, spec, target, fault, col)
	} else {
		release, err = runChildren(ctx, env, spec, target, col)
	}
	col.finish()
	sum := col.summarize(spec, release)
	vctx := ctx
	if ctx.Err() != nil {
		// A cancelled storm still reports what the database holds.
		var cancel context.CancelFunc
		vctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
	}
	sum.Verified = verify(vctx, env.Kernel.DB(), spec, col.results, col.got)
	return sum, err
}

// startServer serves the API over env.Kernel on a loopback port with a one-off token for the
// storm's owner; the returned func shuts it down.
func startServer(ctx context.Context, env Env, spec Spec, fault idem.FaultFunc) (func(), httpTarget, error) {
	token := "storm-" + randomHex(16)
	opts := httpapi.Options{Tokens: map[string]string{token: spec.Owner()}, MaxBodyBytes: env.HTTP.MaxBodyBytes}
	if fault != nil {
		opts.RequestContext = func(c context.Context) context.Context { return withFault(c, fault) }
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, httpTarget{}, fmt.Errorf("storm: listen on loopback: %w", err)
	}
	srv := httpapi.NewServer(httpapi.New(env.Kernel, opts), nil)
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = httpapi.Serve(sctx, srv, ln, 5*time.Second)
	}()
	stop := func() {
		cancel()
		<-done
	}
	return stop, httpTarget{url: "http://" + ln.Addr().String(), token: token}, nil
}

// runInProcess fires the storm from this process: through the shared kernel, or over HTTP.
func runInProcess(ctx context.Context, env Env, spec Spec, t httpTarget, fault idem.FaultFunc, col *collector) (time.Time, error) {
	var do doer
	if spec.Via == ViaHTTP {
		c := newHTTPClient(spec.Concurrency)
		defer c.CloseIdleConnections()
		if err := warmHTTP(ctx, c, t.url, spec.Concurrency); err != nil {
			return time.Time{}, err
		}
		d, err := httpDoer(c, t, spec)
		if err != nil {
			return time.Time{}, err
		}
		do = d
	} else {
		if err := warmPool(ctx, env.Kernel.DB().Pool, spec.Concurrency); err != nil {
			return time.Time{}, err
		}
		do = kernelDoer(env.Kernel, spec)
	}
	release := make(chan struct{})
	var parked, wg sync.WaitGroup
	parked.Add(spec.Concurrency)
	wg.Go(func() {
		fire(withFault(ctx, fault), spec.N, spec.Concurrency, 0, os.Getpid(), do, &parked, release, col.add)
	})
	parked.Wait()
	released := time.Now()
	close(release)
	wg.Wait()
	return released, ctx.Err()
}

// fire runs c workers; each marks itself parked, waits for release, then takes request indices
// base..base+n-1 in turn until none are left.
func fire(ctx context.Context, n, c, base, pid int, do doer, parked *sync.WaitGroup, release <-chan struct{}, emit func(Event)) {
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
				ev := do(ctx)
				ev.LatencyMs = msSince(start)
				ev.Index, ev.PID = base+i, pid
				emit(ev)
			}
		})
	}
	wg.Wait()
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// warmPool opens n connections (at most the pool's size) before the barrier, so requests
// collide on the unique index rather than queue for connections or pay for handshakes.
func warmPool(ctx context.Context, pool *pgxpool.Pool, n int) error {
	n = min(n, int(pool.Config().MaxConns))
	conns := make([]*pgxpool.Conn, 0, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	for range n {
		wg.Go(func() {
			c, err := pool.Acquire(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			conns = append(conns, c)
		})
	}
	wg.Wait()
	for _, c := range conns {
		c.Release()
	}
	if firstErr != nil {
		return fmt.Errorf("storm: open %d connections: %w", n, firstErr)
	}
	return nil
}

// collector keeps one result per request index and forwards events to the caller's channel
// through an internal queue of N slots, so a worker never blocks on a slow consumer.
type collector struct {
	mu      sync.Mutex
	results []Event
	got     []bool
	last    time.Time
	queue   chan Event
	done    chan struct{}
}

func newCollector(ctx context.Context, n int, events chan<- Event) *collector {
	c := &collector{results: make([]Event, n), got: make([]bool, n), done: make(chan struct{})}
	if events == nil {
		close(c.done)
		return c
	}
	// The forwarder gets the channel itself, not the field: finish clears the field, and the
	// goroutine may not have started reading by then.
	queue := make(chan Event, n)
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
func (c *collector) add(ev Event) {
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
