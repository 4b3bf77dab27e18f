// Package tuitest builds a workbench program context over a real test database for the TUI's
// tests, with a pinned display clock and a fixed data set whose ids and times never change, so
// screens can be compared with golden files.
package tuitest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/internal/workbench"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/outbox"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/storm"
	"github.com/idemwork/idemwork/storm/stormtypes"
	"github.com/idemwork/idemwork/views"
)

// Now is the pinned display time of every test screen.
var Now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// Bundle is one test's workbench.
type Bundle struct {
	DB     *testdb.DB
	Kernel *kernel.Kernel
	Ctx    *uictx.ProgramContext
	// Backend is the views' readers and writers over DB and Kernel, wired as cli wires them.
	Backend views.Backend
	// The handles behind Ctx and Backend, for tests that drive or read them.
	Clock    *idem.OffsetClock
	Outbox   *outbox.Worker
	Provider *outbox.MemoryProvider
	Crash    *outbox.CrashSwitch
}

// New returns a program context over a fresh database.
func New(t testing.TB) Bundle {
	t.Helper()
	return NewOver(testdb.NewWith(t, testdb.Options{MaxConns: 16}))
}

// NewOver returns a program context over db (shared by benchmarks that seed it once).
func NewOver(db *testdb.DB) Bundle {
	clock := &idem.OffsetClock{}
	k := kernel.New(db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{Runner: idem.Options{Clock: clock}})
	provider, crash := outbox.NewMemoryProvider(), &outbox.CrashSwitch{}
	worker := outbox.NewWorker(db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": provider}, Clock: clock,
		AfterCall: crash.AfterCall})
	health := &uictx.Health{}
	ctx := &uictx.ProgramContext{
		Styles:  uictx.NewStyles(uictx.DefaultTheme()),
		Keys:    uictx.DefaultKeys(),
		Conn:    uictx.Conn{Embedded: true, Display: "embedded /test/pg", Database: "idemwork", DataDir: "/test/pg"},
		Writes:  workbench.Gate(db.DB),
		Clock:   clock,
		Owner:   "alice",
		Health:  health,
		NowFunc: func() time.Time { return Now },
	}
	// Storms run in this process, as the workbench's do (no child processes, no HTTP servers).
	run := func(ctx context.Context, spec stormtypes.Spec, events chan<- stormtypes.Event, _ chan<- stormtypes.LockSample) (stormtypes.Summary, error) {
		sum, err := storm.Run(ctx, storm.Env{Kernel: k, DSN: db.DSN}, spec, events)
		return sum, workbench.Coded(err)
	}
	backend := workbench.Backend(workbench.Sources{DB: db.DB, Kernel: k, Outbox: worker, Provider: provider, Crash: crash, Storm: run, Health: health})
	return Bundle{DB: db, Kernel: k, Ctx: ctx, Backend: backend, Clock: clock, Outbox: worker, Provider: provider, Crash: crash}
}

// xidSQL gives each request of SeedFixed a transaction of its own, as the kernel's would have
// (fixed numbers, so screens showing them are the same on every run): 7001 the create, 7002 the
// patch, 7003 the publish, 7000 the unkeyed MEM-001 create.
const xidSQL = `
UPDATE idempotency_record SET reserved_xid = (CASE idempotency_key WHEN 'fixed-create' THEN '7001' WHEN 'fixed-patch' THEN '7002' ELSE '7003' END)::xid8;
UPDATE record_revision SET written_xid = (CASE idempotency_key WHEN 'fixed-create' THEN '7001' WHEN 'fixed-patch' THEN '7002' ELSE '7000' END)::xid8;
UPDATE audit_event SET written_xid = (CASE idempotency_key WHEN 'fixed-create' THEN '7001' WHEN 'fixed-patch' THEN '7002' ELSE '7003' END)::xid8;
UPDATE feature_execution SET written_xid = '7003'::xid8;
`

// attestSQL gives the rows SeedFixed wrote the digests the kernel's INSERTs compute (the same
// expressions, store.RevisionDigestSQL and ExecutionDigestSQL): revisions 1, then 2, then the
// execution. The script runs as one transaction, which wrote every row and reserved every key;
// xidSQL then gives each request its own.
var attestSQL = func() string {
	rev := store.RevisionDigestSQL(store.RevisionExprs{Owner: "rv.owner_id", Record: "rv.record_id", Revision: "rv.revision", At: "rv.created_at",
		Key: "rv.idempotency_key", XID: "rv.written_xid::text", Snapshot: "rv.snapshot"})
	exec := store.ExecutionDigestSQL(store.ExecutionExprs{ID: "e.id", Owner: "e.owner_id", Module: "e.module_code", Record: "e.record_id",
		Feature: "e.feature_id", Mode: "e.mode", Status: "e.status", Revision: "e.record_revision", Input: "e.input", Output: "e.output",
		Key: "e.idempotency_key", At: "e.created_at", XID: "e.written_xid::text"})
	return "\nUPDATE record_revision rv SET digest = " + rev + " WHERE rv.revision = 1;" +
		"\nUPDATE record_revision rv SET digest = " + rev + " WHERE rv.revision = 2;" +
		"\nUPDATE feature_execution e SET digest = " + exec + ";\n"
}()

// Fixed record ids of SeedFixed.
const (
	NoteID = "01JDEMONOTE000000000000001"
	MemID  = "01JDEMOMEM0000000000000001"
)

