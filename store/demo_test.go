package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/store"
)

func TestTheSeedStateSaysWhetherTheSeedRanAndItsKeyIsStillLive(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	state := func(now time.Time) [2]bool {
		seeded, live, err := db.SeedState(ctx, "alice", "k", now)
		require.NoError(t, err)
		return [2]bool{seeded, live}
	}
	require.Equal(t, [2]bool{false, false}, state(t0))
	queueRun(t, db.DB, "bob", "k", t0)
	require.Equal(t, [2]bool{false, false}, state(t0), "another owner's seed is not alice's")

	queueRun(t, db.DB, "alice", "k", t0)
	require.Equal(t, [2]bool{true, false}, state(t0), "seeded, and the key's row is gone")
	keyRow(t, db, "alice", "k", "create:NOTE", t0) // expires a day later
	require.Equal(t, [2]bool{true, true}, state(t0.Add(23*time.Hour)))
	require.Equal(t, [2]bool{true, false}, state(t0.Add(24*time.Hour)), "expired at its expiry")
}

func TestALegacyReceiptIsInsertedOnceAsJSON(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	r := store.LegacyReceipt{OwnerID: "alice", Key: "legacy-1", Operation: "identity:create", Fingerprint: "f",
		Response: json.RawMessage(`{"policy":"raw-json-v1","body":{"identityId":"legacy-1"}}`), CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	ok, err := db.InsertLegacyReceipt(ctx, r)
	require.NoError(t, err)
	require.True(t, ok)
	r.Response = json.RawMessage(`{"policy":"other"}`)
	ok, err = db.InsertLegacyReceipt(ctx, r)
	require.NoError(t, err)
	require.False(t, ok, "the key has its row already")
	require.Equal(t, 1, countWhere(t, db, `SELECT count(*) FROM idempotency_record WHERE owner_id = 'alice' AND idempotency_key = 'legacy-1'
		AND status = 'SUCCEEDED' AND response->>'policy' = 'raw-json-v1' AND response->'body'->>'identityId' = 'legacy-1'
		AND created_at = updated_at AND expires_at = $1`, t0.Add(time.Hour)))
}
