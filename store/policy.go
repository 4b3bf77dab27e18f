package store

import (
	"errors"
	"fmt"
	"strings"
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

// policy is how a session talks to the database: through which pooler, in which pgx exec mode,
// with which search_path.
type policy struct {
	pooler     Pooler
	mode       pgx.QueryExecMode
	searchPath string
	// fromOpts are the settings that came from Options, not the DSN (childDSN adds them).
	fromOpts [][2]string
}

// How the schema's search_path reaches the server depends on what sits in front of it; a
// session-level SET is used only where the session ends with the client.
//
//   - No declared pooler: a startup parameter (options=-c search_path=…). PostgreSQL applies it
//     from the session's first statement (prepared ones included) with no SET at all, so nothing
//     can outlive the session. A pooler nobody declared cannot pass it on to a shared server
//     connection: pgbouncer refuses the connection (1.18: "unsupported startup parameter:
//     options"; 1.20 and later refuse a -c of a parameter it does not track), or drops it when
//     told to ignore it — Open checks that the path arrived and says to declare the pooler.
//   - A session pooler: a SET once per connection. The client keeps its server connection for
//     its whole life, and pgbouncer runs server_reset_query (DISCARD ALL) when it leaves, so the
//     next client starts clean. (options would not get through pgbouncer 1.18 at all.)
//   - A transaction pooler: set_config(…, true) in each transaction (queueBegin).

// startupSearchPath is the search_path sent as a startup parameter: without a declared pooler.
func (p policy) startupSearchPath() string {
	if p.pooler == PoolerNone {
		return p.searchPath
	}
	return ""
}

// sessionSearchPath is the search_path to SET once per connection: behind a session pooler.
func (p policy) sessionSearchPath() string {
	if p.pooler == PoolerSession {
		return p.searchPath
	}
	return ""
}

// txSearchPath is the search_path set per transaction: behind a transaction pooler.
func (p policy) txSearchPath() string {
	if p.pooler == PoolerTransaction {
		return p.searchPath
	}
	return ""
}

// startupOptions is the options startup parameter to send: the user's own (options= in the
// URL, or PGOPTIONS), then the schema's search_path when it travels at startup.
func (p policy) startupOptions(user string) string {
	sp := p.startupSearchPath()
	if sp == "" {
		return user
	}
	opt := "-c search_path=" + escapeOption(sp)
	if strings.TrimSpace(user) == "" {
		return opt
	}
	return user + " " + opt
}

// escapeOption writes v as one word of the options startup parameter, as PostgreSQL splits it
// (pg_split_opts, the same rule as libpq's PGOPTIONS): a backslash before each white-space
// character and each backslash.
func escapeOption(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\', ' ', '\t', '\n', '\v', '\f', '\r':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
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
	if p.searchPath != "" && optionsSetSearchPath(rp["options"]) {
		return p, apperr.New(apperr.Usage, "the schema is set twice: by idemwork (database.schema or search_path=) and by the URL's options "+
			"(or PGOPTIONS) -c search_path: keep one (idemwork's schema setting works through poolers too)")
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

// openError words the failure of a session's first connection. A pooler's refusal of a startup
// parameter is POOLER_MISCONFIGURED saying whose parameter it was — the schema's, sent because no
// pooler was declared, or the URL's own — and what to do; the search_path check's refusal
// (AfterConnect) is already coded; anything else is the ConnectError TranslateError codes.
func (p policy) openError(dsn, userOptions string, err error) error {
	ce := connectError(dsn, err)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && startupRefused(pgErr) {
		return apperr.Wrap(apperr.PoolerMisconfigured, ce, "connect to %s: %s", RedactDSN(dsn), p.refusalAdvice(pgErr, userOptions))
	}
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return apperr.Wrap(ae.Code, ce, "connect to %s: %s", RedactDSN(dsn), ae.Message)
	}
	return ce
}

// refusalAdvice says what to do about a pooler that refused a startup parameter.
func (p policy) refusalAdvice(e *pgconn.PgError, userOptions string) string {
	said := fmt.Sprintf("%s (SQLSTATE %s)", printable(e.Message), e.Code)
	param := refusedParam(e.Message)
	sentPath := p.startupSearchPath() != ""
	switch {
	case param == "options" && sentPath:
		msg := "a connection pooler refused the schema's search_path, which idemwork sends as the connection opens " +
			"(options=-c search_path=…) when it is told it talks to PostgreSQL directly; pgbouncer said: " + said +
			". Declare the pooler: " + declarePooler + ", and restart; idemwork then sets the schema per transaction " +
			"(per session behind a session pooler), where no other client of the pooler sees it"
		if strings.TrimSpace(userOptions) != "" {
			msg += "; and remove options= from the URL (or PGOPTIONS from the environment): pgbouncer refuses it too"
		}
		return msg
	case param == "options":
		msg := "a connection pooler refused the URL's options startup parameter (options= in the URL, or PGOPTIONS in the " +
			"environment); pgbouncer said: " + said + ". Remove it (put the schema in [database] schema: idemwork sets it itself)"
		if p.pooler == PoolerNone {
			msg += ", and declare the pooler: " + declarePooler
		}
		return msg
	}
	msg := fmt.Sprintf("a connection pooler refused the URL's startup parameter %s; pgbouncer said: %s. Remove it from the URL "+
		"(idemwork enforces read-only and sets the schema itself)", param, said)
	if p.pooler == PoolerNone {
		msg += ", and declare the pooler: " + declarePooler
	}
	return msg
}

// searchPathDropped is the refusal of a session whose startup search_path never arrived.
func searchPathDropped(sent, got string) error {
	return apperr.New(apperr.PoolerMisconfigured, "the schema's search_path, sent as the connection opened (options=-c search_path=%s), "+
		"did not reach the session, which has search_path=%s: something between idemwork and PostgreSQL dropped the options "+
		"startup parameter — the mark of a pgbouncer with ignore_startup_parameters = options that idemwork was not told about. "+
		"Declare it: %s, and restart; idemwork then sets the schema per transaction (per session behind a session pooler). "+
		"Nothing was read or written in another schema", printable(sent), printable(got), declarePooler)
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