// SeedFixed writes a small data set with fixed ids and times, as the kernel would have: a NOTE
// record created with key "fixed-create" and patched to revision 2 with "fixed-patch", and a
// MEM-001 record whose F02 publish failed closed (BLOCKED) under "fixed-publish".
func SeedFixed(t testing.TB, b Bundle) {
	t.Helper()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	// Keys expire by the runner's clock, which is the real one: far enough ahead that the fixed
	// keys stay SUCCEEDED whenever the tests run.
	exp := t0.AddDate(100, 0, 0)
	// Constants only, so the whole script runs as one simple-protocol batch.
	script := strings.NewReplacer("$1", "'"+NoteID+"'", "$2", "'"+MemID+"'",
		"$3", "'"+t0.Format(time.RFC3339)+"'::timestamptz", "$4", "'"+exp.Format(time.RFC3339)+"'::timestamptz").Replace(`
INSERT INTO record VALUES
 ('alice', $1, 'NOTE', 2, 'Groceries (Saturday)', 'weekly list', '{"items":["milk","eggs","bread"]}', $3, $3 + interval '5 minutes'),
 ('alice', $2, 'MEM-001', 1, 'Meeting notes', '', '{"currentContent":"Ship it","originalContent":"Ship it"}', $3 + interval '10 minutes', $3 + interval '10 minutes');
INSERT INTO record_revision (owner_id, record_id, revision, snapshot, idempotency_key, created_at) VALUES
 ('alice', $1, 1, jsonb_build_object('id', $1::text, 'ownerId', 'alice', 'moduleCode', 'NOTE', 'revision', 1, 'title', 'Groceries', 'summary', 'weekly list',
   'payload', '{"items":["milk","eggs"]}'::jsonb, 'createdAt', '2026-11-29T10:00:00Z', 'updatedAt', '2026-11-29T10:00:00Z'), 'fixed-create', $3),
 ('alice', $1, 2, jsonb_build_object('id', $1::text, 'ownerId', 'alice', 'moduleCode', 'NOTE', 'revision', 2, 'title', 'Groceries (Saturday)', 'summary', 'weekly list',
   'payload', '{"items":["milk","eggs","bread"]}'::jsonb, 'createdAt', '2026-11-29T10:00:00Z', 'updatedAt', '2026-11-29T10:05:00Z'), 'fixed-patch', $3 + interval '5 minutes'),
 ('alice', $2, 1, jsonb_build_object('id', $2::text, 'ownerId', 'alice', 'moduleCode', 'MEM-001', 'revision', 1, 'title', 'Meeting notes', 'summary', '',
   'payload', '{"currentContent":"Ship it","originalContent":"Ship it"}'::jsonb, 'createdAt', '2026-11-29T10:10:00Z', 'updatedAt', '2026-11-29T10:10:00Z'), NULL, $3 + interval '10 minutes');
INSERT INTO feature_execution VALUES
 ('alice', '01JDEMOEXEC000000000000001', 'MEM-001', $2, 'F02', 'blocked_external', 'BLOCKED', 1, '{}', '{"blocked":true}', 'fixed-publish', $3 + interval '11 minutes', $3 + interval '11 minutes');
INSERT INTO audit_event VALUES
 ('alice', '01JDEMOAUDIT00000000000001', 'NOTE', $1, 'RECORD_CREATED', 1, NULL, 'fixed-create', '{}', $3),
 ('alice', '01JDEMOAUDIT00000000000002', 'NOTE', $1, 'RECORD_PATCHED', 2, NULL, 'fixed-patch', '{}', $3 + interval '5 minutes'),
 ('alice', '01JDEMOAUDIT00000000000003', 'MEM-001', $2, 'FEATURE_F02_BLOCKED', 1, '01JDEMOEXEC000000000000001', 'fixed-publish', '{}', $3 + interval '11 minutes');
INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at) VALUES
 ('alice', 'fixed-create', 'NOTE:record:create', repeat('a', 64), 'SUCCEEDED',
   jsonb_build_object('schemaVersion', 1, 'policy', 'record-snapshot-reference-v1', 'result', jsonb_build_object('recordId', $1::text, 'revision', 1)), $3, $4, $3),
 ('alice', 'fixed-patch', 'NOTE:record:' || $1 || ':patch', repeat('b', 64), 'SUCCEEDED',
   jsonb_build_object('schemaVersion', 1, 'policy', 'record-snapshot-reference-v1', 'result', jsonb_build_object('recordId', $1::text, 'revision', 2)), $3 + interval '5 minutes', $4 + interval '5 minutes', $3 + interval '5 minutes'),
 ('alice', 'fixed-publish', 'MEM-001:record:' || $2 || ':feature:F02', repeat('c', 64), 'SUCCEEDED',
   jsonb_build_object('schemaVersion', 1, 'policy', 'feature-execution-reference-v1', 'result', jsonb_build_object('recordId', $2::text, 'revision', 1, 'executionId', '01JDEMOEXEC000000000000001')),
   $3 + interval '11 minutes', $4 + interval '11 minutes', $3 + interval '11 minutes');
UPDATE audit_event a SET key_expires_at = k.expires_at FROM idempotency_record k WHERE k.owner_id = a.owner_id AND k.idempotency_key = a.idempotency_key;
` + xidSQL + attestSQL)
	_, err := b.DB.Pool.Exec(ctx, script)
	require.NoError(t, err)
}
