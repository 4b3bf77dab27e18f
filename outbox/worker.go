// Package outbox delivers outbox messages outside any business transaction (SPEC §7): a worker
// claims due messages with FOR UPDATE SKIP LOCKED in a short transaction, calls the provider
// with the message's idempotency id after that transaction has committed, and then records
// DELIVERED, a retry with exponential backoff, or FAILED, settling the feature execution and
// writing an audit event in the same settling transaction.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"idemwork/store"
)

// Provider is a real external system. Deliver must be idempotent on msg.IdempotencyID: a
// message can be delivered again after a crash between the call and the settling commit.
type Provider interface {
	Deliver(ctx context.Context, msg store.OutboxMessage) error
}

// Clock gives the worker's notion of now (the runner's movable clock in the workbench).
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// Worker delivers due messages.
type Worker struct {
	db          *store.DB
	providers   map[string]Provider
	clock       Clock
	maxAttempts int
	baseBackoff time.Duration
	// Lease is how long a claimed message is hidden from other workers while its provider call
	// runs; if this worker dies, the message becomes due again after it.
	lease time.Duration
}

// Options configures a Worker.
type Options struct {
	Providers   map[string]Provider
	Clock       Clock
	MaxAttempts int
	BaseBackoff time.Duration
	Lease       time.Duration
}

// NewWorker returns a worker over db.
func NewWorker(db *store.DB, opts Options) *Worker {
	w := &Worker{db: db, providers: opts.Providers, clock: opts.Clock, maxAttempts: opts.MaxAttempts,
		baseBackoff: opts.BaseBackoff, lease: opts.Lease}
	if w.clock == nil {
		w.clock = systemClock{}
	}
	if w.maxAttempts <= 0 {
		w.maxAttempts = 5
	}
	if w.baseBackoff <= 0 {
		w.baseBackoff = 500 * time.Millisecond
	}
	if w.lease <= 0 {
		w.lease = 30 * time.Second
	}
	return w
}

// Report counts what one pass did.
type Report struct {
	Claimed   int `json:"claimed"`
	Delivered int `json:"delivered"`
	Retried   int `json:"retried"`
	Failed    int `json:"failed"`
}

// RunOnce claims up to limit due messages and settles each.
func (w *Worker) RunOnce(ctx context.Context, limit int) (Report, error) {
	var rep Report
	msgs, err := w.claim(ctx, limit)
	if err != nil {
		return rep, err
	}
	rep.Claimed = len(msgs)
	for _, m := range msgs {
		// The provider call happens here, with no transaction open.
		callErr := w.deliver(ctx, m)
		outcome, err := w.settle(ctx, m, callErr)
		if err != nil {
			return rep, err
		}
		switch outcome {
		case "DELIVERED":
			rep.Delivered++
		case "FAILED":
			rep.Failed++
		default:
			rep.Retried++
		}
	}
	return rep, nil
}

// Run delivers until ctx ends, polling every interval.
func (w *Worker) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := w.RunOnce(ctx, 20); err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (w *Worker) deliver(ctx context.Context, m store.OutboxMessage) error {
	p, ok := w.providers[m.Provider]
	if !ok {
		return fmt.Errorf("no provider %q is configured", m.Provider)
	}
	callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return p.Deliver(callCtx, m)
}

