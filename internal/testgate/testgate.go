// Package testgate holds a step of a commit unit open until a test opens it, so a test can
// line up concurrent requests (e.g. losers queued on the unique index) before letting the
// winner commit. Opening is idempotent and also happens at cleanup, so a failing test never
// leaves a transaction (and the connection the pool waits for on close) hanging.
package testgate

import (
	"sync"
	"testing"
	"time"
)

// Gate is one held step.
type Gate struct {
	held, release      chan struct{}
	heldOnce, openOnce sync.Once
}

// New returns a closed gate that opens at t's cleanup at the latest.
func New(t testing.TB) *Gate {
	g := &Gate{held: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(g.Open)
	return g
}

// Hold reports that the step was reached and blocks until the gate opens.
func (g *Gate) Hold() {
	g.heldOnce.Do(func() { close(g.held) })
	<-g.release
}

// Open lets every holder through.
func (g *Gate) Open() { g.openOnce.Do(func() { close(g.release) }) }

// AwaitHeld waits until a call holds the gate.
func (g *Gate) AwaitHeld(t testing.TB) {
	t.Helper()
	select {
	case <-g.held:
	case <-time.After(time.Minute):
		t.Fatal("no call reached the held step")
	}
}
