package idem

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
)

// flights shares one in-process execution per (owner, key) (SPEC §4.3). It differs from
// singleflight on purpose: a follower only joins a leader with the same operation and
// body (so the same fingerprint), and a leader's error is never handed to followers — each then takes the database
// path itself.
type flights struct {
	mu sync.Mutex
	m  map[flightKey]*flight
	// waiting counts the followers parked on a flight right now.
	waiting atomic.Int64
}

type flightKey struct{ owner, key string }

type flight struct {
	key       string
	operation string
	body      []byte // the leader's body: a follower with the same bytes has the same fingerprint
	// done is made by the first follower (under flights.mu): a flight nobody joins makes none.
	done chan struct{}
	// joined counts the followers that met the flight (under flights.mu): the leader publishes
	// its result only when there are any.
	joined int
	// Set before done is closed; read only after.
	value       any
	envelope    json.RawMessage
	fingerprint string
	err         error
}

// wait blocks until flight f is done or ctx is; it returns ctx's error in the second case.
func (g *flights) wait(ctx context.Context, f *flight) error {
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	done := ctx.Done()
	if done == nil { // a context that is never cancelled: a plain receive, no select
		<-f.done
		return nil
	}
	select {
	case <-f.done:
		return nil
	case <-done:
		return ctx.Err()
	}
}

// leadOrJoin returns the flight for k and whether the caller leads it. It returns (nil, false)
// when a flight for k exists with another operation or body: the caller must not share.
func (g *flights) leadOrJoin(k flightKey, operation string, body []byte) (*flight, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f, ok := g.m[k]; ok {
		if f.operation != operation || !bytes.Equal(f.body, body) {
			return nil, false
		}
		if f.joined++; f.done == nil {
			f.done = make(chan struct{})
		}
		return f, false
	}
	if g.m == nil {
		g.m = make(map[flightKey]*flight)
	}
	f := &flight{key: k.key, operation: operation, body: body}
	g.m[k] = f
	return f, true
}

// retire takes the flight out of the map — later callers go to the database, where a committed
// success is a cache hit — and reports whether any follower met it: only then must the leader
// publish its result (publish) for them to read; either way it ends the flight with done.
// Nobody can join once it is retired.
func (g *flights) retire(k flightKey, f *flight) (joined bool) {
	g.mu.Lock()
	delete(g.m, k)
	joined = f.joined > 0
	g.mu.Unlock()
	return joined
}

// publish sets the leader's result for the followers (before done is closed: they read it
// after).
func (f *flight) publish(value any, envelope json.RawMessage, fingerprint string, err error) {
	f.value, f.envelope, f.fingerprint, f.err = value, envelope, fingerprint, err
}

// end ends a retired flight: its followers, if any, wake and read what was published.
func (f *flight) end() {
	if f.done != nil { // made by the first follower, under the lock retire took after it
		close(f.done)
	}
}

// inFlight counts flights now running (Runner.Stats).
func (g *flights) inFlight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.m)
}
