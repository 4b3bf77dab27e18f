package dbfacts

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/idemwork/idemwork/store"
)

// NodeReplication is what the connected node says of itself and of the standbys it streams to.
type NodeReplication struct {
	// Host and Port are the node's own address as the session reached it ("" and 0 over a
	// local socket).
	Host string
	Port int
	// InRecovery is pg_is_in_recovery(): a standby.
	InRecovery bool
	// SyncNames and SyncCommit are synchronous_standby_names and synchronous_commit.
	SyncNames, SyncCommit string
	// Standbys are the rows of pg_stat_replication (empty on a standby, and without their
	// state for a role that may not read other sessions' statistics: ReadsStats says which).
	Standbys   []Standby
	ReadsStats bool
}

// Standby is one row of pg_stat_replication.
type Standby struct {
	Name  string  `json:"name"`
	Addr  string  `json:"addr"`
	State string  `json:"state"`
	Sync  string  `json:"sync"`
	Lag   int64   `json:"lag"`   // replay lag in bytes, -1 unknown
	LagMs float64 `json:"lagMs"` // replay lag in time, -1 unknown
}

// ReadNodeReplication reads the connected node's replication state, one round trip.
func ReadNodeReplication(ctx context.Context, db *store.DB) (NodeReplication, error) {
	var r NodeReplication
	var standbys []byte
	err := db.Q(ctx).QueryRow(ctx, `SELECT coalesce(host(inet_server_addr()), ''), coalesce(inet_server_port(), 0), pg_is_in_recovery(),
			current_setting('synchronous_standby_names'), current_setting('synchronous_commit'),
			coalesce((SELECT json_agg(json_build_object('name', application_name, 'addr', coalesce(host(client_addr), ''),
					'state', coalesce(state, ''), 'sync', coalesce(sync_state, ''),
					'lag', CASE WHEN pg_is_in_recovery() OR replay_lsn IS NULL THEN -1 ELSE pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn) END,
					'lagMs', coalesce(extract(epoch FROM replay_lag) * 1000, -1)) ORDER BY application_name)
				FROM pg_stat_replication), '[]'),
			pg_has_role(current_user, 'pg_read_all_stats', 'USAGE')`).
		Scan(&r.Host, &r.Port, &r.InRecovery, &r.SyncNames, &r.SyncCommit, &standbys, &r.ReadsStats)
	if err != nil {
		return r, fmt.Errorf("read the node's replication: %w", err)
	}
	if err := json.Unmarshal(standbys, &r.Standbys); err != nil {
		return r, fmt.Errorf("read the node's replication: %w", err)
	}
	return r, nil
}
