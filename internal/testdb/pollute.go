package testdb

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// LeftBehind is what another client of a transaction pooler leaves on the server connections it
// used: session settings (SET, outside SET LOCAL), a role, temporary tables named like
// idemwork's, prepared statements. Pollute plants them on every server connection of a pool.
type LeftBehind struct {
	// Sets are SET statements' "name = value" parts, run in order.
	Sets []string
	// TempTables are tables created as TEMPORARY (LIKE the real one in schema Like) on each
	// server connection: a temporary table is searched first unless pg_temp is listed.
	TempTables []string
	Like       string
	// Role, when set, is SET ROLE'd last (the role must exist and the login be a member).
	Role string
}

// EveryGUC is what a careless client of the pool leaves behind, setting by setting: every
// session setting that could change what idemwork reads, writes or answers if idemwork relied
// on the session (search_path is the caller's: the schema that is not the one idemwork uses).
func EveryGUC(searchPath string) LeftBehind {
	return LeftBehind{
		Sets: []string{
			"search_path = " + searchPath,
			"default_transaction_read_only = on",
			"default_transaction_isolation = 'serializable'",
			"default_transaction_deferrable = on",
			"statement_timeout = '200ms'",
			"lock_timeout = '1ms'",
			"idle_in_transaction_session_timeout = '200ms'",
			"TimeZone = 'Pacific/Chatham'",
			"DateStyle = 'SQL, DMY'",
			"IntervalStyle = 'iso_8601'",
			"extra_float_digits = -15",
			"bytea_output = 'escape'",
			"standard_conforming_strings = off",
			"synchronous_commit = off",
			"session_replication_role = replica",
			"exit_on_error = on",
			"row_security = off",
		},
		TempTables: []string{"idempotency_record", "record", "record_revision", "audit_event"},
		Like:       "public",
	}
}

// Pollute opens, through b, as many client connections to database name as b's pool has server
// connections, holds a transaction on each (so each gets a server connection of its own), leaves
// lb behind on it with session-level statements and commits them all: every server connection
// of the pool then carries lb for whoever gets it next. It returns how many it polluted.
func Pollute(t testing.TB, b *Bouncer, name string, lb LeftBehind) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(b.DSN(name))
	if err != nil {
		t.Fatalf("testdb: pollute: %v", err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conns := make([]*pgx.Conn, 0, b.PoolSize)
	defer func() {
		for _, c := range conns {
			_ = c.Close(context.Background())
		}
	}()
	// First every client takes a server connection of its own (a transaction holds it)…
	for range b.PoolSize {
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatalf("testdb: pollute: connect: %v", err)
		}
		conns = append(conns, c)
		// The server connection may carry an idle_in_transaction_session_timeout an earlier
		// Pollute left: this transaction waits idle while the others connect, so it lifts it for
		// itself (SET LOCAL ends with the transaction).
		if _, err := c.Exec(ctx, "BEGIN; SET LOCAL idle_in_transaction_session_timeout = 0"); err != nil {
			t.Fatalf("testdb: pollute: %v", err)
		}
	}
	var stmts []string
	for _, tt := range lb.TempTables {
		stmts = append(stmts, fmt.Sprintf("CREATE TEMP TABLE IF NOT EXISTS %s (LIKE %s INCLUDING ALL)",
			pgx.Identifier{tt}.Sanitize(), pgx.Identifier{lb.Like, tt}.Sanitize()))
	}
	stmts = append(stmts, "PREPARE leftover_statement AS SELECT 1")
	for _, s := range lb.Sets {
		stmts = append(stmts, "SET SESSION "+s)
		// A timeout is left for the session but lifted for the rest of this transaction (SET
		// LOCAL ends with it): the 200 ms statement_timeout of EveryGUC canceled a later SET of
		// the batch on a loaded machine.
		if name := strings.TrimSpace(strings.SplitN(s, "=", 2)[0]); strings.HasSuffix(name, "_timeout") {
			stmts = append(stmts, "SET LOCAL "+name+" = 0")
		}
	}
	if lb.Role != "" {
		stmts = append(stmts, "SET SESSION ROLE "+pgx.Identifier{lb.Role}.Sanitize())
	}
	// …then each leaves lb behind and commits at once, in one batch (a SET made in a transaction
	// that commits stays for the session): a timeout it sets never meets an idle transaction of
	// its own, however slow the round trips of a loaded machine (one statement at a time, the
	// 200 ms idle_in_transaction_session_timeout of EveryGUC killed the session between two).
	batch := strings.Join(append(stmts, "COMMIT"), ";\n")
	for _, c := range conns {
		if _, err := c.Exec(ctx, batch); err != nil {
			t.Fatalf("testdb: pollute: %v\n%s", err, batch)
		}
	}
	return len(conns)
}

// ServerPaths reads, through b, the search_path every server connection of its pool carries
// (what Pollute left, or a fresh connection's default where the pooler replaced one: a client
// that went away mid-statement costs its server connection) and counts the rows in the
// temporary tables left there: idemwork must never have written one.
func ServerPaths(t testing.TB, b *Bouncer, name string, tempTables []string) (paths []string, tempRows int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(b.DSN(name))
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	var conns []*pgx.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close(context.Background())
		}
	}()
	for range b.PoolSize {
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatalf("testdb: %v", err)
		}
		conns = append(conns, c)
		// Inside a transaction, so each client keeps the server connection it got; what it sets is
		// local to that transaction, which rolls back: the connection keeps what it carried.
		if _, err := c.Exec(ctx, "BEGIN ISOLATION LEVEL READ COMMITTED READ ONLY; SET LOCAL idle_in_transaction_session_timeout = 0; "+
			"SET LOCAL statement_timeout = 0; SET LOCAL exit_on_error = off; SET LOCAL ROLE NONE"); err != nil {
			t.Fatalf("testdb: %v", err)
		}
		var path string
		if err := c.QueryRow(ctx, "SHOW search_path").Scan(&path); err != nil {
			t.Fatalf("testdb: %v", err)
		}
		paths = append(paths, strings.TrimSpace(path))
		for _, tt := range tempTables {
			var exists bool
			if err := c.QueryRow(ctx, "SELECT to_regclass('pg_temp."+tt+"') IS NOT NULL").Scan(&exists); err != nil {
				t.Fatalf("testdb: %v", err)
			}
			if !exists {
				continue
			}
			var n int
			if err := c.QueryRow(ctx, "SELECT count(*) FROM pg_temp."+pgx.Identifier{tt}.Sanitize()).Scan(&n); err != nil {
				t.Fatalf("testdb: %v", err)
			}
			tempRows += n
		}
	}
	for _, c := range conns {
		_, _ = c.Exec(ctx, "ROLLBACK")
	}
	return paths, tempRows
}
