package readmodel_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/readmodel"
)

// walk reads every page of a listing, following its cursors.
func walk[T any](t *testing.T, read func(cursor string) ([]T, string, error)) []T {
	t.Helper()
	var all []T
	cursor := ""
	for i := 0; ; i++ {
		require.Less(t, i, 100, "the cursors do not end")
		rows, next, err := read(cursor)
		require.NoError(t, err)
		all = append(all, rows...)
		if next == "" {
			return all
		}
		cursor = next
	}
}

// A list's G jumps to its last row in one reversed keyset query: every listing read from the
// other end, page by page, is exactly the forward listing backwards — ties in time included.
func TestKeysAndAuditReadFromTheOtherEndAreTheForwardListingReversed(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	// 25 keys and audit events over 5 timestamps (ties), under two key prefixes.
	_, err := db.Pool.Exec(ctx, `
INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
SELECT 'alice', (CASE WHEN i % 2 = 0 THEN 'even-' ELSE 'odd-' END) || lpad(i::text, 3, '0'), 'NOTE:record:create', 'f', 'SUCCEEDED', '{}',
  '2026-01-01T10:00:00Z'::timestamptz + (i / 5) * interval '1 minute', '2027-01-01T00:00:00Z', '2026-01-01T10:00:00Z'
FROM generate_series(1, 25) i;
INSERT INTO audit_event (owner_id, id, module_code, action, idempotency_key, at)
SELECT 'alice', 'a' || lpad(i::text, 3, '0'), 'NOTE', CASE WHEN i % 3 = 0 THEN 'RECORD_CREATED' ELSE 'RECORD_PATCHED' END,
  (CASE WHEN i % 2 = 0 THEN 'even-' ELSE 'odd-' END) || lpad((i % 7)::text, 3, '0'),
  '2026-01-01T10:00:00Z'::timestamptz + (i / 5) * interval '1 minute'
FROM generate_series(1, 25) i;
INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
VALUES ('bob', 'odd-999', 'NOTE:record:create', 'f', 'SUCCEEDED', '{}', '2025-01-01T00:00:00Z', '2027-01-01T00:00:00Z', '2025-01-01T00:00:00Z');`)
	require.NoError(t, err)

	for _, prefix := range []string{"", "odd-"} {
		keys := func(reverse bool) []string {
			rows := walk(t, func(c string) ([]model.KeyRow, string, error) {
				return readmodel.Keys(ctx, db.DB, model.KeyQuery{Owner: "alice", Prefix: prefix, Reverse: reverse, Limit: 4, Cursor: c})
			})
			out := make([]string, len(rows))
			for i, r := range rows {
				out[i] = r.Key
			}
			return out
		}
		forward, backward := keys(false), keys(true)
		require.NotEmpty(t, forward)
		slices.Reverse(backward)
		require.Equal(t, forward, backward, "keys, prefix %q", prefix)
		// The first reversed page is the last forward rows: the oldest key in one query.
		first, _, err := readmodel.Keys(ctx, db.DB, model.KeyQuery{Owner: "alice", Prefix: prefix, Reverse: true, Limit: 1})
		require.NoError(t, err)
		require.Equal(t, forward[len(forward)-1], first[0].Key)
	}
	for _, q := range []model.AuditQuery{{}, {ActionPrefix: "RECORD_C"}, {KeyPrefix: "even-"}} {
		ids := func(reverse bool) []string {
			rows := walk(t, func(c string) ([]model.AuditEvent, string, error) {
				q := q
				q.Owner, q.Reverse, q.Limit, q.Cursor = "alice", reverse, 4, c
				return readmodel.Audit(ctx, db.DB, q)
			})
			out := make([]string, len(rows))
			for i, r := range rows {
				out[i] = r.ID
			}
			return out
		}
		forward, backward := ids(false), ids(true)
		require.NotEmpty(t, forward)
		slices.Reverse(backward)
		require.Equal(t, forward, backward, "audit %+v", q)
	}
}

// The latest record of another owner is RECORD_NOT_FOUND, a coded error, still store.ErrNotFound.
func TestTheLatestRecordOfAnotherOwnerIsACodedNotFound(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, `INSERT INTO record VALUES ('dev', '01JREC0000000000000000000A', 'NOTE', 1, 't', '', '{}', now(), now())`)
	require.NoError(t, err)
	_, err = readmodel.LatestRecord(ctx, db.DB, store.RecordRef{Owner: "dev", Module: "NOTE", ID: "01JREC0000000000000000000A"})
	require.NoError(t, err)
	_, err = readmodel.LatestRecord(ctx, db.DB, store.RecordRef{Owner: "alice", Module: "NOTE", ID: "01JREC0000000000000000000A"})
	require.ErrorIs(t, err, store.ErrNotFound)
	ae := apperr.As(err)
	require.Equal(t, apperr.RecordNotFound, ae.Code)
	require.Equal(t, "owner alice has no NOTE record 01JREC0000000000000000000A", ae.Message)
}
