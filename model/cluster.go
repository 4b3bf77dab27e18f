package model

// Cluster is what the workbench knows of the servers behind its database: the node it is
// connected to, the standbys that node streams to, and — for a pg_auto_failover formation whose
// monitor it can reach — every node as the monitor sees it.
type Cluster struct {
	// Source says where Nodes come from: "monitor" (pg_auto_failover's view of the formation),
	// or "node" (the connected node's own: pg_is_in_recovery, pg_stat_replication).
	Source string `json:"source"`
	// Monitor is the monitor's address (host:port, no credentials) when it was read.
	Monitor string `json:"monitor,omitempty"`
	// Formation is the monitor's formation name.
	Formation string `json:"formation,omitempty"`
	// Connected is the host:port of the node this session is connected to (after a multi-host
	// URL's choice); "" over a local socket.
	Connected string `json:"connected"`
	// Synchronous reports whether a commit the connected primary acknowledges is on a standby
	// too: synchronous_standby_names names one, synchronous_commit waits for it (on, remote_apply,
	// remote_write) and one is attached as sync or quorum.
	Synchronous bool `json:"synchronous"`
	// SyncNames and SyncCommit are the connected node's synchronous_standby_names and
	// synchronous_commit.
	SyncNames  string        `json:"synchronousStandbyNames"`
	SyncCommit string        `json:"synchronousCommit"`
	Nodes      []ClusterNode `json:"nodes"`
	// Notes say what could not be read and why (the monitor unreachable, a role that may not
	// read pg_stat_replication).
	Notes []string `json:"notes,omitempty"`
}

// ClusterNode is one node.
type ClusterNode struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
	// Role is primary, secondary (a pg_auto_failover standby), standby (a streaming replica
	// the primary reports) or "" when unknown.
	Role string `json:"role"`
	// State is the monitor's reported state, with "→ goal" while the node moves to another.
	State string `json:"state,omitempty"`
	// Sync is the standby's sync_state on the primary (sync, quorum, potential, async).
	Sync string `json:"sync,omitempty"`
	// LagBytes is how far the standby's replay is behind the primary's WAL (-1 unknown);
	// ReplayLagMs the primary's measure of it in time (-1 unknown).
	LagBytes    int64   `json:"lagBytes"`
	ReplayLagMs float64 `json:"replayLagMs"`
	// Healthy is the monitor's health check (nil when there is no monitor's view).
	Healthy *bool `json:"healthy,omitempty"`
	// Connected marks the node this session is connected to.
	Connected bool `json:"connected"`
}

// Primary returns the primary node, if the cluster names one.
func (c Cluster) Primary() (ClusterNode, bool) {
	for _, n := range c.Nodes {
		if n.Role == "primary" {
			return n, true
		}
	}
	return ClusterNode{}, false
}
