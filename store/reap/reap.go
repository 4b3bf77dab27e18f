package reap

import (
	"context"
	"fmt"
	"github.com/idemwork/idemwork/store"
	"log/slog"
	"sync/atomic"
	"time"
)

// The reaper deletes idempotency rows past their expiry (SUCCEEDED, and leftover PROCESSING
// rows), so the table does not grow without bound when keys never come again. It deletes
// nothing else: records, revisions, executions and audit events are the history.

// Reap limits.
const (
	DefaultReapBatch = 1000
	MaxReapBatch     = 100_000
)

// ReapParams selects what ReapExpired deletes.
type ReapParams struct {
	// Owner limits the reap to one owner ("" reaps every owner).
	Owner string
	// Now is the clock the keys expire by: a row is deleted only if expires_at <= Now.
	Now time.Time
	// Batch is how many rows one statement deletes (default DefaultReapBatch).
	Batch int
	// DryRun counts what would be deleted and deletes nothing.
	DryRun bool
}

// ReapResult is what a reap did: SPEC §10.2's {"deleted", "batches", "tookMs"}.
type ReapResult struct {
	Deleted int64   `json:"deleted"`
	Batches int     `json:"batches"`
	TookMs  float64 `json:"tookMs"`
	DryRun  bool    `json:"dryRun"`
}

// Each batch is one short statement of its own, oldest expiry first through an expiry index
// ((owner_id, expires_at) for one owner, (expires_at) for all), reading one batch of index
// entries and deleting exactly the row versions it locked (by ctid, which a locked row keeps
// until the statement ends). SKIP LOCKED leaves alone a row a request is deleting itself to
// reserve the key again, and FOR UPDATE re-checks expires_at on the row version it locks: a row
// a request inserted for the same key since is another row, and a valid row is never deleted.
const (
	reapAll = `DELETE FROM idempotency_record WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM idempotency_record WHERE expires_at <= $1
			ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED))`
	reapOwner = `DELETE FROM idempotency_record WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM idempotency_record WHERE owner_id = $3 AND expires_at <= $1
			ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED))`
	countAll   = `SELECT count(*) FROM idempotency_record WHERE expires_at <= $1`
	countOwner = `SELECT count(*) FROM idempotency_record WHERE owner_id = $2 AND expires_at <= $1`
)

// ReapExpired deletes expired idempotency rows in batches until a batch finds fewer than Batch
// rows (or ctx ends). Each batch is a statement of its own unless ctx carries a transaction.
func ReapExpired(ctx context.Context, db *store.DB, p ReapParams) (res ReapResult, err error) {
	start := time.Now()
	res.DryRun = p.DryRun
	batch := p.Batch
	if batch <= 0 {
		batch = DefaultReapBatch
	}
	batch = min(batch, MaxReapBatch)
	defer func() { res.TookMs = float64(time.Since(start).Microseconds()) / 1000 }()
	if p.DryRun {
		q, args := countAll, []any{p.Now}
		if p.Owner != "" {
			q, args = countOwner, []any{p.Now, p.Owner}
		}
		if err = db.Q(ctx).QueryRow(ctx, q, args...).Scan(&res.Deleted); err != nil {
			return res, fmt.Errorf("count expired keys: %w", err)
		}
		res.Batches = int((res.Deleted + int64(batch) - 1) / int64(batch))
		return res, nil
	}
	q, args := reapAll, []any{p.Now, batch}
	if p.Owner != "" {
		q, args = reapOwner, []any{p.Now, batch, p.Owner}
	}
	for ctx.Err() == nil {
		tag, err := db.Q(ctx).Exec(ctx, q, args...)
		if err != nil {
			return res, fmt.Errorf("reap expired keys: %w", err)
		}
		n := tag.RowsAffected()
		if n == 0 {
			break
		}
		res.Batches++
		res.Deleted += n
		if n < int64(batch) {
			break
		}
	}
	return res, ctx.Err()
}

// Reaper runs ReapExpired on a schedule and keeps running totals (for logs and /metrics).
type Reaper struct {
	db    *store.DB
	now   func() time.Time
	batch int
	log   *slog.Logger

	runs, deleted, failures atomic.Int64
}

// NewReaper returns a reaper over db whose keys expire by now (the runner's clock).
func NewReaper(db *store.DB, now func() time.Time, batch int, log *slog.Logger) *Reaper {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reaper{db: db, now: now, batch: batch, log: log}
}

// ReaperTotals are a reaper's counters since it started.
type ReaperTotals struct {
	Runs     int64 `json:"runs"`
	Deleted  int64 `json:"deleted"`
	Failures int64 `json:"failures"`
}

// Totals reads the counters.
func (r *Reaper) Totals() ReaperTotals {
	return ReaperTotals{Runs: r.runs.Load(), Deleted: r.deleted.Load(), Failures: r.failures.Load()}
}

// Once runs one reap of every owner.
func (r *Reaper) Once(ctx context.Context) (ReapResult, error) {
	res, err := ReapExpired(ctx, r.db, ReapParams{Now: r.now(), Batch: r.batch})
	r.runs.Add(1)
	r.deleted.Add(res.Deleted)
	if err != nil && ctx.Err() == nil {
		r.failures.Add(1)
		r.log.Error("reaper: the reap failed; it runs again at the next interval", "error", err)
	} else if res.Deleted > 0 {
		r.log.Info("reaper: expired keys deleted", "deleted", res.Deleted, "batches", res.Batches, "tookMs", res.TookMs)
	}
	return res, err
}

// Run reaps every interval until ctx ends (the first reap runs one interval after the start).
func (r *Reaper) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = r.Once(ctx)
		}
	}
}
