package readmodel_test

// These tests explain the exact SQL the read models run (exposed by export_test.go).

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/readmodel"
)

func TestBrowsingAndSearchingAMillionAuditEventsReadsOnePageNotTheHistory(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	// Owner "big": 100,000 records (the first 1,000 with 100 revisions each), 100,000 executions
	// and keys, and a million audit events (a few rare actions among them); owner "small" beside it.
	_, err := db.Pool.Exec(ctx, `INSERT INTO record (owner_id, id, module_code, revision, title, payload, created_at, updated_at)
		SELECT 'big', lpad(g::text, 26, '0'), 'NOTE', 100, 'note ' || g, '{}', timestamptz '2026-01-01' + g * interval '1 minute', now()
		FROM generate_series(1, 100000) g`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `INSERT INTO record_revision (owner_id, record_id, revision, snapshot, idempotency_key, created_at)
		SELECT 'big', lpad((1 + g % 1000)::text, 26, '0'), 1 + g / 1000, '{}', 'k' || g, timestamptz '2026-01-01' + g * interval '1 second'
		FROM generate_series(0, 99999) g`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `INSERT INTO feature_execution (owner_id, id, module_code, record_id, feature_id, mode, status, record_revision, idempotency_key, created_at, updated_at)
		SELECT 'big', 'e' || lpad(g::text, 25, '0'), 'NOTE', lpad((1 + g % 1000)::text, 26, '0'), 'F01', 'internal', 'SUCCEEDED', 1, 'k' || g,
			timestamptz '2026-01-01' + g * interval '1 second', now()
		FROM generate_series(1, 100000) g`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
		SELECT 'big', 'k' || g, 'NOTE:record:create', 'f', 'SUCCEEDED', '{}', timestamptz '2026-01-01' + g * interval '1 second', now(), now()
		FROM generate_series(1, 100000) g`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `INSERT INTO audit_event (owner_id, id, module_code, record_id, action, revision, idempotency_key, detail, at)
		SELECT 'big', lpad(g::text, 26, '0'), 'NOTE', 'r' || (g % 1000),
			CASE WHEN g % 100000 = 0 THEN 'FEATURE_F02_BLOCKED' WHEN g % 2 = 0 THEN 'RECORD_PATCHED' ELSE 'RECORD_CREATED' END,
			1, 'k' || g, '{}', timestamptz '2026-01-01 00:00:00+00' + g * interval '1 second'
		FROM generate_series(1, 1000000) g`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `INSERT INTO audit_event (owner_id, id, module_code, action, detail, at)
		SELECT 'small', lpad(g::text, 26, '0'), 'NOTE', 'RECORD_CREATED', '{}', now() FROM generate_series(1, 1000) g`)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `ANALYZE`)
	require.NoError(t, err)

	const limit = 100
	middle := &readmodel.Cursor{At: time.Date(2026, 1, 6, 18, 53, 20, 0, time.UTC), Kind: "audit", ID: lpad26(500000)}
	byKey := &readmodel.Cursor{Key: "k5", At: time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC), Kind: "audit", ID: lpad26(5)}
	build := func(f func() (string, []any, error)) func() (string, []any) {
		return func() (string, []any) {
			q, args, err := f()
			require.NoError(t, err)
			return q, args
		}
	}
	cases := map[string]func() (string, []any){
		"audit first page":            func() (string, []any) { return readmodel.AuditPageSQL("big", "", limit, nil) },
		"audit page in the middle":    func() (string, []any) { return readmodel.AuditPageSQL("big", "", limit, middle) },
		"audit by action prefix":      func() (string, []any) { return readmodel.AuditPageSQL("big", "RECORD_", limit, middle) },
		"audit by a rare action":      func() (string, []any) { return readmodel.AuditPageSQL("big", "FEATURE_", limit, nil) },
		"timeline newest first":       func() (string, []any) { return readmodel.HistorySQL("big", limit, nil, true) },
		"timeline oldest first":       func() (string, []any) { return readmodel.HistorySQL("big", limit, nil, false) },
		"timeline page in the middle": func() (string, []any) { return readmodel.HistorySQL("big", limit, middle, true) },
		"audit by key prefix": build(func() (string, []any, error) {
			return readmodel.AuditSQL(model.AuditQuery{Owner: "big", KeyPrefix: "k5"}, limit, byKey)
		}),
		"keys by prefix": build(func() (string, []any, error) {
			return readmodel.KeysSQL(model.KeyQuery{Owner: "big", Prefix: "k12"}, limit, &readmodel.Cursor{ID: "k1234"})
		}),
		"records by id prefix": build(func() (string, []any, error) {
			return readmodel.RecordsSQL(model.RecordQuery{Owner: "big", IDPrefix: "000000000000000000000"}, limit, &readmodel.Cursor{ID: lpad26(90000)})
		}),
		"executions by key prefix": build(func() (string, []any, error) {
			return readmodel.ExecutionsSQL(model.ExecutionQuery{Owner: "big", KeyPrefix: "k9"}, limit, &readmodel.Cursor{Key: "k9", At: time.Now(), ID: "e"})
		}),
		"executions by record prefix": build(func() (string, []any, error) {
			return readmodel.ExecutionsSQL(model.ExecutionQuery{Owner: "big", RecordPrefix: "00000000000000000000000"}, limit, nil)
		}),
		"timeline by key prefix": build(func() (string, []any, error) {
			return readmodel.TimelineSQL(model.HistoryQuery{Owner: "big", KeyPrefix: "k7"}, limit, byKey)
		}),
		"timeline of one key": build(func() (string, []any, error) {
			return readmodel.TimelineSQL(model.HistoryQuery{Owner: "big", Key: "k77"}, limit, nil)
		}),
		"timeline by action prefix": build(func() (string, []any, error) {
			return readmodel.TimelineSQL(model.HistoryQuery{Owner: "big", ActionPrefix: "RECORD_P", Desc: true}, limit, middle)
		}),
	}
	big := []string{"audit_event", "idempotency_record", "feature_execution", "record_revision"}
	for name, build := range cases {
		for _, generic := range []bool{false, true} {
			q, args := build()
			rows, seq := testdb.PlanRows(t, db, q, args, generic)
			for _, table := range big {
				require.NotContains(t, seq, table, "%s (generic plan %v): no sequential scan of a big table", name, generic)
			}
			// Each source reads at most one page (+1 to know there is more) through its index.
			require.LessOrEqual(t, rows, float64(4*(limit+2)), "%s (generic plan %v) read %v rows", name, generic, rows)
			require.Positive(t, rows, "%s (generic plan %v) found its page", name, generic)
		}
	}

	// And the pages are right: the page after the cursor starts just past it.
	got, next, err := readmodel.Audit(ctx, db.DB, model.AuditQuery{Owner: "big", Limit: limit, Cursor: middle.Encode()})
	require.NoError(t, err)
	require.Len(t, got, limit)
	require.Equal(t, lpad26(499999), got[0].ID)
	require.NotEmpty(t, next)

	// A rare action is found among a million events, newest first, and nothing else is.
	rare, next, err := readmodel.Audit(ctx, db.DB, model.AuditQuery{Owner: "big", ActionPrefix: "FEATURE_F02"})
	require.NoError(t, err)
	require.Empty(t, next)
	require.Len(t, rare, 10)
	require.Equal(t, lpad26(1000000), rare[0].ID)
	for _, a := range rare {
		require.Equal(t, "FEATURE_F02_BLOCKED", a.Action)
	}
	// A key prefix lists exactly the keys that start with it, A→Z, across pages.
	var keys []string
	cursor := ""
	for {
		rows, next, err := readmodel.Keys(ctx, db.DB, model.KeyQuery{Owner: "big", Prefix: "k9999", Limit: 4, Cursor: cursor})
		require.NoError(t, err)
		for _, r := range rows {
			keys = append(keys, r.Key)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	require.Equal(t, []string{"k9999", "k99990", "k99991", "k99992", "k99993", "k99994", "k99995", "k99996", "k99997", "k99998", "k99999"}, keys)
}

func lpad26(n int) string {
	s := []byte("00000000000000000000000000")
	for i := len(s) - 1; n > 0; i-- {
		s[i] = byte('0' + n%10)
		n /= 10
	}
	return string(s)
}

// On a database whose default collation is not byte order (an ICU locale here, as production
// databases often have), a prefix is still a byte-order range: the key columns are COLLATE "C"
// (migration 0002), so a search returns exactly the keys that start with the prefix.
func TestAKeyPrefixIsExactUnderANonCDefaultCollation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, testdb.AdminDSN(t))
	require.NoError(t, err)
	name := fmt.Sprintf("icu_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	_, err = admin.Exec(ctx, `CREATE DATABASE `+name+` TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'`)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
		_ = admin.Close(context.Background())
	})
	u, err := url.Parse(testdb.AdminDSN(t))
	require.NoError(t, err)
	u.Path = "/" + name
	db, err := store.Open(ctx, u.String(), store.Options{Migrate: true}) // writable: no ReadOnly asked
	require.NoError(t, err)
	defer db.Close()
	var sortsAsBytes bool
	require.NoError(t, db.Q(ctx).QueryRow(ctx, `SELECT 'aZ' < 'ab'`).Scan(&sortsAsBytes))
	require.False(t, sortsAsBytes, "the database's own collation is not byte order")

	for _, k := range []string{"a1", "A2", "aZ", "ab", "a-b", "b1", "B2"} {
		_, err := db.Q(ctx).Exec(ctx, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
			VALUES ('o', $1, 'NOTE:record:create', 'f', 'SUCCEEDED', '{}', now(), now(), now())`, k)
		require.NoError(t, err)
	}
	rows, _, err := readmodel.Keys(ctx, db, model.KeyQuery{Owner: "o", Prefix: "a"})
	require.NoError(t, err)
	var got []string
	for _, r := range rows {
		got = append(got, r.Key)
	}
	require.Equal(t, []string{"a-b", "a1", "aZ", "ab"}, got, "exactly the keys starting with a, in byte order")
}
