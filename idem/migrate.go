package idem

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// MigrationFiles are the runner's migrations as goose SQL files (NNNN_name.sql, with "-- +goose
// Up" and "-- +goose Down" sections), for a service that applies its schema with goose or
// another tool: copy them into its own migrations, or read them from here. Migrate applies the
// same files.
func MigrationFiles() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embedded directory is part of the package
	}
	return sub
}

// MigrationTable records which of the runner's migrations Migrate applied (in the runner's
// schema).
const MigrationTable = "idem_migration"

// Migrate creates (or brings up to date) the runner's table in schema ("": DefaultSchema),
// creating the schema when it does not exist. It runs in one transaction under a transaction-level
// advisory lock, with schema first on search_path for that transaction only (SET LOCAL): it
// works through a transaction pooler, concurrent callers migrate once, and nothing is left on
// any session. A table an idemwork migration created already is adopted as it is. It returns
// how many migrations it applied.
func Migrate(ctx context.Context, pool *pgxpool.Pool, schema string) (int, error) {
	if schema == "" {
		schema = DefaultSchema
	}
	ups, err := migrationUps()
	if err != nil {
		return 0, err
	}
	n := 0
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		quoted := pgx.Identifier{schema}.Sanitize()
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('idem.migrate:' || $1, 0))`, schema); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+quoted); err != nil {
			return fmt.Errorf("migrate: create schema %s: %w", schema, err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_catalog.set_config('search_path', $1, true)`, quoted); err != nil {
			return fmt.Errorf("migrate: set search_path: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+MigrationTable+` (
			version    integer     PRIMARY KEY,
			name       text        NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("migrate: create %s: %w", MigrationTable, err)
		}
		applied := map[int]bool{}
		rows, err := tx.Query(ctx, `SELECT version FROM `+MigrationTable)
		if err != nil {
			return fmt.Errorf("migrate: read %s: %w", MigrationTable, err)
		}
		versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return fmt.Errorf("migrate: read %s: %w", MigrationTable, err)
		}
		for _, v := range versions {
			applied[int(v)] = true
		}
		for _, m := range ups {
			if applied[m.version] {
				continue
			}
			if _, err := tx.Exec(ctx, m.up); err != nil {
				return fmt.Errorf("migrate: %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+MigrationTable+` (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return fmt.Errorf("migrate: record %s: %w", m.name, err)
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

type migration struct {
	version  int
	name, up string
}

// migrationUps reads the Up section of each embedded migration, oldest first.
func migrationUps() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		if path.Ext(name) != ".sql" {
			continue
		}
		num, _, _ := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migrate: %s has no version number", name)
		}
		b, err := migrationFiles.ReadFile("migrations/" + name)
		if err != nil {
			return nil, err
		}
		_, up, ok := strings.Cut(string(b), "-- +goose Up")
		if !ok {
			return nil, fmt.Errorf("migrate: %s has no -- +goose Up section", name)
		}
		up, _, _ = strings.Cut(up, "-- +goose Down")
		out = append(out, migration{version: v, name: name, up: up})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}
