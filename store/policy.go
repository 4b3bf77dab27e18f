package store

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"idemwork/apperr"
)

// Pooler says what sits between idemwork and PostgreSQL.
type Pooler string

// The poolers idemwork knows how to talk through.
const (
	// PoolerNone: a direct connection; a client connection is one server session.
	PoolerNone Pooler = "none"
	// PoolerSession: pgbouncer pool_mode = session; a client keeps one server connection for its
	// whole life, which the pooler resets (DISCARD ALL) when the client leaves.
	PoolerSession Pooler = "session"
	// PoolerTransaction: pgbouncer pool_mode = transaction; each transaction may run on a
	// different server connection, and a statement outside a transaction may run on one nobody
	// else's statement will see again.
	PoolerTransaction Pooler = "transaction"
)

// ParsePooler reads a pooler name ("" is none).
func ParsePooler(s string) (Pooler, error) {
	switch Pooler(s) {
	case "", PoolerNone:
		return PoolerNone, nil
	case PoolerSession, PoolerTransaction:
		return Pooler(s), nil
	}
	return "", fmt.Errorf("pooler %q: want none, session or transaction", s)
}

// policyParams are the DSN parameters idemwork reads itself and never sends to the server
// (pgbouncer refuses unknown startup parameters, and search_path as one).
var policyParams = []string{"pooler", "search_path"}

// policy is how a session talks to the database: through which pooler, in which pgx exec mode,
// with which search_path.
type policy struct {
	pooler     Pooler
	mode       pgx.QueryExecMode
	searchPath string
	// fromOpts are the settings that came from Options, not the DSN (childDSN adds them).
	fromOpts [][2]string
}

// sessionSearchPath is the search_path to set once per connection: without a transaction
// pooler the connection is the session. Behind one it is set per transaction instead.
func (p policy) sessionSearchPath() string {
	if p.pooler == PoolerTransaction {
		return ""
	}
	return p.searchPath
}

// childDSN is dsn with the settings from Options folded in, so another process opening it
// (a storm worker) talks to the database the same way.
func (p policy) childDSN(dsn string) string { return WithDSNParams(dsn, p.fromOpts) }

