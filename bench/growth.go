package bench

import (
	"context"
	"fmt"
	"time"
)

// Growth is how a workload's throughput at one table size compares with the first size.
type Growth struct {
	Name    string `json:"name"`
	Clients int    `json:"clients"`
	Rows    int    `json:"rows"`
	// RunnerVsFirst and RawVsFirst are ops/s at Rows ÷ ops/s at the first level. They compare
	// cells measured at different times, so machine drift shows in them; Ratio does not drift.
	RunnerVsFirst float64 `json:"runnerVsFirst"`
	RawVsFirst    float64 `json:"rawVsFirst"`
	LimitVsFirst  float64 `json:"limitVsFirst"`
	Ratio         float64 `json:"ratio"`
	Efficiency    float64 `json:"efficiency"`
}

// fillChunk bounds one filler statement (one transaction) so WAL and memory stay modest.
const fillChunk = 100_000

// fill bulk-loads filler units (from, to]: each is one finished create of another owner — an
// idempotency row (SUCCEEDED with its envelope), a record, its revision with a full snapshot,
// its audit event — and every second one a feature execution, spread over 1,000 owners and the
// last day. It then refreshes the planner's statistics and checkpoints (when allowed) so the
// load's dirty pages are not written during the measurement.
func (h *harness) fill(ctx context.Context, from, to int) error {
	pool := h.raw
	started := time.Now()
	for lo := from; lo < to; lo += fillChunk {
		hi := min(lo+fillChunk, to)
		for _, q := range fillSQL {
			if _, err := pool.Exec(ctx, q, lo+1, hi); err != nil {
				return fmt.Errorf("bench: load filler rows: %w", err)
			}
		}
	}
	if _, err := pool.Exec(ctx, `ANALYZE`); err != nil {
		return fmt.Errorf("bench: analyze: %w", err)
	}
	_, _ = pool.Exec(ctx, `CHECKPOINT`) // needs superuser or pg_checkpoint; the load is only less tidy without it
	h.logf("  loaded %d filler units in %.1fs\n", to-from, time.Since(started).Seconds())
	return nil
}

// The filler statements, each over generate_series($1, $2). Ids look like ULIDs (26 characters,
// time-ordered), keys like UUIDs.
var fillSQL = []string{
	`INSERT INTO record (owner_id, id, module_code, revision, title, summary, payload, created_at, updated_at)
	SELECT 'filler-' || (g % 1000), 'F' || lpad(g::text, 25, '0'), 'NOTE', 1, 'note ' || g, 'filler',
		jsonb_build_object('text', 'an ordinary note body of a few words ' || g, 'tags', jsonb_build_array('a', 'b')),
		t, t
	FROM generate_series($1::bigint, $2::bigint) g, LATERAL (SELECT now() - (g % 86400) * interval '1 second' AS t) x`,

	`INSERT INTO record_revision (owner_id, record_id, revision, snapshot, idempotency_key, created_at)
	SELECT 'filler-' || (g % 1000), 'F' || lpad(g::text, 25, '0'), 1,
		jsonb_build_object('id', 'F' || lpad(g::text, 25, '0'), 'ownerId', 'filler-' || (g % 1000), 'moduleCode', 'NOTE',
			'revision', 1, 'title', 'note ' || g, 'summary', 'filler',
			'payload', jsonb_build_object('text', 'an ordinary note body of a few words ' || g, 'tags', jsonb_build_array('a', 'b')),
			'createdAt', t, 'updatedAt', t),
		md5(g::text)::uuid::text, t
	FROM generate_series($1::bigint, $2::bigint) g, LATERAL (SELECT now() - (g % 86400) * interval '1 second' AS t) x`,

	`INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
	SELECT 'filler-' || (g % 1000), md5(g::text)::uuid::text, 'NOTE:record:create', md5(g::text) || md5((-g)::text), 'SUCCEEDED',
		jsonb_build_object('schemaVersion', 1, 'policy', 'record-snapshot-reference-v1',
			'result', jsonb_build_object('recordId', 'F' || lpad(g::text, 25, '0'), 'revision', 1)),
		t, t + interval '24 hours', t
	FROM generate_series($1::bigint, $2::bigint) g, LATERAL (SELECT now() - (g % 86400) * interval '1 second' AS t) x`,

	`INSERT INTO audit_event (owner_id, id, module_code, record_id, action, revision, execution_id, idempotency_key, detail, at)
	SELECT 'filler-' || (g % 1000), 'A' || lpad(g::text, 25, '0'), 'NOTE', 'F' || lpad(g::text, 25, '0'), 'RECORD_CREATED', 1, NULL,
		md5(g::text)::uuid::text, '{"operation": "NOTE:record:create"}', t
	FROM generate_series($1::bigint, $2::bigint) g, LATERAL (SELECT now() - (g % 86400) * interval '1 second' AS t) x`,

	`INSERT INTO feature_execution (owner_id, id, module_code, record_id, feature_id, mode, status, record_revision, input, output,
		idempotency_key, created_at, updated_at)
	SELECT 'filler-' || (g % 1000), 'X' || lpad(g::text, 25, '0'), 'NOTE', 'F' || lpad(g::text, 25, '0'), 'F01', 'internal', 'SUCCEEDED', 1,
		'{}', '{"archived": true, "wasArchived": false}', md5((-g)::text)::uuid::text, t, t
	FROM generate_series($1::bigint, $2::bigint) g, LATERAL (SELECT now() - (g % 86400) * interval '1 second' AS t) x
	WHERE g % 2 = 0`,
}
