package autofailover_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/autofailover"
)

// A monitor that is not there is an error that says so, within the connect timeout.
func TestAnUnreachableMonitorIsAnErrorThatSaysSo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := autofailover.Monitor{URL: "postgres://autoctl_node@127.0.0.1:1/pg_auto_failover?sslmode=disable&connect_timeout=2"}.State(ctx)
	require.ErrorContains(t, err, "reach the pg_auto_failover monitor")
}

// The primary is the one settled writable node; synchronous needs it in state primary with a
// healthy settled secondary. A node on its way (reported ≠ goal) is neither.
func TestThePrimaryAndSynchronousAreReadFromSettledStates(t *testing.T) {
	node := func(name, reported, goal string, healthy bool) autofailover.NodeState {
		return autofailover.NodeState{Name: name, Reported: reported, Goal: goal, Healthy: healthy}
	}
	for _, c := range []struct {
		name    string
		nodes   []autofailover.NodeState
		primary string
		sync    bool
	}{
		{"in sync", []autofailover.NodeState{node("n1", "primary", "primary", true), node("n2", "secondary", "secondary", true)}, "n1", true},
		{"secondary gone", []autofailover.NodeState{node("n1", "wait_primary", "wait_primary", true), node("n2", "demoted", "catchingup", false)}, "n1", false},
		{"secondary unhealthy", []autofailover.NodeState{node("n1", "primary", "primary", true), node("n2", "secondary", "secondary", false)}, "n1", false},
		{"failing over", []autofailover.NodeState{node("n1", "primary", "draining", true), node("n2", "secondary", "prepare_promotion", true)}, "", false},
		{"promoted", []autofailover.NodeState{node("n1", "primary", "demoted", false), node("n2", "wait_primary", "wait_primary", true)}, "n2", false},
		{"single", []autofailover.NodeState{node("n1", "single", "single", true)}, "n1", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := autofailover.State{Nodes: c.nodes}
			p, ok := st.Primary()
			require.Equal(t, c.primary != "", ok)
			if ok {
				require.Equal(t, c.primary, p.Name)
			}
			require.Equal(t, c.sync, st.Synchronous())
		})
	}
}