// resolvePolicy reads idemwork's own DSN parameters and opts, and picks the exec mode.
//
// pgx's default, cache_statement, names a prepared statement per query and keeps it on the
// connection; a transaction pooler hands the next transaction another server connection, where
// that name is missing or already taken (42P05). Behind a transaction pooler idemwork uses
// cache_describe: unnamed statements, argument and result types learned once per connection and
// cached, one round trip a statement — or exec when a schema is set, since a describe runs
// outside the transaction where the schema's search_path is set. An exec mode named in the DSN
// is kept when it works through the pooler, refused with the reason when it cannot.
func resolvePolicy(dsn string, opts Options) (policy, error) {
	var p policy
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return p, apperr.New(apperr.Usage, "the database URL is not valid: %s; see README \"The database\" for the forms idemwork reads", parseHint(dsn))
	}
	rp := cfg.RuntimeParams

	dsnPooler, err := ParsePooler(rp["pooler"])
	if err != nil {
		return p, apperr.New(apperr.Usage, "the database URL's %v", err)
	}
	p.pooler = dsnPooler
	if opts.Pooler != "" {
		optPooler, err := ParsePooler(string(opts.Pooler))
		if err != nil {
			return p, apperr.New(apperr.Usage, "database.%v", err)
		}
		if rp["pooler"] != "" && optPooler != dsnPooler {
			return p, apperr.New(apperr.Usage, "database.pooler = %q but the URL says pooler=%s: keep one", optPooler, dsnPooler)
		}
		if rp["pooler"] == "" && optPooler != PoolerNone {
			p.fromOpts = append(p.fromOpts, [2]string{"pooler", string(optPooler)})
		}
		p.pooler = optPooler
	}

	p.searchPath = rp["search_path"]
	if opts.Schema != "" {
		if err := CheckSchemaName(opts.Schema); err != nil {
			return p, apperr.New(apperr.Usage, "database.schema: %v", err)
		}
		sp := pgx.Identifier{opts.Schema}.Sanitize()
		if p.searchPath != "" && p.searchPath != sp && p.searchPath != opts.Schema {
			return p, apperr.New(apperr.Usage, "database.schema = %q but the URL sets search_path=%s: keep one", opts.Schema, p.searchPath)
		}
		if p.searchPath == "" {
			p.fromOpts = append(p.fromOpts, [2]string{"search_path", sp})
		}
		p.searchPath = sp
	}

	explicit := rp["default_query_exec_mode"]
	p.mode = pgx.QueryExecModeCacheStatement
	if explicit != "" {
		m, ok := execModes[explicit]
		if !ok {
			return p, apperr.New(apperr.Usage, "the database URL's default_query_exec_mode=%s: want cache_statement, cache_describe, describe_exec, exec or simple_protocol", explicit)
		}
		p.mode = m
	}
	if p.pooler != PoolerTransaction {
		return p, nil
	}
	switch {
	case explicit == "cache_statement":
		return p, apperr.New(apperr.Usage, "default_query_exec_mode=cache_statement cannot work through a transaction pooler: "+
			"its named prepared statements stay on one server connection while the next transaction gets another; "+
			"remove it from the URL (idemwork then picks a mode that works)")
	case p.searchPath != "" && (p.mode == pgx.QueryExecModeCacheDescribe || p.mode == pgx.QueryExecModeDescribeExec):
		return p, apperr.New(apperr.Usage, "default_query_exec_mode=%s with a schema cannot work through a transaction pooler: "+
			"it describes each statement outside the transaction, where the schema's search_path is not set; "+
			"remove it from the URL (idemwork then uses exec), or set the path for the role (ALTER ROLE … SET search_path)", explicit)
	case explicit != "":
	case p.searchPath != "":
		p.mode = pgx.QueryExecModeExec
	default:
		p.mode = pgx.QueryExecModeCacheDescribe
	}
	return p, nil
}

var execModes = map[string]pgx.QueryExecMode{
	"cache_statement": pgx.QueryExecModeCacheStatement,
	"cache_describe":  pgx.QueryExecModeCacheDescribe,
	"describe_exec":   pgx.QueryExecModeDescribeExec,
	"exec":            pgx.QueryExecModeExec,
	"simple_protocol": pgx.QueryExecModeSimpleProtocol,
}

// ExecModes lists pgx's exec modes by their DSN names.
func ExecModes() []string {
	return []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"}
}

func execModeName(m pgx.QueryExecMode) string {
	for name, mode := range execModes {
		if mode == m {
			return name
		}
	}
	return m.String()
}

// CheckSchemaName accepts a schema name PostgreSQL would create: 1-63 bytes, no NUL.
func CheckSchemaName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty schema name")
	case len(s) > 63:
		return fmt.Errorf("%q is longer than 63 bytes", s)
	case strings.ContainsRune(s, 0):
		return fmt.Errorf("a schema name cannot hold a NUL byte")
	case strings.HasPrefix(s, "pg_"):
		return fmt.Errorf("%q: names starting with pg_ are reserved for the system", s)
	}
	return nil
}

// queueBegin queues the start of a transaction — BEGIN, or BEGIN READ ONLY, and behind a
// transaction pooler the schema's search_path for this transaction only — and returns how many
// results that is.
func (db *DB) queueBegin(b *pgx.Batch, readOnly bool) int {
	if readOnly {
		b.Queue("begin read only")
	} else {
		b.Queue("begin")
	}
	if db.txSearchPath == "" {
		return 1
	}
	b.Queue("select pg_catalog.set_config('search_path', $1, true)", db.txSearchPath)
	return 2
}
