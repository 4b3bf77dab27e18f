package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem"
)

// The reservation of a key another transaction already committed forms no row at all: its
// transaction gets no transaction id (a hit's transaction, sent with the reservation, writes
// nothing and its COMMIT goes nowhere near the WAL), and the key's row is untouched. A fresh key
// is reserved by this transaction, whose id the row records.
func TestAReservationOfACommittedKeyTakesNoTransactionID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	now := time.Now().UTC()
	reserve := func(key string) (reserved bool, xid *string, reservedXID string) {
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Commit(ctx)) }()
		var snapshot string
		require.NoError(t, tx.QueryRow(ctx, idem.ReserveSQL(b.runner), "alice", key, "NOTE:record:create", "fp", now, now.Add(time.Hour)).
			Scan(&reserved, &snapshot))
		require.NoError(t, tx.QueryRow(ctx, `SELECT pg_current_xact_id_if_assigned()::text`).Scan(&xid))
		require.NoError(t, tx.QueryRow(ctx, `SELECT reserved_xid::text FROM idem.idempotency_record WHERE owner_id = 'alice' AND idempotency_key = $1`, key).
			Scan(&reservedXID))
		return reserved, xid, reservedXID
	}
	reserved, xid, first := reserve("k")
	require.True(t, reserved)
	require.NotNil(t, xid)
	require.Equal(t, *xid, first, "the row records the reserving transaction")

	reserved, xid, again := reserve("k")
	require.False(t, reserved)
	require.Nil(t, xid, "a reservation that found the key committed gave its transaction an id")
	require.Equal(t, first, again)
}
