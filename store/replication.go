package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/idemwork/idemwork/apperr"
)

// Replication is what the server says about how a commit idemwork acknowledges survives the
// loss of the server: whether it is a standby, with which synchronous_commit idemwork's
// transactions commit, which standbys must confirm (synchronous_standby_names) and which are
// attached (pg_stat_replication).
type Replication struct {
	// InRecovery: the server is a hot standby.
	InRecovery bool `json:"inRecovery"`
	// SynchronousCommit is the value idemwork's transactions commit with (the role's sessions'
	// reset value, which every transaction sets: see settings.go).
	SynchronousCommit       string `json:"synchronousCommit"`
	SynchronousStandbyNames string `json:"synchronousStandbyNames"`
	// Standbys are the attached walsenders (pg_stat_replication's rows); SyncStandbys those whose
	// sync_state is sync or quorum.
	Standbys     int `json:"standbys"`
	SyncStandbys int `json:"syncStandbys"`
	// Visible: the role may read pg_stat_replication's details (superuser, pg_read_all_stats or
	// pg_monitor); without them the rows show but their sync_state does not.
	Visible bool `json:"visible"`
	// Synchronous: a commit is acknowledged only after a synchronous standby confirmed it.
	Synchronous bool `json:"synchronous"`
	// Risk says how acknowledged keys can be lost ("" when they cannot be, as far as the server
	// says).
	Risk string `json:"risk"`
	// Host and Port are the node the reading connection was on (after a multi-host URL's choice).
	Host string `json:"host"`
	Port int    `json:"port"`
	// At is when this was read.
	At time.Time `json:"at"`
}

// AtRisk reports whether acknowledged keys can be lost: the server commits without waiting
// for a standby that exists, or before the commit is durable.
func (r Replication) AtRisk() bool { return r.Risk != "" && !r.InRecovery }

// Where names the node the reading connection was on.
func (r Replication) Where() string { return Connection{Host: r.Host, Port: r.Port}.where() }

// replicationSQL reads the server's replication state in one statement (inside idemwork's
// transaction, so synchronous_commit is the value its commits use).
const replicationSQL = `SELECT pg_catalog.pg_is_in_recovery(), pg_catalog.current_setting('synchronous_commit'),
	pg_catalog.current_setting('synchronous_standby_names'),
	(SELECT count(*) FROM pg_catalog.pg_stat_replication),
	(SELECT count(*) FROM pg_catalog.pg_stat_replication WHERE sync_state IN ('sync', 'quorum')),
	(SELECT count(*) FROM pg_catalog.pg_stat_replication WHERE state IS NULL)`

// scanReplication fills r from replicationSQL's row and says what it means.
func scanReplication(scan func(dest ...any) error) (Replication, error) {
	var r Replication
	var hidden int
	if err := scan(&r.InRecovery, &r.SynchronousCommit, &r.SynchronousStandbyNames, &r.Standbys, &r.SyncStandbys, &hidden); err != nil {
		return r, err
	}
	r.Visible = hidden == 0
	r.At = time.Now()
	r.judge()
	return r, nil
}

// judge sets Synchronous and Risk from what was read.
func (r *Replication) judge() {
	waits := r.SynchronousCommit == "on" || r.SynchronousCommit == "remote_write" || r.SynchronousCommit == "remote_apply"
	names := strings.TrimSpace(r.SynchronousStandbyNames) != ""
	r.Synchronous = waits && names && r.SyncStandbys > 0
	switch {
	case r.InRecovery:
		r.Synchronous = false
		r.Risk = "this server is a hot standby: writes go to the primary"
	case r.SynchronousCommit == "off":
		r.Risk = "synchronous_commit = off: a commit is acknowledged before it is on disk, so a crash or a failover can lose " +
			"acknowledged keys, and a retry then runs them again; set synchronous_commit = on for idemwork's role " +
			"(ALTER ROLE … SET synchronous_commit = on)"
	case r.Standbys == 0 && names:
		r.Risk = "synchronous_standby_names is set, but no standby is attached: commits wait until a synchronous standby confirms them"
	case r.Standbys == 0:
		// No standby: nothing to fail over to; a commit is as durable as this server's disk.
	case !r.Visible && names:
		r.Risk = "synchronous_standby_names is set, but this role may not read pg_stat_replication's details, so idemwork cannot " +
			"tell whether a synchronous standby is attached: grant the role pg_monitor (or pg_read_all_stats) to let it check"
	case !names || r.SynchronousCommit == "local":
		why := "synchronous_standby_names is empty"
		if names {
			why = "synchronous_commit = local"
		}
		r.Risk = fmt.Sprintf("the %d attached standby(s) replicate asynchronously (%s): a commit is acknowledged before any "+
			"standby has it, so keys acknowledged just before a failover can be lost and run again on the promoted standby; "+
			"set synchronous_standby_names on the primary (e.g. 'FIRST 1 (standby1)') to make commits wait", r.Standbys, why)
	case r.SyncStandbys == 0:
		r.Risk = "synchronous_standby_names names no attached standby: commits wait until a synchronous standby attaches"
	}
}

