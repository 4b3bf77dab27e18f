package store

import (
	"context"
	"fmt"
)

// Session is one client session of the current database, with what it waits on.
type Session struct {
	PID         int     `json:"pid" db:"pid"`
	Application string  `json:"application" db:"application_name"`
	State       string  `json:"state" db:"state"`
	WaitType    string  `json:"waitType" db:"wait_event_type"`
	WaitEvent   string  `json:"waitEvent" db:"wait_event"`
	BlockedBy   []int64 `json:"blockedBy" db:"-"`
	XactMs      float64 `json:"xactMs" db:"xact_ms"`
	Query       string  `json:"query" db:"query"`
	BackendXID  string  `json:"backendXid" db:"backend_xid"`
	LockType    string  `json:"lockType" db:"locktype"`
	LockTarget  string  `json:"lockTarget" db:"lock_target"`
	// InXact: a transaction is open (XactMs is its age; else the time since the last statement).
	InXact bool `json:"inXact" db:"in_xact"`
}

// Sessions lists the other client sessions of this database, those waiting on a lock first:
// who waits on whom (pg_blocking_pids), for which lock, and for how long their transaction has
// been open. One round trip.
func (db *DB) Sessions(ctx context.Context) ([]Session, error) {
	rows, err := db.Q(ctx).Query(ctx, `SELECT a.pid, coalesce(a.application_name, ''), coalesce(a.state, ''),
			coalesce(a.wait_event_type, ''), coalesce(a.wait_event, ''), pg_blocking_pids(a.pid),
			coalesce(extract(epoch FROM clock_timestamp() - coalesce(a.xact_start, a.query_start)) * 1000, 0)::float8,
			left(regexp_replace(coalesce(a.query, ''), '\s+', ' ', 'g'), 300), coalesce(a.backend_xid::text, ''),
			coalesce(w.locktype, ''), coalesce(w.target, ''), a.xact_start IS NOT NULL
		FROM pg_stat_activity a
		LEFT JOIN LATERAL (
			SELECT l.locktype, coalesce(l.relation::regclass::text, 'xid ' || l.transactionid::text, l.mode) AS target
			FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted LIMIT 1) w ON true
		WHERE a.datname = current_database() AND a.pid <> pg_backend_pid() AND a.backend_type = 'client backend'
		ORDER BY cardinality(pg_blocking_pids(a.pid)) DESC, a.xact_start NULLS LAST, a.pid
		LIMIT 500`)
	if err != nil {
		return nil, fmt.Errorf("read sessions: %w", err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		var s Session
		if err := rows.Scan(&s.PID, &s.Application, &s.State, &s.WaitType, &s.WaitEvent, &s.BlockedBy, &s.XactMs, &s.Query,
			&s.BackendXID, &s.LockType, &s.LockTarget, &s.InXact); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
