package cli_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/cli"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/store"
)

// silentListener accepts connections on loopback and never answers them (a server hung before
// its handshake, a firewall that swallows packets past the accept), until the test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range held {
			_ = c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// Issue 21, item 7: against a listener that accepts and never answers, a command gives up at the
// default connect timeout (10 s, the URL setting none) with DATABASE_UNAVAILABLE saying what is
// wrong — not INTERNAL after 100 s — and serve listens at once: /healthz answers, /readyz and
// the API say 503 DATABASE_UNAVAILABLE while the database is not there.
func TestAListenerThatNeverAnswersIsDatabaseUnavailableWithinTheConnectTimeout(t *testing.T) {
	t.Parallel()
	dsn := "postgres://app:secret-pw@" + silentListener(t) + "/shop?sslmode=disable"
	t.Run("keys", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		code, out, _ := run(t, nil, "--dsn", dsn, "keys", "--owner", "o", "--json")
		took := time.Since(start)
		require.Equal(t, 4, code, out)
		e := errorOf(t, out)
		require.Equal(t, "DATABASE_UNAVAILABLE", e["code"], out)
		require.Contains(t, e["message"], "did not answer within the connect timeout")
		require.NotContains(t, out, "secret-pw")
		require.Less(t, took, 15*time.Second)
		require.GreaterOrEqual(t, took, store.DefaultConnectTimeout-time.Second)
	})
	t.Run("serve", func(t *testing.T) {
		t.Parallel()
		addr := freeAddr(t)
		ctx, cancel := context.WithCancel(context.Background())
		var out, errb syncWriter
		env := map[string]string{"XDG_CONFIG_HOME": t.TempDir()}
		exited := make(chan int, 1)
		started := time.Now()
		go func() {
			exited <- cli.Run(ctx, []string{"--dsn", dsn, "serve", "--dev-auth", "--addr", addr}, &out, &errb, func(k string) string { return env[k] })
		}()
		get := func(path string) (int, string) {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				return 0, err.Error()
			}
			defer resp.Body.Close()
			var b strings.Builder
			_, _ = fmt.Fprint(&b, resp.Header.Get("Retry-After"))
			buf := make([]byte, 4096)
			n, _ := resp.Body.Read(buf)
			return resp.StatusCode, b.String() + " " + string(buf[:n])
		}
		var status int
		require.Eventually(t, func() bool { status, _ = get("/healthz"); return status == http.StatusOK }, 5*time.Second, 10*time.Millisecond)
		require.Less(t, time.Since(started), 5*time.Second, "/healthz answers at once")
		status, body := get("/readyz")
		require.Equal(t, http.StatusServiceUnavailable, status, body)
		require.Contains(t, body, "DATABASE_UNAVAILABLE")
		require.True(t, strings.HasPrefix(body, "1 "), "Retry-After: %s", body)
		status, body = get("/v1/whoami")
		require.Equal(t, http.StatusServiceUnavailable, status, body)
		// After the first attempt's timeout, /readyz says why, and serve keeps listening.
		require.Eventually(t, func() bool { _, body = get("/readyz"); return strings.Contains(body, "did not answer within") },
			30*time.Second, 100*time.Millisecond, "%s / %s", body, errb.String())
		require.Contains(t, errb.String(), "the database is not available yet")
		require.NotContains(t, errb.String()+out.String(), "secret-pw")
		cancel()
		select {
		case code := <-exited:
			require.Equal(t, 4, code, "a serve stopped before its database came is DATABASE_UNAVAILABLE: %s", out.String())
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not stop")
		}
	})
}

