package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/verify"
)

// The verify cell (issue 22): `idemwork verify --owner` of one owner holding VerifyEvents audit
// events, every row as the kernel writes it — keys, records, revisions with their digest chain,
// executions, audit events naming their transaction and their key's expiry — loaded in bulk with
// the kernel's own digest expressions, then verified through the kernel, timed. Its goal is a
// million audit events in a minute on the machine it runs on.

// VerifyGoalSeconds is the verify cell's goal for a million audit events.
const VerifyGoalSeconds = 60

// VerifyCell is what the verify cell measured.
type VerifyCell struct {
	Owner       string `json:"owner"`
	AuditEvents int64  `json:"auditEvents"`
	// Checked is the rows verify read, per table (keyLives: keys whose lives it judged).
	Checked map[string]int64 `json:"checked"`
	// LoadSeconds is how long loading the owner took; Seconds the verify itself.
	LoadSeconds float64 `json:"loadSeconds"`
	Seconds     float64 `json:"seconds"`
	// RowsPerSecond is every row read ÷ Seconds.
	RowsPerSecond float64 `json:"rowsPerSecond"`
	// PassSeconds is each pass's share (the table it read).
	PassSeconds map[string]float64 `json:"passSeconds"`
	// OK is verify's verdict on the loaded rows (they are clean: anything else is a bug).
	OK         bool  `json:"ok"`
	Violations int64 `json:"violations"`
	// GoalSeconds is the goal scaled to AuditEvents (60 s per million); Met says Seconds ≤ it.
	GoalSeconds float64 `json:"goalSeconds"`
	Met         bool    `json:"met"`
}

// verifyOwner is the owner the cell loads and verifies.
const verifyOwner = "bench-verify"

// verifyChunk bounds one load transaction (in creates).
const verifyChunk = 50_000

