package workbench_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/internal/workbench"
	"github.com/idemwork/idemwork/store"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// The Cluster view's reader, on a primary with a plain pg_basebackup standby and no monitor:
// the connected node is the primary, the standby streams to it asynchronously, and commits are
// not synchronous. On the standby itself, the connected node is a standby.
func TestTheClusterReaderSeesAPrimaryItsAsyncStandbyAndAStandby(t *testing.T) {
	standby := testdb.HotStandby(t)
	name := testdb.NewDatabase(t)
	standby.WaitCaughtUp(t)
	ctx := context.Background()

	primary, err := store.Open(ctx, testdb.DSNOf(t, name), store.Options{ReadOnly: true})
	require.NoError(t, err)
	defer primary.Close()
	st, err := workbench.Cluster(primary, "").Cluster(ctx)
	require.NoError(t, err)
	require.Equal(t, "node", st.Source)
	require.False(t, st.Synchronous, "no synchronous standby")
	p, ok := st.Primary()
	require.True(t, ok)
	require.True(t, p.Connected)
	require.GreaterOrEqual(t, len(st.Nodes), 2, "the primary and its standby: %+v", st.Nodes)
	require.Equal(t, "standby", st.Nodes[1].Role)
	require.Equal(t, "async", st.Nodes[1].Sync)
	require.GreaterOrEqual(t, st.Nodes[1].LagBytes, int64(0))

	onStandby, err := store.Open(ctx, standby.DSN(name), store.Options{ReadOnly: true})
	require.NoError(t, err)
	defer onStandby.Close()
	st, err = workbench.Cluster(onStandby, "").Cluster(ctx)
	require.NoError(t, err)
	_, ok = st.Primary()
	require.False(t, ok, "a standby is not the primary")
	require.Equal(t, "standby", st.Nodes[0].Role)
	require.True(t, st.Nodes[0].Connected)
	if standby.OverTCP() { // over a socket (the standby of an IDEMWORK_TEST_DSN server) there is no address to name
		require.NotEmpty(t, st.Connected, "reached over loopback TCP: its address is named")
	}
	require.Equal(t, []string{"no pg_auto_failover monitor known: this is the connected node's view (IDEMWORK_MONITOR names a formation's monitor)"}, st.Notes)
}
