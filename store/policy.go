package store

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemwork/idemwork/apperr"
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

// policy is how a session talks to the database: through which pooler (as declared), in which
// pgx exec mode (as asked), with which schema.
type policy struct {
	pooler Pooler
	// declared: the pooler was named (config, environment or URL), "none" included.
	declared bool
	// explicit is the exec mode the URL asks for ("" for none).
	explicit string
	// schemaPath is the search_path of the schema asked for ("" for none: the role's default).
	schemaPath string
	// fromOpts are the settings that came from Options, not the DSN (childDSN adds them).
	fromOpts [][2]string
}

// The schema, and everything else idemwork depends on, is set per transaction (settings.go),
// never at startup nor for the session: a startup parameter cannot pass a pooler (pgbouncer
// refuses or drops it), and a session SET stays on a server connection the pooler hands to the
// next client. So the same URL works straight to PostgreSQL and through any pooler.

// childDSN is dsn with the settings from Options folded in, so another process opening it
// (a storm worker) talks to the database the same way. Without a connect_timeout of the user's,
// a child waits up to ChildConnectTimeout for its connections: its parent has just connected, so
// the server is there, and the burst of connections a storm's processes open at once can keep a
// busy server longer than the default that tells a user quickly that nothing answers.
func (p policy) childDSN(dsn string) string {
	return WithChildConnectTimeout(WithDSNParams(dsn, p.fromOpts))
}

// WithChildConnectTimeout is dsn for a process idemwork starts on a database it has just reached:
// with connect_timeout = ChildConnectTimeout, unless dsn sets one.
func WithChildConnectTimeout(dsn string) string {
	if dsnSetsConnectTimeout(dsn) {
		return dsn
	}
	return WithDSNParams(dsn, [][2]string{{"connect_timeout", strconv.Itoa(int(ChildConnectTimeout.Seconds()))}})
}

// ChildConnectTimeout is the connect timeout of the processes idemwork starts on a database it
// has just reached (storm workers), unless the URL sets one.
const ChildConnectTimeout = 60 * time.Second

// resolvePolicy reads idemwork's own DSN parameters and opts. What the exec mode will be is
// decided once the session knows whether a pooler answers (modeFor).
func resolvePolicy(dsn string, opts Options) (policy, error) {
	var p policy
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return p, parseError(dsn, err)
	}
	rp := cfg.RuntimeParams

	dsnPooler, err := ParsePooler(rp["pooler"])
	if err != nil {
		return p, apperr.New(apperr.Usage, "the database URL's %v", err)
	}
	p.pooler, p.declared = dsnPooler, rp["pooler"] != ""
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
		p.pooler, p.declared = optPooler, true
	}

	p.schemaPath = rp["search_path"]
	if opts.Schema != "" {
		if err := CheckSchemaName(opts.Schema); err != nil {
			return p, apperr.New(apperr.Usage, "database.schema: %v", err)
		}
		sp := pgx.Identifier{opts.Schema}.Sanitize()
		if p.schemaPath != "" && p.schemaPath != sp && p.schemaPath != opts.Schema {
			return p, apperr.New(apperr.Usage, "database.schema = %q but the URL sets search_path=%s: keep one", opts.Schema, p.schemaPath)
		}
		if p.schemaPath == "" {
			p.fromOpts = append(p.fromOpts, [2]string{"search_path", sp})
		}
		p.schemaPath = sp
	}
	if p.schemaPath != "" && optionsSetSearchPath(rp["options"]) {
		return p, apperr.New(apperr.Usage, "the schema is set twice: by idemwork (database.schema or search_path=) and by the URL's options "+
			"(or PGOPTIONS) -c search_path: keep one (idemwork's schema setting works through poolers too)")
	}

	p.explicit = rp["default_query_exec_mode"]
	if p.explicit != "" {
		if _, ok := execModes[p.explicit]; !ok {
			return p, apperr.New(apperr.Usage, "the database URL's default_query_exec_mode=%s: want cache_statement, cache_describe, describe_exec, exec or simple_protocol", printable(p.explicit))
		}
	}
	if p.pooler == PoolerTransaction && p.explicit == "cache_statement" {
		return p, apperr.New(apperr.PoolerMisconfigured, "default_query_exec_mode=cache_statement cannot work through a transaction pooler: "+
			"it prepares named statements on one server connection, and the pooler runs the next transaction on another "+
			"(PgBouncer before 1.21 keeps no prepared statement for its clients); remove it from the URL — idemwork then uses exec, "+
			"one round trip a statement through any pooler — or set default_query_exec_mode=exec. Nothing was sent")
	}
	return p, nil
}

