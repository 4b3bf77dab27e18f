package testdb

import (
	"context"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// settingsPrefix starts the statement that sets a transaction's settings (store's settings.go).
const settingsPrefix = "select pg_catalog.set_config('search_path'"

// Trips is a pgx tracer (store.Options.Tracer) that records a pool's round trips: each
// statement by its first Words words, lower-cased, and a batch as "batch[a; b; …]" ("begin" and
// "settings" for the two statements every transaction begins with). Tests pin what an operation
// sends with it.
type Trips struct {
	// Words is how many words name a statement (0: two).
	Words int

	mu  sync.Mutex
	got []string
}

// Take returns what was recorded since the last Take, and forgets it.
func (r *Trips) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.got
	r.got = nil
	return out
}

func (r *Trips) add(s string) {
	r.mu.Lock()
	r.got = append(r.got, s)
	r.mu.Unlock()
}

func (r *Trips) name(sql string) string {
	// The two statements every transaction of idemwork's begins with have short names of
	// their own: "begin" (whatever its isolation and access mode) and "settings".
	lower := strings.ToLower(strings.TrimSpace(sql))
	switch {
	case strings.HasPrefix(lower, "begin"):
		return "begin"
	case strings.HasPrefix(lower, settingsPrefix):
		return "settings"
	}
	n := r.Words
	if n <= 0 {
		n = 2
	}
	f := strings.Fields(strings.ToLower(sql))
	return strings.Join(f[:min(n, len(f))], " ")
}

// TraceQueryStart records a statement.
func (r *Trips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(r.name(d.SQL))
	return ctx
}

// TraceQueryEnd does nothing.
func (r *Trips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart records a batch.
func (r *Trips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	parts := make([]string, 0, d.Batch.Len())
	for _, q := range d.Batch.QueuedQueries {
		parts = append(parts, r.name(q.SQL))
	}
	r.add("batch[" + strings.Join(parts, "; ") + "]")
	return ctx
}

// TraceBatchQuery does nothing.
func (r *Trips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd does nothing.
func (r *Trips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
