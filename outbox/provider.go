package outbox

import (
	"context"
	"errors"
	"sync"

	"idemwork/store"
)

// ErrSimulatedFailure is what MemoryProvider answers to a call it was told to fail.
var ErrSimulatedFailure = errors.New("provider unavailable (simulated)")

// MemoryProvider is the workbench's stand-in for a real provider: it remembers what it
// delivered, once per idempotency id (a second call with the same id has no second effect, as
// a real idempotent provider would behave), counts every call, and can be told to fail calls.
type MemoryProvider struct {
	mu        sync.Mutex
	delivered map[string]store.OutboxMessage
	calls     map[string]int
	failNext  int
}

// NewMemoryProvider returns an empty provider.
func NewMemoryProvider() *MemoryProvider {
	return &MemoryProvider{delivered: map[string]store.OutboxMessage{}, calls: map[string]int{}}
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
func (p *MemoryProvider) Deliver(_ context.Context, m store.OutboxMessage) error {
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
