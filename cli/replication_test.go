package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/cli"
	"github.com/idemwork/idemwork/internal/testdb"
)

// servedCLI is `idemwork serve` run in this process until the test ends.
type servedCLI struct {
	url      string
	out, err *syncWriter
}

func serveCLI(t *testing.T, env map[string]string, args ...string) *servedCLI {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &servedCLI{out: &syncWriter{}, err: &syncWriter{}}
	if env == nil {
		env = map[string]string{}
	}
	env["XDG_CONFIG_HOME"] = t.TempDir()
	exited := make(chan int, 1)
	go func() {
		exited <- cli.Run(ctx, append(args, "serve", "--dev-auth", "--addr", "127.0.0.1:0"), s.out, s.err, func(k string) string { return env[k] })
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})
	var line string
	require.Eventually(t, func() bool { line = s.out.String(); return strings.Contains(line, "listening on") },
		time.Minute, 20*time.Millisecond, "stderr: %s", s.err.String())
	s.url = strings.Fields(strings.SplitN(line, "listening on ", 2)[1])[0]
	return s
}

// post creates a record over HTTP and returns the status and body.
func (s *servedCLI) post(t *testing.T, key, title string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.url+"/v1/modules/NOTE/records", strings.NewReader(fmt.Sprintf(`{"title":%q}`, title)))
	require.NoError(t, err)
	req.Header.Set("X-Owner-Id", "o")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func (s *servedCLI) get(t *testing.T, path string) (int, map[string]any) {
	t.Helper()
	c := http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(s.url + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	var body map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	return resp.StatusCode, body
}

// doctorJSON runs `idemwork doctor --json` on dsn and returns its exit and report.
func doctorJSON(t *testing.T, env map[string]string, dsn string) (int, map[string]any) {
	t.Helper()
	code, out, errOut := run(t, env, "--dsn", dsn, "--allow-writes", "doctor", "--json")
	require.Contains(t, []int{0, 3}, code, "%s %s", out, errOut)
	return code, jsonObject(t, out)
}

// Issue 21, SPEC §13: with a primary and a pg_basebackup -R standby, doctor reports
// asynchronous replication and its risk (exit 3); with synchronous_standby_names naming the
// attached standby, synchronous (exit 0); require_synchronous_replication refuses writes with
// REPLICATION_UNSAFE (exit 3, HTTP 503) while no synchronous standby confirms commits — never
// hanging on a COMMIT that waits for one — and takes them again once it attaches; after the
// primary stops and the standby is promoted, a serve given both hosts keeps answering and names
// the node it is on now.
func TestReplicationYouCanSeeAndRefuse(t *testing.T) {
	t.Parallel()
	r := testdb.NewReplicated(t)
	r.OnPrimary(t, "postgres", "CREATE DATABASE idemwork")
	code, out, errOut := run(t, nil, "--dsn", r.PrimaryDSN("idemwork"), "--allow-writes", "migrate", "--json")
	require.Equal(t, 0, code, "%s %s", out, errOut)
	r.AwaitStandbys(t, 1, "async")
	dsn := r.PrimaryDSN("idemwork")

	// Asynchronous: a key acknowledged just before a failover can be lost.
	code, rep := doctorJSON(t, nil, dsn)
	require.Equal(t, 3, code)
	repl := rep["replication"].(map[string]any)
	require.Equal(t, false, repl["synchronous"])
	require.EqualValues(t, 1, repl["standbys"])
	require.Contains(t, repl["risk"], "replicate asynchronously")
	require.Equal(t, false, rep["writesSafe"])
	require.EqualValues(t, r.Primary.Port, rep["port"])
	for _, k := range []string{"server", "host", "port", "pooler", "schema", "readOnly", "migrations", "privileges", "replication"} {
		require.Contains(t, rep, k, "SPEC §10.2's doctor shape")
	}

	// Synchronous: the standby confirms every commit.
	r.SetSynchronousStandbyNames(t, "FIRST 1 ("+testdb.StandbyName+")")
	r.AwaitStandbys(t, 1, "sync")
	code, rep = doctorJSON(t, nil, dsn)
	require.Equal(t, 0, code, "%v", rep["reasons"])
	repl = rep["replication"].(map[string]any)
	require.Equal(t, true, repl["synchronous"])
	require.EqualValues(t, 1, repl["syncStandbys"])
	require.Equal(t, "", repl["risk"])

	requireSync := map[string]string{"IDEMWORK_REQUIRE_SYNC": "true"}
	w := prodDB{name: "idemwork", dsn: dsn, env: requireSync}
	require.Equal(t, "EXECUTED", w.ok(t, "--allow-writes", "create", "--owner", "o", "--module", "NOTE", "--key", "sync-1", "--title", "t")["outcome"])

	// The synchronous standby goes away: a write is refused at once, not left waiting on COMMIT.
	r.StopStandby(t)
	r.AwaitStandbys(t, 0, "")
	start := time.Now()
	code, out, _ = w.run(t, "--allow-writes", "create", "--owner", "o", "--module", "NOTE", "--key", "sync-2", "--title", "t", "--json")
	require.Equal(t, 3, code, out)
	e := errorOf(t, out)
	require.Equal(t, "REPLICATION_UNSAFE", e["code"])
	require.EqualValues(t, 503, e["status"])
	require.Contains(t, e["message"], "no synchronous standby confirms commits")
	require.Less(t, time.Since(start), 30*time.Second)
	code, rep = doctorJSON(t, requireSync, dsn)
	require.Equal(t, 3, code)
	require.Contains(t, strings.Join(toStrings(rep["reasons"]), "\n"), "REPLICATION_UNSAFE")

	// serve refuses with 503 until the synchronous standby attaches again, then writes.
	s := serveCLI(t, requireSync, "--dsn", dsn, "--allow-writes")
	status, body := s.post(t, "sync-3", "t")
	require.Equal(t, http.StatusServiceUnavailable, status, body)
	require.Contains(t, body, `"REPLICATION_UNSAFE"`)
	status, ready := s.get(t, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Equal(t, "REPLICATION_UNSAFE", ready["error"].(map[string]any)["code"])
	r.StartStandby(t)
	r.AwaitStandbys(t, 1, "sync")
	require.Eventually(t, func() bool { status, body = s.post(t, "sync-3", "t"); return status == http.StatusCreated },
		time.Minute, 200*time.Millisecond, "the write is taken once the synchronous standby confirms commits: %d %s", status, body)
	require.Contains(t, s.err.String(), "writes are accepted again")

	// Failover: the primary stops, the standby is promoted; a serve given both nodes follows.
	r.SetSynchronousStandbyNames(t, "")
	multi := r.MultiHostDSN("idemwork")
	f := serveCLI(t, nil, "--dsn", multi, "--allow-writes")
	require.Contains(t, f.out.String(), fmt.Sprintf("127.0.0.1:%d", r.Primary.Port), "the banner names the node it reached")
	require.Contains(t, f.out.String(), "acknowledged keys can be lost on failover")
	status, body = f.post(t, "before-failover", "t")
	require.Equal(t, http.StatusCreated, status, body)
	r.StopPrimary(t)
	r.Promote(t)
	require.Eventually(t, func() bool { status, body = f.post(t, "after-failover", "t"); return status == http.StatusCreated },
		time.Minute, 200*time.Millisecond, "serve keeps answering after the promotion: %d %s", status, body)
	now := fmt.Sprintf("127.0.0.1:%d", r.Standby.Port)
	require.Eventually(t, func() bool { return strings.Contains(f.err.String(), "the database is now reached at "+now) },
		time.Minute, 100*time.Millisecond, "serve's log names the node it is on now: %s", f.err.String())
	status, ready = f.get(t, "/readyz")
	require.Equal(t, http.StatusOK, status, "%v", ready)
	require.EqualValues(t, r.Standby.Port, ready["port"])
	code, rep = doctorJSON(t, nil, multi)
	require.EqualValues(t, r.Standby.Port, rep["port"], "doctor names the node the URL leads to now")
	_ = code
}

func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	return out
}