// claim takes due PENDING messages and pushes their next attempt past the lease, in a short
// transaction of its own, so concurrent workers never take the same message.
func (w *Worker) claim(ctx context.Context, limit int) ([]store.OutboxMessage, error) {
	var out []store.OutboxMessage
	err := w.db.Tx(ctx, func(ctx context.Context) error {
		now := w.clock.Now()
		rows, err := w.db.Q(ctx).Query(ctx, `UPDATE outbox_message m SET attempts = m.attempts + 1, next_attempt_at = $2, updated_at = $1
			FROM (SELECT owner_id, id FROM outbox_message WHERE status = 'PENDING' AND next_attempt_at <= $1
			      ORDER BY next_attempt_at LIMIT $3 FOR UPDATE SKIP LOCKED) due
			WHERE m.owner_id = due.owner_id AND m.id = due.id
			RETURNING m.id, m.owner_id, m.execution_id, m.provider, m.payload_ref, m.idempotency_id, m.status, m.attempts,
				m.next_attempt_at, m.last_error, m.created_at, m.updated_at`, now, now.Add(w.lease), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m store.OutboxMessage
			if err := rows.Scan(&m.ID, &m.OwnerID, &m.ExecutionID, &m.Provider, &m.PayloadRef, &m.IdempotencyID, &m.Status,
				&m.Attempts, &m.NextAttemptAt, &m.LastError, &m.CreatedAt, &m.UpdatedAt); err != nil {
				return err
			}
			out = append(out, m)
		}
		return rows.Err()
	})
	return out, err
}

// settle records the provider call's result and settles the execution.
func (w *Worker) settle(ctx context.Context, m store.OutboxMessage, callErr error) (string, error) {
	status := "DELIVERED"
	var lastErr *string
	next := w.clock.Now()
	if callErr != nil {
		s := callErr.Error()
		lastErr = &s
		status = "PENDING"
		if m.Attempts >= w.maxAttempts {
			status = "FAILED"
		} else {
			next = next.Add(w.baseBackoff << (m.Attempts - 1))
		}
	}
	err := w.db.Tx(ctx, func(ctx context.Context) error {
		q := w.db.Q(ctx)
		now := w.clock.Now()
		if _, err := q.Exec(ctx, `UPDATE outbox_message SET status = $3, last_error = $4, next_attempt_at = $5, updated_at = $6
			WHERE owner_id = $1 AND id = $2`, m.OwnerID, m.ID, status, lastErr, next, now); err != nil {
			return err
		}
		if status == "PENDING" {
			return nil
		}
		var module, recordID, featureID string
		var revision int
		var key *string
		if err := q.QueryRow(ctx, `UPDATE feature_execution SET status = $3, updated_at = $4 WHERE owner_id = $1 AND id = $2
			RETURNING module_code, record_id, feature_id, record_revision, idempotency_key`, m.OwnerID, m.ExecutionID, status, now).
			Scan(&module, &recordID, &featureID, &revision, &key); err != nil {
			return fmt.Errorf("settle execution %s: %w", m.ExecutionID, err)
		}
		detail, _ := json.Marshal(map[string]any{"outboxMessageId": m.ID, "provider": m.Provider, "attempts": m.Attempts})
		return w.db.InsertAudit(ctx, store.AuditEvent{ID: ulid.Make().String(), OwnerID: m.OwnerID, ModuleCode: module, RecordID: &recordID,
			Action: "FEATURE_" + featureID + "_" + status, Revision: &revision, ExecutionID: &m.ExecutionID, IdempotencyKey: key,
			Detail: detail, At: now})
	})
	return status, err
}

// MemoryProvider is the workbench's stand-in for a real provider: it remembers what it
// delivered, once per idempotency id, and can be told to fail the next calls.
type MemoryProvider struct {
	mu        sync.Mutex
	delivered map[string]store.OutboxMessage
	failNext  int
}

// NewMemoryProvider returns an empty provider.
func NewMemoryProvider() *MemoryProvider {
	return &MemoryProvider{delivered: map[string]store.OutboxMessage{}}
}

// FailNext makes the next n calls fail (to show retries and backoff).
func (p *MemoryProvider) FailNext(n int) {
	p.mu.Lock()
	p.failNext = n
	p.mu.Unlock()
}

// Deliver records the message once per idempotency id.
func (p *MemoryProvider) Deliver(_ context.Context, m store.OutboxMessage) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failNext > 0 {
		p.failNext--
		return errors.New("provider unavailable (simulated)")
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
