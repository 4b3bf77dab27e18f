package workbench

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemwork/idemwork/internal/autofailover"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/dbfacts"
	"github.com/idemwork/idemwork/views"
)

// Cluster reads the Cluster view's state over db: the connected node's own view of its
// replication, and — when the database is a pg_auto_failover node — the monitor's view of the
// formation. monitorURL is the monitor to read ("": found from the connected node's keeper when
// it runs on this machine, looked for again every lookAgain until found).
func Cluster(db *store.DB, monitorURL string) views.ClusterReader {
	return &clusterReader{db: db, monitor: monitorURL, fixed: monitorURL != ""}
}

// lookAgain is how often the local keeper is looked for while no monitor is known (a node
// restarting during a failover has none for a moment).
const lookAgain = 30 * time.Second

type clusterReader struct {
	db *store.DB

	mu       sync.Mutex
	monitor  string
	fixed    bool
	lookedAt time.Time
	why      string // why no monitor is read
}

func (c *clusterReader) Cluster(ctx context.Context) (model.Cluster, error) {
	node, err := dbfacts.ReadNodeReplication(ctx, c.db)
	if err != nil {
		return model.Cluster{}, Coded(err)
	}
	out := model.Cluster{Source: "node", SyncNames: node.SyncNames, SyncCommit: node.SyncCommit}
	if node.Host != "" {
		out.Connected = net.JoinHostPort(node.Host, strconv.Itoa(node.Port))
	}
	waits := node.SyncNames != "" && slices.Contains([]string{"on", "remote_apply", "remote_write"}, node.SyncCommit)
	for _, s := range node.Standbys {
		if waits && !node.InRecovery && (s.Sync == "sync" || s.Sync == "quorum") {
			out.Synchronous = true
		}
	}
	if !node.ReadsStats && len(node.Standbys) > 0 {
		out.Notes = append(out.Notes, "this role may not read the standbys' state (pg_stat_replication): GRANT pg_read_all_stats TO it")
	}
	if monitorURL := c.monitorURL(node); monitorURL != "" {
		m := autofailover.Monitor{URL: monitorURL}
		st, err := m.State(ctx)
		if err == nil {
			out.Source, out.Monitor, out.Formation = "monitor", hostOf(monitorURL), st.Formation
			out.Nodes = monitorNodes(st, node, out.Connected)
			return out, nil
		}
		out.Notes = append(out.Notes, fmt.Sprintf("the pg_auto_failover monitor (%s) did not answer: %s; showing the connected node's view", hostOf(monitorURL), firstLine(err.Error())))
	} else if why := c.whyNoMonitor(); why != "" {
		out.Notes = append(out.Notes, why)
	}
	out.Nodes = nodeView(node, out.Connected)
	return out, nil
}

// monitorURL is the configured monitor, or the one the local keeper of the connected node
// names (looked for once, on a loopback node).
func (c *clusterReader) monitorURL(node dbfacts.NodeReplication) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fixed || c.monitor != "" || (!c.lookedAt.IsZero() && time.Since(c.lookedAt) < lookAgain) {
		return c.monitor
	}
	c.lookedAt = time.Now()
	c.why = "no pg_auto_failover monitor known: this is the connected node's view (IDEMWORK_MONITOR names a formation's monitor)"
	if ip := net.ParseIP(node.Host); ip == nil || !ip.IsLoopback() {
		return ""
	}
	u, err := autofailover.LocalMonitorURL(node.Port)
	if err != nil {
		return ""
	}
	c.monitor, c.why = u, ""
	return u
}

func (c *clusterReader) whyNoMonitor() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.why
}

// monitorNodes are the monitor's nodes, with the lag the connected primary reports for each
// (pg_auto_failover names a node's replication slot and application "pgautofailover_standby_<id>").
func monitorNodes(st autofailover.State, node dbfacts.NodeReplication, connected string) []model.ClusterNode {
	lag := map[string]dbfacts.Standby{}
	for _, s := range node.Standbys {
		lag[s.Name] = s
	}
	out := make([]model.ClusterNode, 0, len(st.Nodes))
	for _, n := range st.Nodes {
		healthy := n.Healthy
		cn := model.ClusterNode{Name: n.Name, Addr: n.Addr(), State: n.Reported, Healthy: &healthy, LagBytes: -1, ReplayLagMs: -1,
			Connected: n.Addr() == connected}
		if n.Goal != n.Reported {
			cn.State += " → " + n.Goal
		}
		switch {
		case n.IsPrimary():
			cn.Role = "primary"
		case n.Reported == "secondary" || n.Reported == "catchingup":
			cn.Role = "secondary"
		}
		if s, ok := lag["pgautofailover_standby_"+strconv.FormatInt(n.ID, 10)]; ok {
			cn.Sync, cn.LagBytes, cn.ReplayLagMs = s.Sync, s.Lag, s.LagMs
		}
		out = append(out, cn)
	}
	return out
}

// nodeView is the connected node and the standbys it reports.
func nodeView(node dbfacts.NodeReplication, connected string) []model.ClusterNode {
	self := model.ClusterNode{Name: "connected", Addr: connected, Role: "primary", LagBytes: -1, ReplayLagMs: -1, Connected: true}
	if connected == "" {
		self.Addr = "local socket"
	}
	if node.InRecovery {
		self.Role = "standby"
	}
	out := []model.ClusterNode{self}
	for _, s := range node.Standbys {
		out = append(out, model.ClusterNode{Name: s.Name, Addr: s.Addr, Role: "standby", State: s.State, Sync: s.Sync, LagBytes: s.Lag, ReplayLagMs: s.LagMs})
	}
	return out
}

// hostOf is a URL's host:port, never its credentials.
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		return u.Host
	}
	return "the monitor"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
