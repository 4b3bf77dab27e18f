package demorows_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/storetest"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/store/demorows"
	"github.com/idemwork/idemwork/store/legacy"
)

func TestTheSeedStateSaysWhetherTheSeedRanAndItsKeyIsStillLive(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	state := func(now time.Time) [2]bool {
		seeded, live, err := demorows.SeedState(ctx, db.DB, "alice", "k", now)
		require.NoError(t, err)
		return [2]bool{seeded, live}
	}
	require.Equal(t, [2]bool{false, false}, state(storetest.T0))
	storetest.QueueRun(t, db.DB, "bob", "k", storetest.T0)
	require.Equal(t, [2]bool{false, false}, state(storetest.T0), "another owner's seed is not alice's")

	storetest.QueueRun(t, db.DB, "alice", "k", storetest.T0)
	require.Equal(t, [2]bool{true, false}, state(storetest.T0), "seeded, and the key's row is gone")
	storetest.KeyRow(t, db, "alice", "k", "create:NOTE", storetest.T0) // expires a day later
	require.Equal(t, [2]bool{true, true}, state(storetest.T0.Add(23*time.Hour)))
	require.Equal(t, [2]bool{true, false}, state(storetest.T0.Add(24*time.Hour)), "expired at its expiry")
}

func TestALegacyReceiptIsInsertedOnceAsJSON(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	r := legacy.Receipt{OwnerID: "alice", Key: "legacy-1", Operation: "identity:create", Fingerprint: "f",
		Response: json.RawMessage(`{"policy":"raw-json-v1","body":{"identityId":"legacy-1"}}`), CreatedAt: storetest.T0, ExpiresAt: storetest.T0.Add(time.Hour)}
	ok, err := legacy.InsertReceipt(ctx, db.DB, r)
	require.NoError(t, err)
	require.True(t, ok)
	r.Response = json.RawMessage(`{"policy":"other"}`)
	ok, err = legacy.InsertReceipt(ctx, db.DB, r)
	require.NoError(t, err)
	require.False(t, ok, "the key has its row already")
	require.Equal(t, 1, storetest.CountWhere(t, db, `SELECT count(*) FROM idempotency_record WHERE owner_id = 'alice' AND idempotency_key = 'legacy-1'
		AND status = 'SUCCEEDED' AND response->>'policy' = 'raw-json-v1' AND response->'body'->>'identityId' = 'legacy-1'
		AND created_at = updated_at AND expires_at = $1`, storetest.T0.Add(time.Hour)))
}
