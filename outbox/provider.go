package outbox

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/idemwork/idemwork/model"
)

// ErrSimulatedFailure is what MemoryProvider answers to a call it was told to fail.
var ErrSimulatedFailure = errors.New("provider unavailable (simulated)")

// MemoryProvider is the workbench's stand-in for a real provider: it remembers what it
// delivered, once per idempotency id (a second call with the same id has no second effect, as
// a real idempotent provider would behave), counts every call, and can be told to fail calls.
type MemoryProvider struct {
	mu        sync.Mutex
	delivered map[string]model.OutboxMessage
	calls     map[string]int
	failNext  int
}

// NewMemoryProvider returns an empty provider.
func NewMemoryProvider() *MemoryProvider {
	return &MemoryProvider{delivered: map[string]model.OutboxMessage{}, calls: map[string]int{}}
}

// FailNext makes the next n calls fail (0 clears), replacing any count set before.
func (p *MemoryProvider) FailNext(n int) {
	p.mu.Lock()
	p.failNext = max(n, 0)
	p.mu.Unlock()
}

// AddFailures makes n more calls fail, on top of those already pending, and returns the total.
func (p *MemoryProvider) AddFailures(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failNext = max(p.failNext+n, 0)
	return p.failNext
}

// PendingFailures is how many of the next calls will fail.
func (p *MemoryProvider) PendingFailures() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failNext
}

// Deliver records the message once per idempotency id.
func (p *MemoryProvider) Deliver(_ context.Context, m model.OutboxMessage) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[m.IdempotencyID]++
	if p.failNext > 0 {
		p.failNext--
		return ErrSimulatedFailure
	}
	if _, ok := p.delivered[m.IdempotencyID]; !ok {
		p.delivered[m.IdempotencyID] = m
	}
	return nil
}

// Delivered is how many distinct messages the provider has received.
func (p *MemoryProvider) Delivered() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.delivered)
}

// Calls is how many times the provider was called with idempotency id (failed calls included).
func (p *MemoryProvider) Calls(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[id]
}

// HasDelivered reports whether a call with idempotency id succeeded.
func (p *MemoryProvider) HasDelivered(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.delivered[id]
	return ok
}

// ErrSimulatedCrash is what a CrashSwitch that is on answers after a provider call.
var ErrSimulatedCrash = errors.New("simulated crash between the provider call and the settle")

// CrashSwitch is an AfterCall hook a demo can turn on and off: while it is on, the worker
// abandons every claim after its provider call and before its settle, as a worker that crashed
// there would. The provider has done its work; the database does not know it, and the message
// comes due again when its lease runs out, to be delivered again under the same idempotency id.
type CrashSwitch struct{ on atomic.Bool }

// Set turns the switch on or off.
func (c *CrashSwitch) Set(on bool) { c.on.Store(on) }

// On reports whether the switch is on.
func (c *CrashSwitch) On() bool { return c.on.Load() }

// AfterCall is the worker's Options.AfterCall.
func (c *CrashSwitch) AfterCall(context.Context, model.OutboxMessage, error) error {
	if c.on.Load() {
		return ErrSimulatedCrash
	}
	return nil
}
