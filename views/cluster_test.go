package views_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/storm/stormtypes"
	"github.com/idemwork/idemwork/views"
)

// clusterStates is a ClusterReader that answers the state last set (or an error).
type clusterStates struct {
	mu  sync.Mutex
	st  model.Cluster
	err error
}

func (c *clusterStates) set(st model.Cluster, err error) {
	c.mu.Lock()
	c.st, c.err = st, err
	c.mu.Unlock()
}

func (c *clusterStates) Cluster(context.Context) (model.Cluster, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st, c.err
}

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// A formation in sync, as the monitor sees it: node1 primary (this session's), node2 its
// synchronous secondary.
var inSync = model.Cluster{Source: "monitor", Monitor: "127.0.0.1:7601", Connected: "127.0.0.1:7602", Synchronous: true,
	SyncNames: "ANY 1 (pgautofailover_standby_2)", SyncCommit: "on", Nodes: []model.ClusterNode{
		{Name: "node1", Addr: "127.0.0.1:7602", Role: "primary", State: "primary", Healthy: yes(), LagBytes: -1, ReplayLagMs: -1, Connected: true},
		{Name: "node2", Addr: "127.0.0.1:7603", Role: "secondary", State: "secondary", Sync: "quorum", Healthy: yes(), LagBytes: 0, ReplayLagMs: 0.4},
	}}

// After node1 died: node2 promoted, alone (wait_primary), this session reconnected to it.
var failedOver = model.Cluster{Source: "monitor", Monitor: "127.0.0.1:7601", Connected: "127.0.0.1:7603", SyncCommit: "on", Nodes: []model.ClusterNode{
	{Name: "node1", Addr: "127.0.0.1:7602", State: "primary → demoted", Healthy: no(), LagBytes: -1, ReplayLagMs: -1},
	{Name: "node2", Addr: "127.0.0.1:7603", Role: "primary", State: "wait_primary", Healthy: yes(), LagBytes: -1, ReplayLagMs: -1, Connected: true},
}}

func clusterView(t *testing.T, src *clusterStates, run views.StormRunner) *views.Cluster {
	t.Helper()
	v := views.NewCluster(plainCtx(), src, run)
	v.SetSize(150, 30)
	settle(t, v.Update, v.Init())
	return v
}

// The Cluster view shows each node, which is primary, the standby's sync state and lag, and
// whether commits are synchronous; when the primary moves it says when, from which node to
// which, that this session reconnected, and that commits are no longer synchronous.
func TestTheClusterViewShowsTheNodesAndWhenThePrimaryMoves(t *testing.T) {
	t.Parallel()
	src := &clusterStates{st: inSync}
	v := clusterView(t, src, nil)
	screen := v.View()
	require.Contains(t, screen, "pg_auto_failover monitor 127.0.0.1:7601")
	require.Contains(t, screen, "synchronous: a commit acknowledged here is on a standby too (synchronous_standby_names ANY 1 (pgautofailover_standby_2))")
	require.Regexp(t, `\*node1 +127\.0\.0\.1:7602 +primary +primary +— +— +ok`, screen)
	require.Regexp(t, `node2 +127\.0\.0\.1:7603 +secondary +secondary +quorum +0 B 0\.0 s +ok`, screen)
	require.Contains(t, screen, "nothing yet")

	src.set(model.Cluster{}, apperr.New(apperr.DatabaseUnavailable, "the database could not be reached"))
	settle(t, v.Update, v.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("r")}))
	require.Contains(t, v.View(), "the database does not answer: DATABASE_UNAVAILABLE")

	src.set(failedOver, nil)
	settle(t, v.Update, v.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("r")}))
	screen = v.View()
	require.Contains(t, screen, "the primary moved: node1 127.0.0.1:7602 → node2 127.0.0.1:7603")
	require.Contains(t, screen, "this session reconnected: 127.0.0.1:7602 → 127.0.0.1:7603")
	require.Contains(t, screen, "not synchronous: a commit acknowledged here can be lost on failover (synchronous_standby_names is empty)")
	require.Regexp(t, `node1 +127\.0\.0\.1:7602 +primary → demoted .* FAILING`, screen)
	require.Regexp(t, `\*node2 +127\.0\.0\.1:7603 +primary +wait_primary`, screen)
	// Newest first: the move above the outage.
	require.Less(t, strings.Index(screen, "the primary moved"), strings.Index(screen, "does not answer"))

	// In an 80-column terminal (a 64-column pane) the address goes; no line is wider.
	v.SetSize(64, 20)
	screen = v.View()
	require.NotContains(t, screen, "ADDRESS")
	require.Regexp(t, `node1 +primary → d\S* +— +— +FAILING`, screen)
	for _, line := range strings.Split(screen, "\n") {
		require.LessOrEqual(t, lipgloss.Width(line), 64, line)
	}
}

