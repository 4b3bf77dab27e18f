package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Every transaction idemwork runs sets what it depends on itself, in the round trip that begins
// it: the access mode and isolation level in BEGIN, and the settings below with
// set_config(…, true) — for this transaction only, so nothing outlives it on a server connection
// a pooler hands to someone else, and nothing another client of the pooler left on that
// connection (a session SET, a role's or database's default) reaches idemwork's statements.
// idemwork never sets a session-level setting and checks nothing once per connection.
//
// What a pooled server connection can carry, and what idemwork does about each:
//
//   - search_path: set per transaction to the schema ([database] schema, search_path= in the URL)
//     or, without one, to the path the role's sessions start with (pg_settings.reset_val, read
//     when the session opens: what the database's and role's settings and the server's file say,
//     never a SET), with pg_temp listed last — unlisted, pg_temp is searched first, and a
//     temporary table named like one of idemwork's would shadow it.
//   - default_transaction_read_only, default_transaction_isolation, default_transaction_deferrable:
//     BEGIN names the access mode and the isolation level, so the defaults never apply.
//   - statement_timeout, lock_timeout, idle_in_transaction_session_timeout, synchronous_commit: set
//     per transaction to their reset values (what RESET would give: the role's, the database's,
//     the server's), so a leaked short timeout cannot cancel idemwork's statements and a leaked
//     synchronous_commit = off cannot weaken the durability of its commits.
//   - role: SET ROLE none per transaction: idemwork's statements run as the role it logged in as
//     (a SET ROLE left behind would change privileges and ownership).
//   - session_replication_role: "replica" disables foreign keys and triggers, which idemwork's
//     integrity rests on. It is set back to "origin" where it is not (only a role that may set it
//     can have changed it); a role that may not set it gets PERMISSION_DENIED saying so.
//   - DateStyle, IntervalStyle, TimeZone, extra_float_digits, bytea_output: how values are written
//     as text, which the exec and simple_protocol modes decode; pinned to what pgx reads.
//   - standard_conforming_strings: how the server reads a backslash in a string literal; pinned
//     on (pgx's simple protocol refuses to run without it, and pgbouncer restores it per client).
//   - exit_on_error: on, any error would end the session; pinned off.
//   - temporary tables, named prepared statements, advisory locks: session objects, not settings.
//     pg_temp is searched last; idemwork prepares named statements only on a connection that is
//     its own for the session's life (no pooler, or a declared session pooler) and refuses
//     cache_statement through any other pooler; it takes no session advisory lock outside
//     migrate, which needs a direct connection.

// resetSettings are set per transaction to the value the role's sessions start with.
var resetSettings = []string{"statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout", "synchronous_commit"}

// pinnedSettings are set per transaction to a fixed value.
var pinnedSettings = [][2]string{
	{"role", "none"},
	{"DateStyle", "ISO, MDY"},
	{"IntervalStyle", "postgres"},
	{"TimeZone", "UTC"},
	{"extra_float_digits", "1"},
	{"bytea_output", "hex"},
	{"standard_conforming_strings", "on"},
	{"exit_on_error", "off"},
}

// txSettings is the statement that sets, for one transaction, everything idemwork depends on.
type txSettings struct {
	sql  string
	args []any
	// searchPath is what the transaction's search_path is set to.
	searchPath string
}

// newTxSettings builds the statement from the schema's path ("" when no schema was asked for)
// and the settings' reset values (reset["search_path"] is the path without a schema).
func newTxSettings(schemaPath string, reset map[string]string) txSettings {
	path := schemaPath
	if path == "" {
		path = reset["search_path"]
	}
	path = withTempLast(path)
	var b strings.Builder
	args := []any{path}
	b.WriteString("select pg_catalog.set_config('search_path', $1, true)")
	set := func(name, value string) {
		args = append(args, value)
		b.WriteString(", pg_catalog.set_config(")
		b.WriteString(quoteName(name))
		b.WriteString(", $")
		b.WriteString(strconv.Itoa(len(args)))
		b.WriteString(", true)")
	}
	for _, name := range resetSettings {
		set(name, reset[name])
	}
	for _, s := range pinnedSettings {
		set(s[0], s[1])
	}
	// Only where it is not "origin": setting it takes a privilege most roles lack.
	b.WriteString(", case when pg_catalog.current_setting('session_replication_role') <> 'origin' " +
		"then pg_catalog.set_config('session_replication_role', 'origin', true) end")
	return txSettings{sql: b.String(), args: args, searchPath: path}
}

// withTempLast lists pg_temp at the end of path unless path names it: unlisted, PostgreSQL
// searches the session's temporary schema first.
func withTempLast(path string) string {
	for _, part := range strings.Split(path, ",") {
		p := strings.ToLower(strings.Trim(strings.TrimSpace(part), `"`))
		if p == "pg_temp" || strings.HasPrefix(p, "pg_temp_") {
			return path
		}
	}
	if strings.TrimSpace(path) == "" {
		return "pg_temp"
	}
	return path + ", pg_temp"
}

// quoteName is a setting's name as a SQL string literal (the names are this file's own).
func quoteName(name string) string { return "'" + name + "'" }

// The BEGIN statements of idemwork's transactions: every one names its isolation level and
// access mode, so default_transaction_isolation and default_transaction_read_only, whoever set
// them, never apply.
const (
	beginReadWrite = "begin isolation level read committed, read write"
	beginReadOnly  = "begin isolation level read committed, read only"
	beginSnapshot  = "begin isolation level repeatable read, read only"
)

// queueBegin queues the start of a transaction: BEGIN (begin, one of the statements above) and
// the transaction's settings; it returns how many results that is.
func (db *DB) queueBegin(b *pgx.Batch, begin string) int {
	b.Queue(begin)
	b.Queue(db.settings.sql, db.settings.args...)
	return beginResults
}

// beginResults is how many results queueBegin queues.
const beginResults = 2

// beginFor is the BEGIN of a transaction of this session: read-only on a read-only session.
func (db *DB) beginFor(readOnly bool) string {
	if readOnly || db.ReadOnly {
		return beginReadOnly
	}
	return beginReadWrite
}

// sendBegin sends BEGIN and the transaction's settings in a round trip of their own.
func (db *DB) sendBegin(ctx context.Context, conn *pgxpool.Conn, begin string) error {
	if db.beginApart {
		// The exec mode would describe both in a round trip of its own first: sent as one
		// simple-protocol message instead, they take one.
		args := append([]any{pgx.QueryExecModeSimpleProtocol}, db.settings.args...)
		if _, err := conn.Exec(ctx, begin+";\n"+db.settings.sql, args...); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		return nil
	}
	var b pgx.Batch
	n := db.queueBegin(&b, begin)
	br := conn.SendBatch(ctx, &b)
	err := readWrites(br, n, nil)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("begin: %w", cerr)
	}
	return err
}
