package legacy_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/storetest"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/store/legacy"
)

func TestTheLegacyCountsSeeEveryRowARedactionCouldMeet(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := context.Background()
	const op, policy = "identity:create", "raw-json-v1"
	receipts := legacy.Receipts{Operation: op, Policy: policy, PolicyAt: []string{"policy"}}
	receipt := func(owner, key, operation, response string) {
		ok, err := legacy.InsertReceipt(ctx, db.DB, legacy.Receipt{OwnerID: owner, Key: key, Operation: operation, Fingerprint: "f",
			Response: json.RawMessage(response), CreatedAt: storetest.T0, ExpiresAt: storetest.T0.Add(time.Hour)})
		require.NoError(t, err)
		require.True(t, ok)
	}
	receipt("alice", "l1", op, `{"policy":"raw-json-v1"}`)
	receipt("bob", "l2", op, `{"policy":"raw-json-v1"}`)
	receipt("alice", "l3", "create:NOTE", `{"policy":"raw-json-v1"}`)
	receipt("alice", "t1", op, `{"policy":"record-snapshot-reference-v1"}`)
	_, err := db.Pool.Exec(ctx, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, created_at, expires_at, updated_at)
		VALUES ('alice', 'p1', $1, 'f', 'PROCESSING', now(), now() + interval '1 hour', now())`, op)
	require.NoError(t, err)

	c, err := legacy.Count(ctx, db.DB, receipts)
	require.NoError(t, err)
	require.Equal(t, legacy.Counts{Receipts: 2, OtherOperations: 1, Typed: 1, Processing: 1}, c)
}

// SPEC §8, IDENTITY: `idemwork legacy redact` deletes exactly
// operation='identity:create' AND response->>'policy'='raw-json-v1', and is safe to rerun.
func TestTheLegacyRedactionDeletesExactlyTheOperationsReceiptsUnderThePolicyAndIsSafeToRerun(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const op, policy = "identity:create", "raw-json-v1"
	receipts := legacy.Receipts{Operation: op, Policy: policy, PolicyAt: []string{"policy"}}
	receipt := func(key, operation, response string) {
		ok, err := legacy.InsertReceipt(ctx, db.DB, legacy.Receipt{OwnerID: "alice", Key: key, Operation: operation, Fingerprint: "f",
			Response: json.RawMessage(response), CreatedAt: storetest.T0, ExpiresAt: storetest.T0.Add(time.Hour)})
		require.NoError(t, err)
		require.True(t, ok)
	}
	receipt("legacy-1", op, `{"policy":"raw-json-v1"}`)
	receipt("legacy-2", op, `{"policy":"raw-json-v1"}`)
	receipt("other-operation", "create:NOTE", `{"policy":"raw-json-v1"}`)
	receipt("other-policy", op, `{"policy":"record-snapshot-reference-v1"}`)
	keys := func() []string {
		rows, err := db.Pool.Query(ctx, `SELECT idempotency_key FROM idempotency_record ORDER BY idempotency_key`)
		require.NoError(t, err)
		keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return keys
	}

	n, err := legacy.Delete(ctx, db.DB, receipts)
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "the operation's two receipts under the policy")
	require.Equal(t, []string{"other-operation", "other-policy"}, keys(),
		"a receipt of another operation under the policy, and one of the operation under another policy, stay")

	n, err = legacy.Delete(ctx, db.DB, receipts)
	require.NoError(t, err)
	require.Zero(t, n, "a rerun deletes nothing more")
	require.Equal(t, []string{"other-operation", "other-policy"}, keys())
}

func TestAnEntryReadForShareHoldsOffItsChangeUntilTheTransactionEnds(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx := testdb.Context(t)
	status, err := legacy.ShareLedgerEntry(ctx, db.DB, "no-such-migration")
	require.NoError(t, err)
	require.Equal(t, "missing", status)

	const name = "0019_identity_legacy_verification" // pending in a fresh database
	require.NoError(t, legacy.SetLedgerEntry(ctx, db.DB, name, "passed", json.RawMessage(`{"receipts":2,"problems":[]}`), storetest.T0))
	set := make(chan error, 1)
	outer := ctx // the change comes from outside the transaction
	require.NoError(t, db.Tx(ctx, func(ctx context.Context) error {
		status, err := legacy.ShareLedgerEntry(ctx, db.DB, name)
		require.NoError(t, err)
		require.Equal(t, "passed", status)
		go func() {
			set <- legacy.SetLedgerEntry(outer, db.DB, name, "failed", json.RawMessage(`{}`), storetest.T0.Add(time.Minute))
		}()
		require.Eventually(t, func() bool {
			return storetest.CountWhere(t, db, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
		}, 10*time.Second, 10*time.Millisecond, "the change waits for the share lock")
		return nil
	}))
	require.NoError(t, <-set)
	require.Equal(t, 1, storetest.CountWhere(t, db, `SELECT count(*) FROM data_migration_ledger WHERE name = $1 AND status = 'failed' AND detail = '{}'
		AND updated_at = $2`, name, storetest.T0.Add(time.Minute)))
}
