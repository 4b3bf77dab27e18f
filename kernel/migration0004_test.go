package kernel_test

import (
	"context"
	"database/sql"
	"encoding/hex"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for goose
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/attest"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/migrations"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/verify"
)

// Migration 0004 on a database written before it (Expand/Copy/Verify): nothing of the business
// rows is rewritten; the digests of the old revisions and executions are computed from them as
// they are (and the ledger says when and that they attest that, not the write); an outbox
// message gets its execution's key; the transaction that wrote an old row cannot be told, so it
// stays NULL and verify reports those rows as unattributed, not as violations. The old keys still
// replay, the old history is tamper-evident from then on, and new writes chain on it.
func TestMigration0004AttestsOldRowsAndSaysWhatItCannotTell(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testdb.NewEmptyDatabase(t)
	dsn := testdb.DSNOf(t, name)
	sqlDB, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	defer sqlDB.Close()
	n, err := migrations.UpTo(ctx, sqlDB, 3)
	require.NoError(t, err)
	require.Equal(t, 3, n)

	// The rows the kernel wrote before 0004: a NOTE created (key old-c) and patched (old-p), a
	// COMMITMENT notified through the outbox (old-n), with their audit events and key rows.
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	for _, q := range []string{
		`INSERT INTO record VALUES ('old', 'R1', 'NOTE', 2, 'second', '', '{"text": "one"}', $1::timestamptz, $1::timestamptz + interval '1 minute')`,
		`INSERT INTO record_revision VALUES ('old', 'R1', 1, jsonb_build_object('id', 'R1', 'ownerId', 'old', 'moduleCode', 'NOTE', 'revision', 1,
			'title', 'first', 'summary', '', 'payload', '{"text": "one"}'::jsonb, 'createdAt', '2026-01-02T03:04:05.123456Z', 'updatedAt', '2026-01-02T03:04:05.123456Z'), 'old-c', $1::timestamptz)`,
		`INSERT INTO record_revision VALUES ('old', 'R1', 2, jsonb_build_object('id', 'R1', 'ownerId', 'old', 'moduleCode', 'NOTE', 'revision', 2,
			'title', 'second', 'summary', '', 'payload', '{"text": "one"}'::jsonb, 'createdAt', '2026-01-02T03:04:05.123456Z', 'updatedAt', '2026-01-02T03:05:05.123456Z'), 'old-p', $1::timestamptz + interval '1 minute')`,
		`INSERT INTO audit_event (owner_id, id, module_code, record_id, action, revision, idempotency_key, detail, at) VALUES
			('old', 'A1', 'NOTE', 'R1', 'RECORD_CREATED', 1, 'old-c', '{"operation": "NOTE:record:create"}', $1::timestamptz),
			('old', 'A2', 'NOTE', 'R1', 'RECORD_PATCHED', 2, 'old-p', '{"operation": "NOTE:record:R1:patch"}', $1::timestamptz + interval '1 minute')`,
		`INSERT INTO record VALUES ('old', 'C1', 'COMMITMENT', 1, 'promise', '', '{"status": "OPEN"}', $1::timestamptz, $1::timestamptz)`,
		`INSERT INTO record_revision VALUES ('old', 'C1', 1, jsonb_build_object('id', 'C1', 'ownerId', 'old', 'moduleCode', 'COMMITMENT', 'revision', 1,
			'title', 'promise', 'summary', '', 'payload', '{"status": "OPEN"}'::jsonb, 'createdAt', '2026-01-02T03:04:05.123456Z', 'updatedAt', '2026-01-02T03:04:05.123456Z'), NULL, $1::timestamptz)`,
		`INSERT INTO audit_event (owner_id, id, module_code, record_id, action, revision, detail, at) VALUES
			('old', 'A3', 'COMMITMENT', 'C1', 'RECORD_CREATED', 1, '{"operation": "COMMITMENT:record:create"}', $1::timestamptz)`,
		`INSERT INTO feature_execution VALUES ('old', 'X1', 'COMMITMENT', 'C1', 'F02', 'outbox', 'DELIVERED', 1, '{}', '{"queued": true}', 'old-n', $1::timestamptz, $1::timestamptz + interval '2 minutes')`,
		`INSERT INTO outbox_message VALUES ('old', 'M1', 'X1', 'notifier', '{"recordId": "C1", "revision": 1, "executionId": "X1"}', 'X1', 'DELIVERED', 1, $1::timestamptz, NULL, $1::timestamptz, $1::timestamptz + interval '2 minutes')`,
		`INSERT INTO audit_event (owner_id, id, module_code, record_id, action, revision, execution_id, idempotency_key, detail, at) VALUES
			('old', 'A4', 'COMMITMENT', 'C1', 'FEATURE_F02_QUEUED', 1, 'X1', 'old-n', '{"operation": "COMMITMENT:record:C1:feature:F02"}', $1::timestamptz),
			('old', 'A5', 'COMMITMENT', 'C1', 'FEATURE_F02_DELIVERED', 1, 'X1', 'old-n', '{}', $1::timestamptz + interval '2 minutes')`,
	} {
		_, err := sqlDB.ExecContext(ctx, q, at)
		require.NoError(t, err, q)
	}
	before := map[string]string{}
	for _, tb := range []string{"record", "record_revision", "feature_execution", "audit_event", "outbox_message"} {
		var dump string
		require.NoError(t, sqlDB.QueryRowContext(ctx, `SELECT string_agg(t::text, '|' ORDER BY t::text) FROM `+tb+` t`).Scan(&dump))
		before[tb] = dump
	}

	_, err = migrations.Up(ctx, sqlDB)
	require.NoError(t, err)

	// Nothing of the business rows changed: each row is what it was, with the new columns beside.
	for _, tb := range []string{"record", "record_revision", "feature_execution", "audit_event", "outbox_message"} {
		var dump string
		cols := map[string]string{"record": "t", "record_revision": "(t.owner_id, t.record_id, t.revision, t.snapshot, t.idempotency_key, t.created_at)",
			"feature_execution": "(t.owner_id, t.id, t.module_code, t.record_id, t.feature_id, t.mode, t.status, t.record_revision, t.input, t.output, t.idempotency_key, t.created_at, t.updated_at)",
			"audit_event":       "(t.owner_id, t.id, t.module_code, t.record_id, t.action, t.revision, t.execution_id, t.idempotency_key, t.detail, t.at)",
			"outbox_message":    "(t.owner_id, t.id, t.execution_id, t.provider, t.payload_ref, t.idempotency_id, t.status, t.attempts, t.next_attempt_at, t.last_error, t.created_at, t.updated_at)"}[tb]
		require.NoError(t, sqlDB.QueryRowContext(ctx, `SELECT string_agg(`+cols+`::text, '|' ORDER BY `+cols+`::text) FROM `+tb+` t`).Scan(&dump))
		require.Equal(t, before[tb], dump, tb)
	}
	// What it can tell: the digests, from the rows as they are; the message's key.
	var d1, d2 []byte
	var xid *string
	require.NoError(t, sqlDB.QueryRowContext(ctx, `SELECT a.digest, b.digest, b.written_xid::text FROM record_revision a, record_revision b
		WHERE a.record_id = 'R1' AND a.revision = 1 AND b.record_id = 'R1' AND b.revision = 2`).Scan(&d1, &d2, &xid))
	require.Nil(t, xid, "the transaction that wrote an old row is not recorded anywhere: it stays NULL")
	var snap1, snap2 []byte
	require.NoError(t, sqlDB.QueryRowContext(ctx, `SELECT (SELECT snapshot::text FROM record_revision WHERE record_id = 'R1' AND revision = 1),
		(SELECT snapshot::text FROM record_revision WHERE record_id = 'R1' AND revision = 2)`).Scan(&snap1, &snap2))
	k1, k2 := "old-c", "old-p"
	t1, t2 := at, at.Add(time.Minute)
	require.Equal(t, hex.EncodeToString(attest.Revision(nil, attest.Head{At: &t1, Key: &k1}, snap1)), hex.EncodeToString(d1))
	require.Equal(t, hex.EncodeToString(attest.Revision(d1, attest.Head{At: &t2, Key: &k2}, snap2)), hex.EncodeToString(d2))
	var msgKey string
	require.NoError(t, sqlDB.QueryRowContext(ctx, `SELECT idempotency_key FROM outbox_message WHERE id = 'M1'`).Scan(&msgKey))
	require.Equal(t, "old-n", msgKey)
	var status string
	var detail []byte
	require.NoError(t, sqlDB.QueryRowContext(ctx, `SELECT status, detail::text FROM data_migration_ledger WHERE name = '0004_row_digests'`).Scan(&status, &detail))
	require.Equal(t, "passed", status)
	require.Contains(t, string(detail), `"revisions": 3`)
	require.Contains(t, string(detail), "not as it was written")

	// The old history verifies clean, its rows reported as unattributed.
	db, err := store.Open(ctx, dsn, store.Options{})
	require.NoError(t, err)
	defer db.Close()
	k := kernel.New(db, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
	rep, err := verify.Invariants(ctx, k, model.VerifyOptions{})
	require.NoError(t, err)
	require.True(t, rep.OK, "%+v", rep.Failed())
	require.Equal(t, map[string]int64{"revisions": 2, "executions": 1, "outboxMessages": 1, "auditEvents": 3}, rep.Unattributed)

	// The history is tamper-evident from the migration on, and new writes chain on it.
	res, err := k.Patch(ctx, model.PatchInput{Owner: "old", Module: kernel.ModuleNote, RecordID: "R1", ExpectRevision: 2, Key: "new-p", Title: str("third")})
	require.NoError(t, err)
	require.Equal(t, 3, res.Record.Revision)
	rep, err = verify.Invariants(ctx, k, model.VerifyOptions{})
	require.NoError(t, err)
	require.True(t, rep.OK, "%+v", rep.Failed())
	// --since counts the unattributed rows of the keys written since only: a key after the old
	// ones ("zz-since") puts them in the pages verify reads, and none of them is counted.
	var since time.Time
	require.NoError(t, sqlDB.QueryRowContext(ctx, `SELECT clock_timestamp()`).Scan(&since))
	_, err = k.Patch(ctx, model.PatchInput{Owner: "old", Module: kernel.ModuleNote, RecordID: "R1", ExpectRevision: 3, Key: "zz-since", Title: str("fourth")})
	require.NoError(t, err)
	rep, err = verify.Invariants(ctx, k, model.VerifyOptions{Since: since})
	require.NoError(t, err)
	require.True(t, rep.OK, "%+v", rep.Failed())
	require.Empty(t, rep.Unattributed, "no key written since has a row that cannot name its transaction")
	_, err = sqlDB.ExecContext(ctx, `UPDATE record_revision SET snapshot = jsonb_set(snapshot, '{title}', '"HACKED"') WHERE record_id = 'R1' AND revision = 1`)
	require.NoError(t, err)
	rep, err = verify.Invariants(ctx, k, model.VerifyOptions{})
	require.NoError(t, err)
	require.False(t, rep.OK)
	chain := rep.Invariants[indexOf(rep, verify.InvRevisionChain)]
	require.EqualValues(t, 1, chain.Count, "%+v", chain.Examples)
	require.Equal(t, "old-c", chain.Examples[0].Key)
}

func indexOf(rep model.InvariantReport, name string) int {
	for i, inv := range rep.Invariants {
		if inv.Name == name {
			return i
		}
	}
	return -1
}
