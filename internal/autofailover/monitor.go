package autofailover

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// NodeState is one node as the monitor sees it (pgautofailover.node).
type NodeState struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
	Host string `json:"host"`
	Port int    `json:"port"`
	// Reported is the state the node's keeper last reported, Goal the one the monitor assigned
	// (primary, secondary, wait_primary, catchingup, draining, demoted, …); a node is settled
	// when the two are equal.
	Reported string `json:"reported"`
	Goal     string `json:"goal"`
	// Healthy is the monitor's last health check of the node's Postgres; Running what the
	// keeper last reported of it.
	Healthy bool `json:"healthy"`
	Running bool `json:"running"`
	// SyncState is the replication state the keeper reported (sync, quorum, async, unknown).
	SyncState string `json:"syncState"`
	LSN       string `json:"lsn"`
	TLI       int    `json:"tli"`
	// ReportedAgo is how long ago the keeper last reported.
	ReportedAgo time.Duration `json:"reportedAgoMs"`
}

// Addr is the node's host:port.
func (n NodeState) Addr() string { return n.Host + ":" + strconv.Itoa(n.Port) }

// IsPrimary reports whether the node is the formation's writable node, settled: primary (with
// a synchronous secondary), wait_primary (its secondary is gone or catching up: commits are not
// replicated) or single (no secondary at all).
func (n NodeState) IsPrimary() bool {
	return n.Reported == n.Goal && (n.Reported == "primary" || n.Reported == "wait_primary" || n.Reported == "single")
}

// State is a formation's nodes as the monitor sees them.
type State struct {
	Formation string      `json:"formation"`
	Nodes     []NodeState `json:"nodes"`
}

// Primary returns the settled writable node, if there is exactly one.
func (s State) Primary() (NodeState, bool) {
	var out NodeState
	n := 0
	for _, nd := range s.Nodes {
		if nd.IsPrimary() {
			out = nd
			n++
		}
	}
	return out, n == 1
}

// Synchronous reports whether the formation is settled with a primary and a healthy secondary
// it replicates to synchronously: a commit it acknowledges is on both nodes.
func (s State) Synchronous() bool {
	p, ok := s.Primary()
	if !ok || p.Reported != "primary" {
		return false
	}
	for _, nd := range s.Nodes {
		if nd.Name != p.Name && nd.Reported == "secondary" && nd.Goal == "secondary" && nd.Healthy {
			return true
		}
	}
	return false
}

// String is a one-line summary: "n1 primary, n2 secondary".
func (s State) String() string {
	parts := make([]string, 0, len(s.Nodes))
	for _, nd := range s.Nodes {
		st := nd.Reported
		if nd.Goal != nd.Reported {
			st += "→" + nd.Goal
		}
		if !nd.Healthy {
			st += " (unhealthy)"
		}
		parts = append(parts, nd.Name+" "+st)
	}
	return strings.Join(parts, ", ")
}

// Monitor is the monitor of a formation, reached by its URL
// (postgres://autoctl_node@host:port/pg_auto_failover).
type Monitor struct {
	URL       string
	Formation string // default "default"
}

func (m Monitor) formation() string {
	if m.Formation == "" {
		return "default"
	}
	return m.Formation
}

func (m Monitor) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(m.URL)
	if err != nil {
		return nil, fmt.Errorf("the monitor URL: %w", err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	cfg.RuntimeParams["application_name"] = "idemwork"
	return pgx.ConnectConfig(ctx, cfg)
}

// State reads the formation's nodes from the monitor.
func (m Monitor) State(ctx context.Context) (State, error) {
	conn, err := m.connect(ctx)
	if err != nil {
		return State{}, fmt.Errorf("reach the pg_auto_failover monitor: %w", err)
	}
	defer conn.Close(context.Background())
	return readState(ctx, conn, m.formation())
}

// readState is one query: the monitor's node table of one formation.
func readState(ctx context.Context, conn *pgx.Conn, formation string) (State, error) {
	rows, err := conn.Query(ctx, `SELECT nodeid, nodename, nodehost, nodeport, reportedstate::text, goalstate::text,
			health = 1, coalesce(reportedpgisrunning, false), coalesce(reportedrepstate, ''), reportedlsn::text, reportedtli,
			extract(epoch FROM now() - reporttime)
		FROM pgautofailover.node WHERE formationid = $1 ORDER BY nodeid`, formation)
	if err != nil {
		return State{}, fmt.Errorf("read the monitor's nodes: %w", err)
	}
	st := State{Formation: formation}
	for rows.Next() {
		var n NodeState
		var ago float64
		if err := rows.Scan(&n.ID, &n.Name, &n.Host, &n.Port, &n.Reported, &n.Goal, &n.Healthy, &n.Running, &n.SyncState, &n.LSN, &n.TLI, &ago); err != nil {
			return State{}, fmt.Errorf("read the monitor's nodes: %w", err)
		}
		n.ReportedAgo = time.Duration(ago * float64(time.Second))
		st.Nodes = append(st.Nodes, n)
	}
	if err := rows.Err(); err != nil {
		return State{}, fmt.Errorf("read the monitor's nodes: %w", err)
	}
	return st, nil
}

// WaitSynchronous waits until the formation is settled with a primary and a synchronous
// secondary, and returns that state.
func (m Monitor) WaitSynchronous(ctx context.Context) (State, error) {
	return m.Wait(ctx, "a primary with a synchronous secondary", State.Synchronous)
}

// Wait polls the monitor until ok holds of the formation's state (or ctx ends: the error then
// says what was awaited and what was last seen).
func (m Monitor) Wait(ctx context.Context, what string, ok func(State) bool) (State, error) {
	var last State
	var lastErr error
	for {
		st, err := m.State(ctx)
		if err == nil && ok(st) {
			return st, nil
		}
		last, lastErr = st, err
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return last, fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), lastErr)
			}
			return last, fmt.Errorf("waiting for %s: %w (last seen: %s)", what, ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// PerformFailover asks the monitor for a planned failover of the formation's group 0 (the SQL
// behind `pg_autoctl perform failover`) and waits until the other node is the synchronous
// primary. It returns the new state.
func (m Monitor) PerformFailover(ctx context.Context) (State, error) {
	before, err := m.WaitSynchronous(ctx)
	if err != nil {
		return before, err
	}
	old, _ := before.Primary()
	conn, err := m.connect(ctx)
	if err != nil {
		return before, fmt.Errorf("reach the pg_auto_failover monitor: %w", err)
	}
	_, err = conn.Exec(ctx, `SELECT pgautofailover.perform_failover($1, 0)`, m.formation())
	conn.Close(context.Background())
	if err != nil {
		return before, fmt.Errorf("perform failover: %w", err)
	}
	return m.WaitNewPrimary(ctx, old.Name, State.Synchronous)
}

// WaitNewPrimary waits until a node other than old is the settled primary and ok holds.
func (m Monitor) WaitNewPrimary(ctx context.Context, old string, ok func(State) bool) (State, error) {
	return m.Wait(ctx, "a primary other than "+old, func(s State) bool {
		p, one := s.Primary()
		return one && p.Name != old && ok(s)
	})
}

// ErrNoPrimary is returned when the monitor knows no settled primary.
var ErrNoPrimary = errors.New("the formation has no settled primary")