// provisional is the exec mode of the session's first connection, before it knows whether a
// pooler answers: the mode modeFor will most likely pick (the first connection's first
// statements use pgx's simple protocol and prepare nothing, so no named statement reaches a
// pooler before modeFor decides; a connection opened in another mode than the one decided is
// closed).
func (p policy) provisional() pgx.QueryExecMode {
	if m, ok := execModes[p.explicit]; ok {
		return m
	}
	if p.pooled(false) || p.schemaPath != "" {
		return pgx.QueryExecModeExec
	}
	return pgx.QueryExecModeCacheStatement
}

// pooled reports whether a pooler may stand between idemwork and the server: one is declared
// (session or transaction), or one answers (detected).
func (p policy) pooled(detected bool) bool {
	return p.pooler == PoolerTransaction || p.pooler == PoolerSession || detected
}

// modeFor decides the exec mode once the session knows whether a pooler answers (detected)
// and whether a session of the server starts with the settings every transaction sets, as far as
// they decide how a statement is parsed (startsAsSet: no schema asked for, and
// standard_conforming_strings on); and whether BEGIN must go apart (see describesApart).
//
// pgx's default, cache_statement, prepares a named statement per query and keeps it on the
// connection: no parsing or planning on the server after the first use. It prepares in a round
// trip of its own before the transaction's batch — outside the transaction, under whatever the
// session holds — and the name stays on the server connection. So it fits a session of
// idemwork's own that starts as every transaction sets it: no pooler (a pooler may run the next
// transaction on a connection where the name is missing or taken, 42P05, or hand it to a client
// whose session holds another client's search_path), and no schema (a schema is set per
// transaction, not at the session's start). Anywhere else idemwork uses exec: each statement
// sent whole (Parse, Bind, Execute in one message group, the unnamed statement), parsed inside
// the transaction under its settings, one round trip, nothing left on the server. README
// "Production databases" has what exec costs.
//
// A mode the URL asks for is kept where it works: cache_describe and describe_exec describe
// statements apart, and cache_statement prepares apart where the session does not start as set,
// so BEGIN goes first on its own and they do it inside the transaction; cache_statement is
// refused where a pooler may move the session between server connections.
func (p policy) modeFor(detected, startsAsSet bool, where string) (mode pgx.QueryExecMode, apart bool, err error) {
	if p.explicit == "cache_statement" && (p.pooler == PoolerTransaction || (detected && p.pooler != PoolerSession)) {
		return 0, false, apperr.New(apperr.PoolerMisconfigured, "a connection pooler answers at %s (its backend key is not the server's process id, "+
			"the mark of pgbouncer and its kind), and default_query_exec_mode=cache_statement prepares named statements that stay on one server "+
			"connection while the pooler may run the next transaction on another: remove default_query_exec_mode from the URL — idemwork then "+
			"uses exec, which works through any pooler — or, if the pooler runs pool_mode = session, declare it: [database] pooler = \"session\" "+
			"(or pooler=session in the URL). Nothing was written", where)
	}
	if m, ok := execModes[p.explicit]; ok {
		return m, describesApart(m) || (m == pgx.QueryExecModeCacheStatement && !startsAsSet), nil
	}
	if p.pooled(detected) || !startsAsSet {
		return pgx.QueryExecModeExec, false, nil
	}
	return pgx.QueryExecModeCacheStatement, false, nil
}

