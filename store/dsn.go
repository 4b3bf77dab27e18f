package store

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemwork/idemwork/apperr"
)

// unparseableDSN is what RedactDSN shows for a string pgconn cannot parse: such a string can be
// too ambiguous to tell where a password starts, so none of it is echoed.
const unparseableDSN = "(a connection string that cannot be parsed)"

// RedactDSN returns dsn fit for a message: the URL pgconn.ParseConfig reads from it, rebuilt
// from the user, hosts, ports and database alone, so no password (in the userinfo, a query
// parameter or a keyword value, quoted or not) can survive. An unparseable dsn is never echoed.
func RedactDSN(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return unparseableDSN
	}
	return rebuildDSN(cfg)
}

// rebuildDSN writes cfg's user, hosts and database as a postgres:// URL, nothing else.
func rebuildDSN(cfg *pgconn.Config) string {
	u := url.URL{Scheme: "postgres", Path: "/" + cfg.Database}
	if cfg.User != "" {
		u.User = url.User(cfg.User)
	}
	q := url.Values{}
	var tcp []string
	for _, h := range hostsOf(cfg) {
		if strings.HasPrefix(h.host, "/") {
			// A socket directory goes in ?host=, as libpq writes it.
			q.Add("host", h.host)
			q.Add("port", strconv.Itoa(int(h.port)))
			continue
		}
		tcp = append(tcp, net.JoinHostPort(h.host, strconv.Itoa(int(h.port))))
	}
	u.Host = strings.Join(tcp, ",")
	u.RawQuery = q.Encode()
	out := u.String()
	if _, err := pgconn.ParseConfig(out); err != nil {
		// A host a URL cannot carry (a stray "[" or "/", say) is still said exactly, in the
		// keyword/value form, whose quoting holds any character.
		return keywordDSN(cfg)
	}
	return out
}

// quoteKeywordValue quotes v for libpq's keyword/value form, where quotes hold any character.
func quoteKeywordValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// keywordDSN writes cfg's user, hosts, ports and database in libpq's keyword/value form.
func keywordDSN(cfg *pgconn.Config) string {
	var hosts, ports []string
	for _, h := range hostsOf(cfg) {
		hosts = append(hosts, h.host)
		ports = append(ports, strconv.Itoa(int(h.port)))
	}
	kv := [][2]string{{"host", strings.Join(hosts, ",")}, {"port", strings.Join(ports, ",")}, {"dbname", cfg.Database}}
	if cfg.User != "" {
		kv = append(kv, [2]string{"user", cfg.User})
	}
	parts := make([]string, 0, len(kv))
	for _, p := range kv {
		parts = append(parts, p[0]+"="+quoteKeywordValue(p[1]))
	}
	return strings.Join(parts, " ")
}

type hostPort struct {
	host string
	port uint16
}

// hostsOf lists the primary host and the fallbacks, each once.
func hostsOf(cfg *pgconn.Config) []hostPort {
	out := []hostPort{{cfg.Host, cfg.Port}}
	for _, f := range cfg.Fallbacks {
		hp := hostPort{f.Host, f.Port}
		if hp != out[len(out)-1] {
			out = append(out, hp)
		}
	}
	return out
}

// DescribeDSN names where dsn connects, for headers and messages: "host:port" (or the socket
// directory) and the database. It never includes a password; an unparseable dsn is described
// as such.
func DescribeDSN(dsn string) (where, database string) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return unparseableDSN, ""
	}
	h := hostsOf(cfg)[0]
	if strings.HasPrefix(h.host, "/") {
		return fmt.Sprintf("%s (port %d)", h.host, h.port), cfg.Database
	}
	return net.JoinHostPort(h.host, strconv.Itoa(int(h.port))), cfg.Database
}

// WithDSNParams returns dsn with connection parameters appended (to a URL's query, or as
// keyword=value pairs), leaving every existing byte as it was; pgconn reads the last setting of
// a key, so an appended one replaces an earlier one. idemwork's own settings such as pooler=
// travel to child processes inside the DSN this way.
func WithDSNParams(dsn string, params [][2]string) string {
	if len(params) == 0 {
		return dsn
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		frag := ""
		if i := strings.IndexByte(dsn, '#'); i >= 0 {
			dsn, frag = dsn[:i], dsn[i:]
		}
		var b strings.Builder
		b.WriteString(dsn)
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		// pgconn reads '+' as itself, not as a space: spaces are written %20.
		esc := func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }
		for _, p := range params {
			b.WriteString(sep + esc(p[0]) + "=" + esc(p[1]))
			sep = "&"
		}
		return b.String() + frag
	}
	var b strings.Builder
	b.WriteString(dsn)
	for _, p := range params {
		fmt.Fprintf(&b, " %s=%s", p[0], quoteKeywordValue(p[1]))
	}
	return b.String()
}

// connectError words a failure to connect: where (redacted), then the real cause first. pgx's
// sslmode=prefer fallback reports the refused TLS attempt before the plain attempt's error; the
// refusal is noise when the server simply does not do TLS, so it is dropped when another cause
// exists.
func connectError(dsn string, err error) error {
	return &ConnectError{Where: RedactDSN(dsn), Cause: connectCause(err), err: err}
}

// ConnectError is a failure to reach or log in to the database. Its message is written for
// users: the redacted URL and the cause that matters.
type ConnectError struct {
	Where string
	Cause string
	err   error
}

