package outbox_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"idemwork/outbox"
	"idemwork/store"
)

// trips records a pool's round trips: each statement, or a batch as "batch[a; b]", by its first
// two words.
type trips struct {
	mu  sync.Mutex
	got []string
}

func words(sql string) string {
	f := strings.Fields(strings.ToLower(sql))
	return strings.Join(f[:min(2, len(f))], " ")
}

func (r *trips) add(s string) { r.mu.Lock(); r.got = append(r.got, s); r.mu.Unlock() }

func (r *trips) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

func (r *trips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(words(d.SQL))
	return ctx
}
func (r *trips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *trips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var parts []string
	for _, q := range d.Batch.QueuedQueries {
		parts = append(parts, words(q.SQL))
	}
	r.add("batch[" + strings.Join(parts, "; ") + "]")
	return ctx
}
func (r *trips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *trips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestADeliveryIsAClaimTransactionAndAFencedSettleTransaction pins what one delivered message
// costs: the claim (BEGIN, the claiming UPDATE, COMMIT) with the provider call after it, then the
// settle — the fenced message update with BEGIN, the execution's, the audit event, COMMIT.
func TestADeliveryIsAClaimTransactionAndAFencedSettleTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	notify(t, b, "n1")
	tr := &trips{}
	db, err := store.Open(context.Background(), b.db.DSN, store.Options{MaxConns: 1, Tracer: tr})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	tr.take() // what Open sent

	w := outbox.NewWorker(db, outbox.Options{Providers: map[string]outbox.Provider{"notifier": b.provider}, Clock: b.clock})
	rep, err := w.RunOnce(context.Background(), 10)
	require.NoError(t, err)
	require.Equal(t, outbox.Report{Claimed: 1, Delivered: 1}, rep)
	require.Equal(t, []string{
		"batch[begin]", "update outbox_message", "batch[commit]",
		"batch[begin; update outbox_message]", "update feature_execution", "insert into", "batch[commit]",
	}, tr.take(), "7 round trips")
}