// A storm fired across a failover shows the moment the primary moved, its requests that got
// DATABASE_UNAVAILABLE or COMMIT_UNKNOWN, and — once they were retried one at a time with the
// same key — what the database holds: the key executed once.
func TestAStormAcrossAFailoverShowsItsFailuresAndTheVerdictAfterTheirRetries(t *testing.T) {
	t.Parallel()
	src := &clusterStates{st: inSync}
	var mu sync.Mutex
	var retries []stormtypes.Spec
	run := func(ctx context.Context, spec stormtypes.Spec, events chan<- stormtypes.Event, _ chan<- stormtypes.LockSample) (stormtypes.Summary, error) {
		sum := stormtypes.Summary{Requests: spec.N, Outcomes: map[string]int{}, Errors: map[string]stormtypes.ErrorSample{},
			Storm: stormtypes.Setup{ID: "s1", Key: spec.Key()}, WallMs: 40}
		mu.Lock()
		first := spec.N == 50
		if !first {
			retries = append(retries, spec)
		}
		mu.Unlock()
		for i := 0; i < spec.N; i++ {
			e := stormtypes.Event{Index: i, Outcome: "REPLAYED", Status: 201, RecordID: "r1", Revision: 1}
			if first {
				switch {
				case i == 0:
					e.Outcome = "EXECUTED"
				case i < 3:
					e.Outcome, e.Status = "DATABASE_UNAVAILABLE", 503
				case i == 3:
					e.Outcome, e.Status = "COMMIT_UNKNOWN", 503
				default:
					e.Outcome = "JOINED"
				}
			}
			sum.Outcomes[e.Outcome]++
			if e.Status == 503 {
				sum.Errors[e.Outcome] = stormtypes.ErrorSample{Count: sum.Outcomes[e.Outcome], Status: 503}
			}
			events <- e
		}
		sum.Verified = stormtypes.Verified{KeyStatus: "SUCCEEDED", Revisions: 1, AuditEvents: 1}
		sum.Verdict = stormtypes.Verdict{Verdict: "agrees", Text: "agrees"}
		return sum, nil
	}
	cluster := clusterView(t, src, run)
	storm := views.NewStorm(plainCtx(), views.StormDeps{Run: run})
	storm.SetSize(120, 37)
	both := func(msg tea.Msg) tea.Cmd { return tea.Batch(storm.Update(msg), cluster.Update(msg)) }
	settle(t, both, storm.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("f")}))

	mu.Lock()
	require.Len(t, retries, 1, "the 3 failed requests were retried together, once")
	require.Equal(t, 3, retries[0].N)
	require.Equal(t, 1, retries[0].Concurrency, "one at a time, as a client retries")
	require.False(t, retries[0].Share)
	key := retries[0].Key()
	mu.Unlock()

	src.set(failedOver, nil) // the monitor's move is seen at the next reading, after the storm
	settle(t, cluster.Update, cluster.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("r")}))
	screen := cluster.View()
	require.Contains(t, screen, "storm s1: 50 requests, 2 DATABASE_UNAVAILABLE, 1 COMMIT_UNKNOWN, 0 other failures")
	require.Regexp(t, `key `+key+` · the primary moved at \d\d:\d\d:\d\d\.\d{3} \(node1 127\.0\.0\.1:7602 → node2 127\.0\.0\.1:7603\)`, screen)
	require.Contains(t, screen, "after their retries: REPLAYED 3 — executed once: 1 revision in the database, the key SUCCEEDED")
}

// On a read-only session the failed requests are not retried (a retry is a write): the view
// says so and what to do.
func TestAReadOnlySessionDoesNotRetryAStormsFailedRequests(t *testing.T) {
	t.Parallel()
	src := &clusterStates{st: inSync}
	called := 0
	run := func(ctx context.Context, spec stormtypes.Spec, events chan<- stormtypes.Event, _ chan<- stormtypes.LockSample) (stormtypes.Summary, error) {
		called++
		for i := 0; i < spec.N; i++ {
			events <- stormtypes.Event{Index: i, Outcome: "DATABASE_UNAVAILABLE", Status: 503}
		}
		return stormtypes.Summary{Requests: spec.N, Outcomes: map[string]int{"DATABASE_UNAVAILABLE": spec.N},
			Errors: map[string]stormtypes.ErrorSample{"DATABASE_UNAVAILABLE": {Count: spec.N, Status: 503}}, Storm: stormtypes.Setup{ID: "s2", Key: spec.Key()}}, nil
	}
	ctx := plainCtx()
	ctx.Writes = standby
	cluster := views.NewCluster(ctx, src, run)
	cluster.SetSize(150, 30)
	settle(t, cluster.Update, cluster.Init())
	storm := views.NewStorm(plainCtx(), views.StormDeps{Run: run})
	storm.SetSize(120, 37)
	both := func(msg tea.Msg) tea.Cmd { return tea.Batch(storm.Update(msg), cluster.Update(msg)) }
	settle(t, both, storm.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("f")}))
	require.Equal(t, 1, called, "no retry")
	require.Contains(t, cluster.View(), "not retried: this session is read-only (retry the key yourself: a replay tells what happened)")
}
