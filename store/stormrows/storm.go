package stormrows

import (
	"context"
	"errors"
	"time"

	"github.com/idemwork/idemwork/store"
	"github.com/jackc/pgx/v5"
)

// Reads a storm's verdict is made of (package storm): what the database holds for the storm's
// owner and key, read back with queries, never inferred from the responses. Their errors are the
// driver's as they are; the verdict names what it was reading.

// KeyState is an owner's idempotency row as a storm reads it before and after it runs.
type KeyState struct {
	// Found is false when the owner has no row for the key (the other fields are then zero).
	Found             bool
	Status, Operation string
	// Response is the stored envelope (nil while the key is PROCESSING).
	Response             []byte
	CreatedAt, UpdatedAt time.Time
}

// ReadKeyState reads an owner's idempotency row for key.
func ReadKeyState(ctx context.Context, db *store.DB, owner, key string) (KeyState, error) {
	var k KeyState
	err := db.Q(ctx).QueryRow(ctx, `SELECT status, operation, response, created_at, updated_at FROM idempotency_record
		WHERE owner_id = $1 AND idempotency_key = $2`, owner, key).Scan(&k.Status, &k.Operation, &k.Response, &k.CreatedAt, &k.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return KeyState{}, nil
	}
	k.Found = err == nil
	return k, err
}

// KeyOperation names an owner's idempotency key and the operation a storm fires with it (the
// audit events counted are that operation's). Named fields, not three positional strings a
// caller could swap without the compiler noticing.
type KeyOperation struct {
	Owner, Key, Operation string
}

// CountKeyRows counts the rows of any lifetime of k's key: its revisions, its feature executions
// and the audit events of k's operation (the kernel names the operation in each event's detail;
// the outbox worker's settle events carry the key too, and are not counted).
func CountKeyRows(ctx context.Context, db *store.DB, k KeyOperation) (int, error) {
	var n int
	err := db.Q(ctx).QueryRow(ctx, `SELECT
			(SELECT count(*) FROM record_revision WHERE owner_id = $1 AND idempotency_key = $2)
			+ (SELECT count(*) FROM feature_execution WHERE owner_id = $1 AND idempotency_key = $2)
			+ (SELECT count(*) FROM audit_event WHERE owner_id = $1 AND idempotency_key = $2 AND detail->>'operation' = $3)`,
		k.Owner, k.Key, k.Operation).Scan(&n)
	return n, err
}

// KeyRevision is a revision an owner's key wrote.
type KeyRevision struct {
	RecordID string
	Revision int
}

// KeyRevisionsSince lists the revisions an owner's key wrote at or after since, by record and
// revision.
func KeyRevisionsSince(ctx context.Context, db *store.DB, owner, key string, since time.Time) ([]KeyRevision, error) {
	rows, err := db.Q(ctx).Query(ctx, `SELECT record_id, revision FROM record_revision
		WHERE owner_id = $1 AND idempotency_key = $2 AND created_at >= $3 ORDER BY record_id, revision`, owner, key, since)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (KeyRevision, error) {
		var x KeyRevision
		return x, r.Scan(&x.RecordID, &x.Revision)
	})
}

// KeyExecution is a feature execution an owner's key wrote.
type KeyExecution struct {
	ID, Mode, Status, RecordID string
	RecordRevision             int
}

// KeyExecutionsSince lists the feature executions an owner's key wrote at or after since, by id.
func KeyExecutionsSince(ctx context.Context, db *store.DB, owner, key string, since time.Time) ([]KeyExecution, error) {
	rows, err := db.Q(ctx).Query(ctx, `SELECT id, mode, status, record_id, record_revision FROM feature_execution
		WHERE owner_id = $1 AND idempotency_key = $2 AND created_at >= $3 ORDER BY id`, owner, key, since)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (KeyExecution, error) {
		var x KeyExecution
		return x, r.Scan(&x.ID, &x.Mode, &x.Status, &x.RecordID, &x.RecordRevision)
	})
}