// verifyLoadSQL loads the writes of creates ($1, $2]: each a NOTE created under key vc-<g>; every
// fourth (g % 4 = 0) patched under vp-<g>, every fourth other (g % 4 = 2) archived by F01 (an
// internal feature: revision 2 and an execution) under vf-<g> — 1.5 audit events per create.
// Each statement runs in the chunk's one transaction, which plays every request's.
var verifyLoadSQL = func() []string {
	const series = `FROM generate_series($1::bigint + 1, $2::bigint) g,
		LATERAL (SELECT 'V' || lpad(g::text, 25, '0') AS id, '` + verifyOwner + `'::text AS owner,
			timestamptz '2026-01-01 00:00:00Z' + g * interval '1 millisecond' AS t) x`
	snapshot := func(rev, title, payload, updated string) string {
		return `jsonb_build_object('id', x.id, 'ownerId', x.owner, 'moduleCode', 'NOTE', 'revision', ` + rev + `, 'title', ` + title +
			`, 'summary', '', 'payload', ` + payload + `, 'createdAt', to_char(x.t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), 'updatedAt', ` +
			`to_char((` + updated + `) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))`
	}
	body := `jsonb_build_object('text', 'an ordinary note body of a few words ' || g)`
	archived := `jsonb_build_object('text', 'an ordinary note body of a few words ' || g, 'archived', true)`
	later := `x.t + interval '1 second'`
	xid := "pg_current_xact_id()::text"
	rev := func(revision, at, key, snap string) string {
		return store.RevisionDigestSQL(store.RevisionExprs{Owner: "x.owner", Record: "x.id", Revision: revision, At: at, Key: key, XID: xid, Snapshot: snap})
	}
	env := func(rev string, exec string) string {
		result := `jsonb_build_object('recordId', x.id, 'revision', ` + rev + `)`
		policy := kernel.PolicyRecordSnapshot
		if exec != "" {
			result = `jsonb_build_object('recordId', x.id, 'revision', ` + rev + `, 'executionId', ` + exec + `)`
			policy = kernel.PolicyFeatureExecution
		}
		return `jsonb_build_object('schemaVersion', 1, 'policy', '` + policy + `', 'result', ` + result + `)`
	}
	key := func(prefix, op, at, rev, exec, where string) string {
		return `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
		SELECT x.owner, '` + prefix + `' || g, ` + op + `, md5(g::text) || md5('` + prefix + `' || g), 'SUCCEEDED', ` + env(rev, exec) + `,
			` + at + `, ` + at + ` + interval '100 years', ` + at + ` ` + series + where
	}
	audit := func(id, action, rev, exec, key, op, at, where string) string {
		return `INSERT INTO audit_event (owner_id, id, module_code, record_id, action, revision, execution_id, idempotency_key, detail, at, written_xid, key_expires_at)
		SELECT x.owner, ` + id + `, 'NOTE', x.id, '` + action + `', ` + rev + `, ` + exec + `, '` + key + `' || g,
			jsonb_build_object('operation', ` + op + `), ` + at + `, pg_current_xact_id(), ` + at + ` + interval '100 years' ` + series + where
	}
	revision := func(n, snap, at, key, where string) string {
		return `INSERT INTO record_revision (owner_id, record_id, revision, snapshot, idempotency_key, created_at, written_xid, digest)
		SELECT x.owner, x.id, ` + n + `, ` + snap + `, '` + key + `' || g, ` + at + `, pg_current_xact_id(), ` +
			rev(n, at, `('`+key+`' || g)`, snap) + ` ` + series + where
	}
	patched, featured := ` WHERE g % 4 = 0`, ` WHERE g % 4 = 2`
	execID := `'X' || lpad(g::text, 25, '0')`
	return []string{
		`INSERT INTO record (owner_id, id, module_code, revision, title, summary, payload, created_at, updated_at)
		SELECT x.owner, x.id, 'NOTE', CASE WHEN g % 2 = 0 THEN 2 ELSE 1 END, CASE WHEN g % 4 = 0 THEN 'note ' || g || ' (patched)' ELSE 'note ' || g END, '',
			CASE WHEN g % 4 = 2 THEN ` + archived + ` ELSE ` + body + ` END, x.t, CASE WHEN g % 2 = 0 THEN ` + later + ` ELSE x.t END ` + series,
		key("vc-", `'NOTE:record:create'`, "x.t", "1", "", ""),
		revision("1", snapshot("1", `'note ' || g`, body, "x.t"), "x.t", "vc-", ""),
		audit(`'A' || lpad(g::text, 25, '0')`, store.ActionRecordCreated, "1", "NULL", "vc-", `'NOTE:record:create'`, "x.t", ""),
		// The patches.
		key("vp-", `'NOTE:record:' || x.id || ':patch'`, later, "2", "", patched),
		revision("2", snapshot("2", `'note ' || g || ' (patched)'`, body, later), later, "vp-", patched),
		audit(`'B' || lpad(g::text, 25, '0')`, store.ActionRecordPatched, "2", "NULL", "vp-", `'NOTE:record:' || x.id || ':patch'`, later, patched),
		// The F01 runs: revision 2 and its execution.
		key("vf-", `'NOTE:record:' || x.id || ':feature:F01'`, later, "2", execID, featured),
		revision("2", snapshot("2", `'note ' || g`, archived, later), later, "vf-", featured),
		`INSERT INTO feature_execution (owner_id, id, module_code, record_id, feature_id, mode, status, record_revision, input, output,
			idempotency_key, created_at, updated_at, written_xid, digest)
		SELECT x.owner, ` + execID + `, 'NOTE', x.id, 'F01', 'internal', 'SUCCEEDED', 2, '{}'::jsonb, '{"archived": true, "wasArchived": false}'::jsonb,
			'vf-' || g, ` + later + `, ` + later + `, pg_current_xact_id(), ` +
			store.ExecutionDigestSQL(store.ExecutionExprs{ID: execID, Owner: "x.owner", Module: "'NOTE'", Record: "x.id", Feature: "'F01'",
				Mode: "'internal'", Status: "'SUCCEEDED'", Revision: "2", Input: "'{}'::jsonb",
				Output: `'{"archived": true, "wasArchived": false}'::jsonb`, Key: `('vf-' || g)`, At: later, XID: xid}) + ` ` + series + featured,
		audit(`'C' || lpad(g::text, 25, '0')`, "FEATURE_F01_EXECUTED", "2", execID, "vf-", `'NOTE:record:' || x.id || ':feature:F01'`, later, featured),
	}
}()

