package outbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/outbox"
	"github.com/idemwork/idemwork/store"
)

// TestADeliveryIsAClaimTransactionAndAFencedSettleTransaction pins what one delivered message
// costs: the claim (BEGIN, the claiming UPDATE, COMMIT) with the provider call after it, then the
// settle — the fenced message update with BEGIN, the execution's, the audit event, COMMIT.
func TestADeliveryIsAClaimTransactionAndAFencedSettleTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	notify(t, b, "n1")
	tr := &testdb.Trips{}
	db, err := store.Open(context.Background(), b.db.DSN, store.Options{MaxConns: 1, Tracer: tr})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	tr.Take() // what Open sent

	w := outbox.NewWorker(db, outbox.Options{Providers: map[string]outbox.Provider{"notifier": b.provider}, Clock: b.clock})
	rep, err := w.RunOnce(context.Background(), 10)
	require.NoError(t, err)
	require.Equal(t, outbox.Report{Claimed: 1, Delivered: 1}, rep)
	require.Equal(t, []string{
		"batch[begin; settings]", "update outbox_message", "batch[commit]",
		"batch[begin; settings; update outbox_message]", "update feature_execution", "insert into", "batch[commit]",
	}, tr.Take(), "7 round trips")
}
