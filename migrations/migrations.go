// Package migrations holds idemwork's schema as goose SQL files embedded in the binary. Up
// applies them with goose's Provider API under a PostgreSQL session lock, so concurrent processes
// starting on one database migrate it exactly once. ReadState tells what a database holds
// without goose and without DDL: it only reads, so it works on a read-only session, a hot
// standby and a role that may not create tables.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// VersionTable is goose's table of applied versions (in the first schema of search_path).
const VersionTable = "goose_db_version"

// Migration is one migration this binary carries.
type Migration struct {
	Version int64  `json:"version"`
	Name    string `json:"name"`
}

// Status is one migration's state.
type Status struct {
	Version int64  `json:"version"`
	Name    string `json:"name"`
	Applied bool   `json:"applied"`
}

// Known lists the migrations embedded in this binary, oldest first.
func Known() []Migration {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic(err) // the embedded directory is part of the binary
	}
	var out []Migration
	for _, e := range entries {
		if path.Ext(e.Name()) != ".sql" {
			continue
		}
		v, err := goose.NumericComponent(e.Name())
		if err != nil {
			panic(fmt.Sprintf("migrations: %s has no version number: %v", e.Name(), err))
		}
		out = append(out, Migration{Version: v, Name: e.Name()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out
}

// State is what a database's schema holds compared with this binary's migrations.
type State struct {
	// Schema is where the version table is looked for: current_schema(), "" when no schema of
	// search_path exists.
	Schema string `json:"schema"`
	// HasTable says whether the version table exists there.
	HasTable bool `json:"hasVersionTable"`
	// Elsewhere are the other schemas holding a version table, when Schema holds none: the
	// tables are most likely there and the session's schema setting is missing or wrong.
	Elsewhere []string `json:"elsewhere,omitempty"`
	// Applied are the versions the table records as applied (goose's own version 0 excluded).
	Applied []int64 `json:"applied"`
	// Pending are this binary's migrations the database lacks.
	Pending []Migration `json:"pending"`
	// Unknown are applied versions this binary does not carry: a newer idemwork migrated it.
	Unknown []int64 `json:"unknown"`
	// Known is this binary's list.
	Known []Migration `json:"-"`
}

// Current reports whether the database holds exactly this binary's schema.
func (s State) Current() bool { return s.HasTable && len(s.Pending) == 0 && len(s.Unknown) == 0 }

// Newer reports whether a newer idemwork migrated the database and nothing this binary carries
// is missing: it can be browsed, not written.
func (s State) Newer() bool { return s.HasTable && len(s.Pending) == 0 && len(s.Unknown) > 0 }

// Statuses lists every migration this binary knows with whether it is applied.
func (s State) Statuses() []Status {
	pending := map[int64]bool{}
	for _, m := range s.Pending {
		pending[m.Version] = true
	}
	out := make([]Status, 0, len(s.Known))
	for _, m := range s.Known {
		out = append(out, Status{Version: m.Version, Name: m.Name, Applied: !pending[m.Version]})
	}
	return out
}

// Problem says what is wrong with the schema for this binary, and what to run ("" when current).
func (s State) Problem() string {
	where := "schema " + quoteName(s.Schema)
	switch {
	case s.Schema == "" && len(s.Elsewhere) > 0:
		return fmt.Sprintf("no schema on the session's search_path exists, but %s has idemwork's tables: set [database] schema = %s (or search_path=%s in the URL)",
			schemaList(s.Elsewhere), strconv.Quote(s.Elsewhere[0]), s.Elsewhere[0])
	case s.Schema == "":
		return "no schema on the session's search_path exists, so there are no idemwork tables: " +
			"create the schema (or fix [database] schema / search_path), then run 'idemwork migrate --allow-writes'"
	case !s.HasTable && len(s.Elsewhere) > 0:
		return fmt.Sprintf("%s has no idemwork tables, but %s has them: set [database] schema = %s (or search_path=%s in the URL); "+
			"'idemwork migrate --allow-writes' would create a second, empty set in %s",
			where, schemaList(s.Elsewhere), strconv.Quote(s.Elsewhere[0]), s.Elsewhere[0], where)
	case !s.HasTable:
		return fmt.Sprintf("the database is not migrated (%s has no %s table): run 'idemwork migrate --allow-writes' against it",
			where, VersionTable)
	case len(s.Unknown) > 0 && len(s.Pending) > 0:
		return fmt.Sprintf("the database schema in %s has migrations this idemwork does not know (%s) and lacks %s: "+
			"use the idemwork that migrated it", where, versions(s.Unknown), names(s.Pending))
	case len(s.Unknown) > 0:
		return fmt.Sprintf("the database schema in %s is newer than this idemwork (it has migration %s; this binary knows up to %04d): "+
			"upgrade idemwork to write; browsing works read-only", where, versions(s.Unknown), s.Known[len(s.Known)-1].Version)
	case len(s.Pending) > 0:
		behind := fmt.Sprintf("%d migrations", len(s.Pending))
		if len(s.Pending) == 1 {
			behind = "one migration"
		}
		return fmt.Sprintf("the database schema in %s is %s behind this idemwork (%s not applied): run 'idemwork migrate --allow-writes' against it",
			where, behind, names(s.Pending))
	}
	return ""
}

func schemaList(names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = "schema " + quoteName(n)
	}
	return strings.Join(parts, " and ")
}

func quoteName(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func versions(vs []int64) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%04d", v)
	}
	return strings.Join(parts, ", ")
}

