package store_test

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/store"
)

// leakyDSNs held passwords the old RedactDSN printed: in a query parameter, in a URL that does
// not parse, in a quoted keyword value, after "password =" with spaces.
var leakyDSNs = []string{
	"postgres://u:SECRET@h:5432/db",
	"postgres://u@h:5432/db?password=SECRET",
	"postgres://u@h/db?sslmode=disable&password=SECRET&application_name=x",
	"postgres://u:SECRET@[::1/x",
	"postgres://u:SECRET@h:notaport/db",
	"host=h password='abc SECRET' dbname=db",
	"host=h password = SECRET dbname=db",
	"host=h password=SECRET",
	"password=SECRET host=h user=u",
	"host=h password='SECRET",
	"user=u password=SEC\\'RET host=h",
	"postgresql://u:S%45CRET@h/db",
	"postgres://u@h/db?sslpassword=SECRET&sslmode=disable",
}

func TestRedactDSNNeverShowsAPassword(t *testing.T) {
	t.Parallel()
	for _, dsn := range leakyDSNs {
		out := store.RedactDSN(dsn)
		require.NotContains(t, out, "SECRET", dsn)
		require.NotContains(t, out, "SEC", dsn)
		where, _ := store.DescribeDSN(dsn)
		require.NotContains(t, where, "SECRET", dsn)
	}
	require.Equal(t, "postgres://u@h:5432/db", store.RedactDSN("postgres://u:SECRET@h:5432/db?password=SECRET2&sslmode=require"))
	require.Equal(t, "postgres://u@h:5432/db", store.RedactDSN("host=h user=u password='a b' dbname=db"))
	require.Equal(t, "postgres://postgres@/idemwork?host=%2Fvar%2Frun%2Fpg&port=5432",
		store.RedactDSN("postgres:///idemwork?host=/var/run/pg&port=5432&user=postgres"))
	require.Equal(t, "postgres://u@h1:5432,h2:5433/db", store.RedactDSN("postgres://u:SECRET@h1:5432,h2:5433/db"))
}

// FuzzRedactDSN: whatever the input, the output never holds the password pgconn reads from it,
// and an input pgconn cannot parse is never echoed at all.
func FuzzRedactDSN(f *testing.F) {
	for _, dsn := range leakyDSNs {
		f.Add(dsn)
	}
	f.Add("postgres://user:pa%20ss@host:5432/db?sslmode=disable")
	f.Add("host=/tmp port=5432 user=me password=x")
	f.Fuzz(func(t *testing.T, dsn string) {
		out := store.RedactDSN(dsn)
		cfg, err := pgconn.ParseConfig(dsn)
		if err != nil {
			require.Equal(t, "(a connection string that cannot be parsed)", out)
			return
		}
		// The password may coincide with what the redacted form rightly shows (the user, a host
		// as written or escaped, the database, a port: "543" is in 5432); only a password that
		// is none of those must be absent.
		shown := []string{cfg.User, cfg.Host, url.QueryEscape(cfg.Host), cfg.Database, strconv.Itoa(int(cfg.Port)), "postgres://@:?&=%"}
		for _, fb := range cfg.Fallbacks {
			shown = append(shown, fb.Host, url.QueryEscape(fb.Host), strconv.Itoa(int(fb.Port)))
		}
		if pw := cfg.Password; len(pw) >= 3 && !strings.Contains(strings.Join(shown, " "), pw) {
			require.NotContains(t, out, pw, "input %q", dsn)
		}
		again, err := pgconn.ParseConfig(out)
		require.NoError(t, err, "the redacted form parses: %q", out)
		if cfg.User != "" { // an empty user comes back as the OS user's default
			require.Equal(t, cfg.User, again.User)
		}
		require.Equal(t, cfg.Database, again.Database)
	})
}

func TestWithDSNParamsSetsAParameterPgconnReadsBack(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{"postgres://u@h/db?search_path=old", "postgres://u@h/db", "host=h user=u search_path=old"} {
		out := store.WithDSNParams(dsn, [][2]string{{"search_path", `"Tenant ""One"""`}, {"application_name", "a b+c"}})
		cfg, err := pgconn.ParseConfig(out)
		require.NoError(t, err, out)
		require.Equal(t, `"Tenant ""One"""`, cfg.RuntimeParams["search_path"], out)
		require.Equal(t, "a b+c", cfg.RuntimeParams["application_name"], out)
	}
}