// refusal is REPLICATION_UNSAFE's error for r, nil when a synchronous standby confirms commits.
func (r Replication) refusal() error {
	if r.Synchronous {
		return nil
	}
	why := r.Risk
	if why == "" {
		why = "no standby is attached to confirm commits"
	}
	return apperr.New(apperr.ReplicationUnsafe, "require_synchronous_replication is set and no synchronous standby confirms commits on %s "+
		"(%s); writes are refused until one does (idemwork doctor shows the replication state)", r.Where(), why)
}

// replicationWatch is the last replication state read, and what the watcher compares against.
type replicationWatch struct {
	mu   sync.Mutex
	last Replication
	read bool
}

// ReadReplication reads the replication state now, through a connection of the pool (after a
// failover, a new connection goes where the URL's hosts lead: Host and Port say where), and
// keeps it for Replication and the write refusal of require_synchronous_replication.
func (db *DB) ReadReplication(ctx context.Context) (Replication, error) {
	c, err := db.acquire(ctx)
	if err != nil {
		return Replication{}, TranslateError(err)
	}
	defer c.Release()
	host, port := remoteOf(c.Conn().PgConn())
	r, err := scanReplication(singleTx{db: db, conn: c}.QueryRow(ctx, replicationSQL).Scan)
	if err != nil {
		return r, TranslateError(fmt.Errorf("read the replication state: %w", err))
	}
	r.Host, r.Port = host, port
	db.repl.mu.Lock()
	db.repl.last, db.repl.read = r, true
	db.repl.mu.Unlock()
	return r, nil
}

// Replication is the replication state read last (when the session opened, or since).
func (db *DB) Replication() Replication {
	db.repl.mu.Lock()
	defer db.repl.mu.Unlock()
	return db.repl.last
}

// RequiresSynchronousReplication reports whether writes need a synchronous standby.
func (db *DB) RequiresSynchronousReplication() bool { return db.requireSync }

// replicationRefusal is REPLICATION_UNSAFE while require_synchronous_replication is set and the
// last state read has no synchronous standby; nil otherwise.
func (db *DB) replicationRefusal() error {
	if !db.requireSync {
		return nil
	}
	db.repl.mu.Lock()
	r, read := db.repl.last, db.repl.read
	db.repl.mu.Unlock()
	if !read {
		return apperr.New(apperr.ReplicationUnsafe, "require_synchronous_replication is set and the replication state has not been read yet; retry in a moment")
	}
	return r.refusal()
}

// WatchReplication reads the replication state every interval until ctx ends, calling changed
// with the previous and the new state whenever the node, the server's role (primary or
// standby), synchronicity or the risk changes, and failed with a read's error. A state that
// refuses writes (require_synchronous_replication) is read again within a second.
func (db *DB) WatchReplication(ctx context.Context, interval time.Duration, changed func(old, now Replication), failed func(error)) {
	for {
		wait := interval
		if db.replicationRefusal() != nil && wait > time.Second {
			wait = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		old := db.Replication()
		rctx, cancel := context.WithTimeout(ctx, max(interval, 5*time.Second))
		now, err := db.ReadReplication(rctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil && failed != nil {
				failed(err)
			}
			continue
		}
		if changed != nil && (old.Host != now.Host || old.Port != now.Port || old.InRecovery != now.InRecovery ||
			old.Synchronous != now.Synchronous || old.Risk != now.Risk) {
			changed(old, now)
		}
	}
}