func (e *ConnectError) Error() string { return "connect to " + e.Where + ": " + e.Cause }
func (e *ConnectError) Unwrap() error { return e.err }

// connectCause picks the message of the error that explains a failed connection.
func connectCause(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		msg := pgErr.Message + " (SQLSTATE " + pgErr.Code + ")"
		if hint := connectHint(pgErr); hint != "" {
			msg += ": " + hint
		}
		return msg
	}
	var leaves []string
	collectLeaves(err, &leaves)
	var kept []string
	for _, l := range leaves {
		// Each address and each TLS attempt fails on its own: the same words twice say nothing more.
		if !strings.Contains(l, "server refused TLS connection") && !slices.Contains(kept, l) {
			kept = append(kept, l)
		}
	}
	if len(kept) == 0 {
		kept = leaves
	}
	if len(kept) == 0 {
		return err.Error()
	}
	return strings.Join(kept, "; ")
}

// collectLeaves gathers the innermost messages of a tree of joined errors, keeping the dial
// address a per-attempt error names.
func collectLeaves(err error, out *[]string) {
	switch e := err.(type) {
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			collectLeaves(inner, out)
		}
	case *pgconn.ConnectError:
		collectLeaves(e.Unwrap(), out)
	default:
		*out = append(*out, strings.ReplaceAll(err.Error(), "\n", " "))
	}
}

// connectHint says what to do about the usual refusals.
func connectHint(e *pgconn.PgError) string {
	switch {
	case e.Code == "28P01":
		return "check the user and password in the URL (or ~/.pgpass)"
	case e.Code == "08P01" && strings.Contains(e.Message, "authentication failed"):
		return "check the user and password in the URL (a pooler checks them against its auth_file)"
	case e.Code == "3D000":
		return "check the database name in the URL"
	case e.Code == "28000" && strings.Contains(e.Message, "does not exist"):
		return "check the user in the URL"
	case e.Code == "28000":
		return "the server's pg_hba.conf has no entry for this user, database and address"
	case e.Code == "53300":
		return "the server has no free connection slots; lower [database] max_conns or ask for more"
	case e.Code == "08P01" && strings.Contains(e.Message, "unsupported startup parameter"):
		return "a connection pooler (pgbouncer) refuses a startup parameter: remove it from the URL, and declare the pooler " +
			"(" + declarePooler + "): idemwork then sets read-only and the schema per transaction or session, never at startup"
	}
	return ""
}

// dsnSetsConnectTimeout reports whether dsn (or PGCONNECT_TIMEOUT) names a connect timeout; one
// that does not gets DefaultConnectTimeout.
func dsnSetsConnectTimeout(dsn string) bool {
	if os.Getenv("PGCONNECT_TIMEOUT") != "" {
		return true
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		return err == nil && u.Query().Has("connect_timeout")
	}
	return keywordPresent.MatchString(dsn)
}

var keywordPresent = regexp.MustCompile(`(^|\s)connect_timeout\s*=`)

// parseError is USAGE for a DSN pgconn cannot parse, naming the parameter at fault and what it
// takes — never quoting the DSN, which may hold a password.
func parseError(dsn string, err error) error {
	msg := err.Error()
	if i := strings.LastIndex(msg, "`: "); i >= 0 {
		msg = msg[i+3:]
	}
	for _, p := range parseProblems {
		if strings.Contains(msg, p.match) {
			return apperr.New(apperr.Usage, "the database URL's %s is not valid: %s; see README \"The database\" for the forms idemwork reads", p.param, p.want)
		}
	}
	return apperr.New(apperr.Usage, "the database URL is not valid: %s; see README \"The database\" for the forms idemwork reads", parseHint(dsn))
}

// parseProblems map pgconn's parse failures to the parameter and the values it takes.
var parseProblems = []struct{ match, param, want string }{
	{"sslmode is invalid", "sslmode", "want disable, allow, prefer, require, verify-ca or verify-full"},
	{"invalid connect_timeout", "connect_timeout", "want a whole number of seconds (0 waits as long as the network does)"},
	{"invalid port", "port", "want a number from 1 to 65535"},
	{"port numbers to", "port", "give one port, or one for each host"},
	{"target_session_attrs", "target_session_attrs", "want any, read-write, read-only, primary, standby or prefer-standby"},
	{"invalid sslcertmode", "sslcertmode", "want disable, allow or require"},
	{"channel_binding", "channel_binding", "want disable, prefer or require"},
	{"min_protocol_version", "min_protocol_version", "want 3.0 or 3.2 (and not above max_protocol_version)"},
	{"max_protocol_version", "max_protocol_version", "want 3.0 or 3.2"},
	{"require_auth", "require_auth", "want a list of password, md5, scram-sha-256 or none"},
	{"sslcert", "sslcert/sslkey", "both must name readable files"},
	{"sslkey", "sslcert/sslkey", "both must name readable files"},
	{"sslpassword", "sslpassword", "it must decrypt sslkey"},
	{"sslrootcert", "sslrootcert", "it must name a readable certificate file"},
	{"failed to read service", "service", "it must name a service of the pg_service.conf file"},
	{"statement_cache_capacity", "statement_cache_capacity", "want a whole number"},
	{"description_cache_capacity", "description_cache_capacity", "want a whole number"},
	{"default_query_exec_mode", "default_query_exec_mode", "want cache_statement, cache_describe, describe_exec, exec or simple_protocol"},
}