// Issue 21, item 8: every refusal at the door has its code and says what is true and what to do,
// never the password, never the server's words alone.
func TestTheDoorSaysWhatIsWrongAndWhatToDo(t *testing.T) {
	t.Parallel()
	name := testdb.NewDatabase(t)
	b := testdb.PgBouncer(t, store.PoolerTransaction)
	wrongPassword := strings.Replace(b.DSN(name), "@127.0.0.1", "x@127.0.0.1", 1)
	direct := testdb.DSNOf(t, name)
	refused := "postgres://app:pw@" + freeAddr(t) + "/shop?sslmode=disable"
	for _, c := range []struct {
		what, dsn string
		exit      int
		code      string
		says      []string
	}{
		{"a wrong password", wrongPassword, 3, "AUTH_FAILED", []string{"authentication failed", "check the user and password"}},
		{"a database that does not exist", testdb.WithDatabase(direct, "no_such_db"), 3, "DATABASE_NOT_FOUND",
			[]string{`database "no_such_db" does not exist`, "check the database name in the URL"}},
		{"a URL parameter nobody knows", store.WithDSNParams(direct, [][2]string{{"x", "1"}}), 2, "USAGE",
			[]string{"parameter x is neither a connection setting nor a PostgreSQL setting", "remove it"}},
		{"sslmode=bogus", store.WithDSNParams(refused, [][2]string{{"sslmode", "bogus"}}), 2, "USAGE",
			[]string{"sslmode is not valid", "want disable, allow, prefer, require"}},
		{"connect_timeout=abc", store.WithDSNParams(direct, [][2]string{{"connect_timeout", "abc"}}), 2, "USAGE",
			[]string{"connect_timeout is not valid", "whole number of seconds"}},
		{"a host name that does not resolve", "postgres://app:pw@no-such-host.invalid/shop?sslmode=disable", 4, "DATABASE_UNAVAILABLE",
			[]string{"the host name no-such-host.invalid does not resolve", "check the host in the URL"}},
		{"nothing listening", refused, 4, "DATABASE_UNAVAILABLE", []string{"nothing listens there (connection refused)", "check that PostgreSQL"}},
	} {
		code, out, _ := run(t, nil, "--dsn", c.dsn, "keys", "--owner", "o", "--json")
		require.Equal(t, c.exit, code, "%s: %s", c.what, out)
		e := errorOf(t, out)
		require.Equal(t, c.code, e["code"], "%s: %s", c.what, out)
		msg := e["message"].(string)
		for _, s := range c.says {
			require.Contains(t, msg, s, c.what)
		}
		require.NotContains(t, out, "pw@", c.what)
		require.NotContains(t, out, "not a well-formed", c.what)
		require.Equal(t, 1, strings.Count(msg, "lookup")+boolInt(!strings.Contains(msg, "lookup")), "%s: the cause once: %s", c.what, msg)
		if c.code == "DATABASE_UNAVAILABLE" && c.what == "a host name that does not resolve" {
			require.NotContains(t, msg, "retry in a moment", "a host name does not start resolving by itself")
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Issue 21, item 8: a role without USAGE on the schema it is set to use is told which GRANT to
// ask for (not to set the schema it set), migrate by it too (not to CREATE the schema that
// exists), and /readyz says a refused connection as such.
func TestARoleWithoutUsageOnItsSchemaIsToldTheGrant(t *testing.T) {
	t.Parallel()
	name := testdb.NewEmptyDatabase(t)
	prodDB{name: name, dsn: testdb.DSNOf(t, name), env: map[string]string{"IDEMWORK_SCHEMA": "app"}}.ok(t, "--allow-writes", "migrate")
	role := testdb.NewRole(t, "nousage", name)
	asRole := store.WithDSNParams(testdb.DSNOf(t, name), [][2]string{{"user", role}})
	p := prodDB{name: name, dsn: asRole, env: map[string]string{"IDEMWORK_SCHEMA": "app"}}
	for _, args := range [][]string{{"keys", "--owner", "o"}, {"--allow-writes", "migrate"}} {
		code, out, _ := p.run(t, append(args, "--json")...)
		require.Equal(t, 3, code, "%v: %s", args, out)
		e := errorOf(t, out)
		require.Equal(t, "PERMISSION_DENIED", e["code"], out)
		require.Contains(t, e["message"], "lacks USAGE on schema app")
		require.Contains(t, e["message"], "GRANT USAGE")
		require.NotContains(t, e["message"], "set [database] schema")
		require.NotContains(t, e["message"], "CREATE SCHEMA")
	}
	testdb.AdminIn(t, name, "GRANT USAGE ON SCHEMA app TO "+pgx.Identifier{role}.Sanitize())
	code, out, _ := p.run(t, "keys", "--owner", "o", "--json")
	require.Equal(t, 3, code, out)
	require.Contains(t, errorOf(t, out)["message"], "GRANT SELECT ON ALL TABLES IN SCHEMA app", "the next thing it lacks, named")
}