// KeyAuditSince counts, in one statement, the audit events of k's operation k's key wrote at or
// after since (audit), and the rows of the key older than since (earlier: revisions, executions
// and audit events of any kind, which an earlier lifetime of the key wrote).
func KeyAuditSince(ctx context.Context, db *store.DB, k KeyOperation, since time.Time) (audit, earlier int, err error) {
	err = db.Q(ctx).QueryRow(ctx, `SELECT
			(SELECT count(*) FROM audit_event WHERE owner_id = $1 AND idempotency_key = $2 AND at >= $3 AND detail->>'operation' = $4),
			(SELECT count(*) FROM record_revision WHERE owner_id = $1 AND idempotency_key = $2 AND created_at < $3)
			+ (SELECT count(*) FROM feature_execution WHERE owner_id = $1 AND idempotency_key = $2 AND created_at < $3)
			+ (SELECT count(*) FROM audit_event WHERE owner_id = $1 AND idempotency_key = $2 AND at < $3)`,
		k.Owner, k.Key, since, k.Operation).Scan(&audit, &earlier)
	return audit, earlier, err
}

// A storm watches and waits for its own sessions: those whose application_name starts with the
// storm's prefix, in the current database.

// AppSessionCounts is how many sessions of an application-name prefix wait on a lock, have a
// transaction open, and are connected.
type AppSessionCounts struct {
	Waiting, InXact, Sessions int
}

// AppSessions counts the sessions whose application_name starts with prefix.
func AppSessions(ctx context.Context, db *store.DB, prefix string) (AppSessionCounts, error) {
	var c AppSessionCounts
	err := db.Q(ctx).QueryRow(ctx, `SELECT count(*) FILTER (WHERE wait_event_type = 'Lock')::int,
			count(*) FILTER (WHERE xact_start IS NOT NULL)::int, count(*)::int
		FROM pg_stat_activity WHERE datname = current_database() AND starts_with(application_name, $1)`,
		prefix).Scan(&c.Waiting, &c.InXact, &c.Sessions)
	return c, err
}

// AppBlocker is a session that sessions of an application-name prefix wait on (anyone's).
type AppBlocker struct {
	PID int
	// Waiters is how many of the prefix's sessions wait on it, LockType for what
	// (wait_event: transactionid, tuple, relation…).
	Waiters            int
	LockType           string
	Application, State string
	// XactMs is the age of its transaction (0: none open); Query its statement, whitespace
	// folded, at most 200 characters.
	XactMs float64
	Query  string
}

// AppBlockers lists the sessions the waiting sessions of prefix wait on, most waiters first
// (at most limit). It calls pg_blocking_pids, which takes the lock manager's locks: a sampler
// asks for it now and then, not on every look.
func AppBlockers(ctx context.Context, db *store.DB, prefix string, limit int) ([]AppBlocker, error) {
	rows, err := db.Q(ctx).Query(ctx, `WITH w AS (
			SELECT unnest(pg_blocking_pids(pid)) AS blocker, wait_event
			FROM pg_stat_activity
			WHERE datname = current_database() AND starts_with(application_name, $1) AND wait_event_type = 'Lock')
		SELECT w.blocker, count(*)::int, min(w.wait_event), coalesce(b.application_name, ''), coalesce(b.state, ''),
			coalesce(extract(epoch FROM clock_timestamp() - b.xact_start) * 1000, 0)::float8,
			left(regexp_replace(coalesce(b.query, ''), '\s+', ' ', 'g'), 200)
		FROM w LEFT JOIN pg_stat_activity b ON b.pid = w.blocker
		GROUP BY w.blocker, b.application_name, b.state, b.xact_start, b.query
		ORDER BY 2 DESC, 1 LIMIT $2`, prefix, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AppBlocker, error) {
		var b AppBlocker
		return b, r.Scan(&b.PID, &b.Waiters, &b.LockType, &b.Application, &b.State, &b.XactMs, &b.Query)
	})
}

// CancelAppStatements cancels the running statements of the sessions of prefix (never this
// one's own): a backend waiting on a lock notices that its client left only when it wakes.
func CancelAppStatements(ctx context.Context, db *store.DB, prefix string) error {
	_, err := db.Q(ctx).Exec(ctx, `SELECT pg_cancel_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND starts_with(application_name, $1) AND state = 'active' AND pid <> pg_backend_pid()`, prefix)
	return err
}

// AppOpenTransactions counts the sessions of prefix that have a transaction open.
func AppOpenTransactions(ctx context.Context, db *store.DB, prefix string) (int, error) {
	var open int
	err := db.Q(ctx).QueryRow(ctx, `SELECT count(*)::int FROM pg_stat_activity
		WHERE datname = current_database() AND starts_with(application_name, $1) AND xact_start IS NOT NULL`, prefix).Scan(&open)
	return open, err
}