// describesApart reports whether pgx describes m's statements in a round trip of its own before
// it sends them (cache_describe, describe_exec): sent before BEGIN, that describe would run outside
// the transaction, under whatever the server connection's session holds.
func describesApart(m pgx.QueryExecMode) bool {
	return m == pgx.QueryExecModeCacheDescribe || m == pgx.QueryExecModeDescribeExec
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

// optionsSetSearchPath reports whether an options startup parameter sets search_path itself
// (-c search_path=…, -csearch_path=…, --search_path=… or --search-path=…).
func optionsSetSearchPath(options string) bool {
	words := splitOptions(options)
	for i, w := range words {
		setting := ""
		switch {
		case w == "-c" && i+1 < len(words):
			setting = words[i+1]
		case strings.HasPrefix(w, "--"):
			setting = w[2:]
		case strings.HasPrefix(w, "-c"):
			setting = w[2:]
		}
		name, _, ok := strings.Cut(setting, "=")
		if ok && strings.ReplaceAll(strings.ToLower(name), "-", "_") == "search_path" {
			return true
		}
	}
	return false
}

// splitOptions splits an options startup parameter into words as PostgreSQL does: at
// unescaped white space, a backslash escaping the next character.
func splitOptions(options string) []string {
	var words []string
	var w strings.Builder
	inWord, escaped := false, false
	for i := 0; i < len(options); i++ {
		c := options[i]
		switch {
		case escaped:
			w.WriteByte(c)
			escaped = false
		case c == '\\':
			escaped, inWord = true, true
		case strings.IndexByte(" \t\n\v\f\r", c) >= 0:
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
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

// declarePooler says how to tell idemwork which pooler it talks through.
const declarePooler = `[database] pooler = "transaction" (or "session", as pgbouncer's pool_mode says; ` +
	`IDEMWORK_POOLER=transaction, or pooler=transaction in the URL, do the same)`

// startupRefused reports whether a server (a pooler) refused a startup parameter: pgbouncer ends
// such a connection with 08P01 naming it.
func startupRefused(e *pgconn.PgError) bool {
	return e.Code == "08P01" && strings.Contains(e.Message, "startup parameter")
}

// refusedParam is the startup parameter a pooler's refusal names: pgbouncer 1.18 says
// "unsupported startup parameter: options"; 1.20 and later refuse a setting inside options
// ("unsupported startup parameter in options: search_path", "unsupported options startup
// parameter: only …").
func refusedParam(msg string) string {
	if strings.Contains(msg, "in options") || strings.Contains(msg, "options startup parameter") {
		return "options"
	}
	if _, after, ok := strings.Cut(msg, "startup parameter: "); ok {
		return printable(strings.TrimSpace(after))
	}
	return ""
}

// openError words the failure of a session's first connection: a pooler's refusal of one of the
// URL's startup parameters is POOLER_MISCONFIGURED saying what to do; anything else is the
// ConnectError TranslateError codes.
func (p policy) openError(dsn string, err error) error {
	ce := connectError(dsn, err)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && startupRefused(pgErr) {
		return apperr.Wrap(apperr.PoolerMisconfigured, ce, "connect to %s: %s", RedactDSN(dsn), refusalAdvice(pgErr))
	}
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return apperr.Wrap(ae.Code, ce, "connect to %s: %s", RedactDSN(dsn), ae.Message)
	}
	return ce
}

// refusalAdvice says what to do about a pooler that refused one of the URL's startup parameters:
// idemwork sends none of its own, so it can only be the user's.
func refusalAdvice(e *pgconn.PgError) string {
	said := fmt.Sprintf("%s (SQLSTATE %s)", printable(e.Message), e.Code)
	param := refusedParam(e.Message)
	if param == "options" {
		return "a connection pooler refused the URL's options startup parameter (options= in the URL, or PGOPTIONS in the " +
			"environment); pgbouncer said: " + said + ". Remove it: put the schema in [database] schema (idemwork sets it in every " +
			"transaction), and a setting such as statement_timeout on the role (ALTER ROLE … SET statement_timeout = …), whose value " +
			"idemwork keeps in every transaction"
	}
	return fmt.Sprintf("a connection pooler refused the URL's startup parameter %s; pgbouncer said: %s. Remove it from the URL "+
		"(a setting belongs on the role: ALTER ROLE … SET %s = …, whose value idemwork keeps in every transaction)", param, said, param)
}

// printable replaces control characters of a server's text with U+FFFD before a message shows it.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, s)
}
