package dbfacts

import (
	"context"
	"fmt"
	"strings"

	"github.com/idemwork/idemwork/migrations"
	"github.com/idemwork/idemwork/store"
)

// Privileges is what the session's role may do with idemwork's tables (those in the schema of
// the version table), for idemwork doctor: read them (SELECT), write them (INSERT, UPDATE,
// DELETE), create tables in the schema (migrate), and read replication's details.
type Privileges struct {
	Role      string `json:"role"`
	Superuser bool   `json:"superuser"`
	Read      bool   `json:"read"`
	Write     bool   `json:"write"`
	Create    bool   `json:"create"`
	// Monitor: the role may read pg_stat_replication's details (pg_read_all_stats, pg_monitor).
	Monitor bool `json:"monitor"`
	// Missing lists what the role lacks, as "INSERT on table audit_event".
	Missing []string `json:"missing"`
}

// ReadPrivileges reads what the session's role may do (it only reads).
func ReadPrivileges(ctx context.Context, db *store.DB) (Privileges, error) {
	p := Privileges{Missing: []string{}}
	if err := db.Q(ctx).QueryRow(ctx, `SELECT current_user, r.rolsuper,
			coalesce(pg_catalog.has_schema_privilege(current_schema(), 'CREATE'), false),
			pg_catalog.pg_has_role(current_user, 'pg_read_all_stats', 'USAGE')
		FROM pg_catalog.pg_roles r WHERE r.rolname = current_user`).Scan(&p.Role, &p.Superuser, &p.Create, &p.Monitor); err != nil {
		return p, store.TranslateError(fmt.Errorf("read privileges: %w", err))
	}
	rows, err := db.Q(ctx).Query(ctx, `SELECT p.priv, c.relname
		FROM pg_catalog.pg_class c CROSS JOIN unnest($1::text[]) WITH ORDINALITY AS p(priv, n)
		WHERE c.relnamespace = (SELECT relnamespace FROM pg_catalog.pg_class WHERE oid = pg_catalog.to_regclass($2))
			AND c.relkind IN ('r', 'p') AND (c.relname <> $2 OR p.priv = 'SELECT') AND NOT pg_catalog.has_table_privilege(c.oid, p.priv)
		ORDER BY p.n, c.relname`, []string{"SELECT", "INSERT", "UPDATE", "DELETE"}, migrations.VersionTable)
	if err != nil {
		return p, store.TranslateError(fmt.Errorf("read privileges: %w", err))
	}
	p.Read, p.Write = true, true
	for rows.Next() {
		var priv, table string
		if err := rows.Scan(&priv, &table); err != nil {
			rows.Close()
			return p, store.TranslateError(fmt.Errorf("read privileges: %w", err))
		}
		if priv == "SELECT" {
			p.Read = false
		} else {
			p.Write = false
		}
		p.Missing = append(p.Missing, priv+" on table "+table)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return p, store.TranslateError(fmt.Errorf("read privileges: %w", err))
	}
	return p, nil
}

// Summary says in a few words what the role may do.
func (p Privileges) Summary() string {
	var may []string
	for _, c := range []struct {
		ok   bool
		what string
	}{{p.Read, "read"}, {p.Write, "write"}, {p.Create, "create tables (migrate)"}, {p.Monitor, "read replication's details"}} {
		if c.ok {
			may = append(may, c.what)
		}
	}
	s := "role " + store.Ident(p.Role)
	if p.Superuser {
		s += " (superuser)"
	}
	if len(may) == 0 {
		return s + " may do none of read, write, create"
	}
	return s + " may " + strings.Join(may, ", ")
}
