package storm_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/faultproxy"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/storm"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// A storm whose answers all arrived but whose database could not be read afterwards is not
// verified: its verdict is failed with the coded reason — never "agrees", never "the database
// disagrees" (the database said nothing), and never the driver's text.
func TestAStormWhoseDatabaseCannotBeReadIsNotVerifiedAndSaysWhy(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	b := setup(t)
	// The storm's requests go straight to the database (env.DSN); what verifies them — the
	// kernel's session — goes through a proxy that cuts the connection reading the revisions.
	p := faultproxy.Start(t, b.db.DSN)
	home, err := store.Open(ctx, p.DSN(), store.Options{MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(home.Close)
	env := b.env
	env.Kernel = kernel.New(home, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
	p.ArmStatement("SELECT record_id, revision FROM record_revision")

	spec := createSpec("uma", "k-unread")
	spec.N, spec.Concurrency = 10, 4
	sum, err := storm.Run(ctxFor(t), env, spec, nil)
	require.NoError(t, err)
	<-p.Fired()
	require.Equal(t, 1, sum.Outcomes["EXECUTED"], "%v", sum.Outcomes)

	require.NotNil(t, sum.Verified.Unread)
	require.Equal(t, "DATABASE_UNAVAILABLE", sum.Verified.Unread.Code)
	require.Contains(t, sum.Verified.Unread.Message, "retry")
	require.False(t, sum.Verified.Agrees)
	require.Empty(t, sum.Verified.Problems, "not a disagreement")

	v := sum.Verdict
	require.Equal(t, stormtypes.VerdictFailed, v.Verdict)
	require.Equal(t, "DATABASE_UNAVAILABLE", v.Code)
	require.True(t, v.Answers.OK, "every request was answered")
	require.False(t, v.Database.OK)
	require.Contains(t, v.Database.Text, "not verified: the database could not be read: DATABASE_UNAVAILABLE")
	require.Contains(t, v.Text, "not verified")
	require.NotContains(t, v.Text, "disagrees")
	for _, text := range []string{v.Text, v.Database.Text} {
		require.NotContains(t, text, "unexpected EOF")
		require.NotContains(t, text, "dial")
		require.NotContains(t, text, "conn closed")
	}
}
