package readmodel

import (
	"context"
	"fmt"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// Sessions lists the other client sessions of this database, those waiting on a lock first:
// who waits on whom (pg_blocking_pids), for which lock, and for how long their transaction has
// been open. One round trip.
func Sessions(ctx context.Context, db *store.DB) ([]model.Session, error) {
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
	var out []model.Session
	for rows.Next() {
		var s model.Session
		if err := rows.Scan(&s.PID, &s.Application, &s.State, &s.WaitType, &s.WaitEvent, &s.BlockedBy, &s.XactMs, &s.Query,
			&s.BackendXID, &s.LockType, &s.LockTarget, &s.InXact); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