// loadVerifyOwner loads creates 1..creates into the verify cell's owner, a transaction per chunk.
func (h *harness) loadVerifyOwner(ctx context.Context, creates int64) error {
	for lo := int64(0); lo < creates; lo += verifyChunk {
		hi := min(lo+verifyChunk, creates)
		tx, err := h.raw.Begin(ctx)
		if err != nil {
			return fmt.Errorf("bench: load the verify owner: %w", err)
		}
		for _, q := range verifyLoadSQL {
			if _, err := tx.Exec(ctx, q, lo, hi); err != nil {
				_ = tx.Rollback(ctx)
				return fmt.Errorf("bench: load the verify owner (%s): %w", strings.Fields(q)[2], err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("bench: load the verify owner: %w", err)
		}
	}
	if _, err := h.raw.Exec(ctx, `ANALYZE`); err != nil {
		return fmt.Errorf("bench: analyze: %w", err)
	}
	_, _ = h.raw.Exec(ctx, `VACUUM (FREEZE, ANALYZE) audit_event, record_revision, idempotency_record, record, feature_execution`)
	_, _ = h.raw.Exec(ctx, `CHECKPOINT`)
	return nil
}

// measureVerify loads an owner with about events audit events and times verify --owner of it.
func (h *harness) measureVerify(ctx context.Context, events int) (*VerifyCell, error) {
	creates := int64(events) * 2 / 3 // 1.5 audit events per create
	started := time.Now()
	if err := h.loadVerifyOwner(ctx, creates); err != nil {
		return nil, err
	}
	cell := &VerifyCell{Owner: verifyOwner, LoadSeconds: time.Since(started).Seconds()}
	h.logf("  loaded the verify owner (%d creates) in %.1fs\n", creates, cell.LoadSeconds)
	k := kernel.New(h.db, kernel.NewRegistry(kernel.NewRules(h.memMax)), kernel.Options{})
	last := time.Now()
	started = time.Now()
	rep, err := verify.Invariants(ctx, k, model.VerifyOptions{Owner: verifyOwner, Progress: func(p model.VerifyProgress) {
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			h.logf("    verify: %d of ~%d rows (%s)\n", p.Checked, p.Estimate, p.Table)
		}
	}})
	if err != nil {
		return nil, fmt.Errorf("bench: verify the verify owner: %w", err)
	}
	cell.Seconds = time.Since(started).Seconds()
	cell.AuditEvents, cell.Checked, cell.OK, cell.Violations = rep.Checked["auditEvents"], rep.Checked, rep.OK, rep.Violations
	cell.PassSeconds = map[string]float64{}
	for t, ms := range rep.PassMs {
		cell.PassSeconds[t] = ms / 1000
	}
	var rows int64
	for t, n := range rep.Checked {
		if t != "keyLives" {
			rows += n
		}
	}
	cell.RowsPerSecond = float64(rows) / cell.Seconds
	cell.GoalSeconds = VerifyGoalSeconds * float64(cell.AuditEvents) / 1e6
	cell.Met = cell.OK && cell.Seconds <= cell.GoalSeconds
	if !rep.OK {
		for _, inv := range rep.Failed() {
			h.logf("    ✗ %s %d, e.g. %s\n", inv.Name, inv.Count, inv.Examples[0].String())
		}
	}
	return cell, nil
}