func names(ms []Migration) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = m.Name
	}
	return strings.Join(parts, ", ")
}

// Queryer is what ReadState needs (store's Querier satisfies it).
type Queryer interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ReadState reads the version table the way goose would find it (in current_schema()) and
// compares it with this binary's migrations. It only reads: no table is created.
func ReadState(ctx context.Context, q Queryer) (State, error) {
	st := State{Known: Known(), Applied: []int64{}, Pending: []Migration{}, Unknown: []int64{}}
	// pg_tables lists every schema's tables whatever the role may read, so the schemas that
	// hold idemwork's tables are found in the same round trip.
	err := q.QueryRow(ctx, `SELECT coalesce(current_schema(), ''),
			EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = $1),
			coalesce((SELECT array_agg(schemaname::text ORDER BY schemaname) FROM pg_catalog.pg_tables
				WHERE tablename = $1 AND schemaname IS DISTINCT FROM current_schema()), '{}')`,
		VersionTable).Scan(&st.Schema, &st.HasTable, &st.Elsewhere)
	if err != nil {
		return st, fmt.Errorf("read the schema state: %w", err)
	}
	if st.HasTable {
		st.Elsewhere = nil
	}
	applied := map[int64]bool{}
	if st.HasTable {
		rows, err := q.Query(ctx, `SELECT version_id, is_applied FROM `+VersionTable+` ORDER BY id DESC`)
		if err != nil {
			return st, fmt.Errorf("read the schema state: %w", err)
		}
		// The newest row of a version decides (goose's legacy down inserts is_applied = false).
		seen := map[int64]bool{}
		for rows.Next() {
			var v int64
			var ok bool
			if err := rows.Scan(&v, &ok); err != nil {
				rows.Close()
				return st, fmt.Errorf("read the schema state: %w", err)
			}
			if !seen[v] {
				seen[v] = true
				applied[v] = ok
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return st, fmt.Errorf("read the schema state: %w", err)
		}
	}
	known := map[int64]bool{}
	for _, m := range st.Known {
		known[m.Version] = true
		if !applied[m.Version] {
			st.Pending = append(st.Pending, m)
		}
	}
	for v, ok := range applied {
		if !ok || v == 0 {
			continue
		}
		st.Applied = append(st.Applied, v)
		if !known[v] {
			st.Unknown = append(st.Unknown, v)
		}
	}
	sort.Slice(st.Applied, func(i, j int) bool { return st.Applied[i] < st.Applied[j] })
	sort.Slice(st.Unknown, func(i, j int) bool { return st.Unknown[i] < st.Unknown[j] })
	return st, nil
}

// Up applies every pending migration and returns how many ran. It runs DDL: call it only on a
// writable session of a role that may create tables.
func Up(ctx context.Context, db *sql.DB) (int, error) {
	return UpTo(ctx, db, Known()[len(Known())-1].Version)
}

// UpTo applies the pending migrations up to and including version, and returns how many ran: a
// database can be brought to an older schema (to test a migration on the data it found).
func UpTo(ctx context.Context, db *sql.DB, version int64) (int, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithSessionLocker(locker))
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	res, err := p.UpTo(ctx, version)
	if err != nil {
		return len(res), fmt.Errorf("migrations: %w", err)
	}
	return len(res), nil
}
