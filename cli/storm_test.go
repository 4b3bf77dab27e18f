package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/cli"
	"github.com/idemwork/idemwork/internal/argvmask"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/storm"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// TestMain serves the package's tests and, re-executed by a multi-process storm (which runs
// this test binary as its `idemwork storm-worker` children), the worker command itself.
func TestMain(m *testing.M) {
	if os.Getenv(storm.WorkerEnvVar) == "1" {
		// The command line as given: os.Args shows its secrets blanked since package argvmask's
		// initializer ran, as `idemwork` itself parses argvmask.Args (cli.Main).
		os.Exit(cli.Run(context.Background(), argvmask.Args()[1:], os.Stdout, os.Stderr, os.Getenv))
	}
	if os.Getenv(mainEnvVar) == "1" { // the whole binary, as main runs it (secrets_test.go)
		os.Exit(cli.Main())
	}
	testdb.Main(m)
}

// runCLI executes a command line against db (writes allowed) with a private config home.
func runCLI(t *testing.T, db *testdb.DB, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"XDG_CONFIG_HOME": t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	full := append([]string{"--dsn", db.DSN, "--allow-writes"}, args...)
	code := cli.Run(ctx, full, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func jsonObject(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	require.NoError(t, dec.Decode(&m), "stdout must be one JSON object: %q", s)
	require.False(t, dec.More(), "stdout must be exactly one JSON object: %q", s)
	return m
}

func countRows(t *testing.T, db *testdb.DB, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func TestStormCommandFourHundredRequestsFromFourProcesses(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	code, out, errOut := runCLI(t, db, "storm", "--n", "400", "--processes", "4",
		"create", "--owner", "o", "--module", "NOTE", "--key", "k", "--title", "t", "--json")
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errOut, out)
	s := jsonObject(t, out)

	require.Equal(t, float64(400), s["requests"])
	outcomes := s["outcomes"].(map[string]any)
	require.Equal(t, float64(1), outcomes["EXECUTED"], "%v", outcomes)
	total := 0.0
	for name, n := range outcomes {
		require.Contains(t, []string{"EXECUTED", "REPLAYED", "JOINED"}, name)
		total += n.(float64)
	}
	require.Equal(t, float64(400), total)
	require.Equal(t, map[string]any{"recordIds": float64(1), "revisions": float64(1), "executionIds": float64(0)}, s["distinct"])
	lat := s["latencyMs"].(map[string]any)
	for _, p := range []string{"p50", "p95", "p99", "max"} {
		require.Positive(t, lat[p].(float64), p)
	}
	require.Positive(t, s["wallMs"].(float64))
	v := s["verified"].(map[string]any)
	require.Equal(t, true, v["agrees"], "%v", v)
	require.Equal(t, "SUCCEEDED", v["keyStatus"])
	require.Equal(t, float64(1), v["revisions"])
	require.Equal(t, float64(0), v["executions"])
	require.Equal(t, float64(1), v["auditEvents"])
	require.Len(t, s["byProcess"], 4)
	require.NotContains(t, s, "error")

	require.Equal(t, 1, countRows(t, db, `SELECT count(*) FROM record WHERE owner_id = 'o'`))
	require.Equal(t, 1, countRows(t, db, `SELECT count(*) FROM record_revision WHERE owner_id = 'o'`))
}

func TestStormCommandPatchActionAndHumanOutput(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	code, out, errOut := runCLI(t, db, "create", "--owner", "p", "--module", "NOTE", "--title", "base", "--json")
	require.Equal(t, 0, code, errOut)
	id := jsonObject(t, out)["record"].(map[string]any)["id"].(string)

	code, out, errOut = runCLI(t, db, "storm", "--n", "120", "--processes", "2", "--no-share",
		"patch", "--owner", "p", "--module", "NOTE", "--record", id, "--expect-revision", "1", "--key", "kp", "--title", "next")
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errOut, out)
	require.Contains(t, out, "storm NOTE:record:"+id+":patch")
	require.Regexp(t, `EXECUTED\s+1\n`, out)
	require.NotContains(t, out, "JOINED")
	require.Contains(t, out, "verdict   ✓ agrees")
	require.Contains(t, out, "p50 ")

	code, out, errOut = runCLI(t, db, "storm", "--n", "80", "--via", "http", "--fail-first",
		"action", "--owner", "p", "--module", "NOTE", "--record", id, "--feature", "F01", "--key", "ka", "--json")
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errOut, out)
	s := jsonObject(t, out)
	require.Equal(t, float64(1), s["outcomes"].(map[string]any)["EXECUTED"], "%v", s["outcomes"])
	require.Equal(t, float64(1), s["outcomes"].(map[string]any)["INJECTED_FAULT"], "%v", s["outcomes"])
	require.Equal(t, true, s["verified"].(map[string]any)["agrees"])
	require.Equal(t, float64(1), s["distinct"].(map[string]any)["executionIds"])
	require.Equal(t, 1, countRows(t, db, `SELECT count(*) FROM feature_execution WHERE owner_id = 'p'`))
	require.Equal(t, 3, countRows(t, db, `SELECT revision FROM record WHERE owner_id = 'p' AND id = $1`, id))
}

func TestStormCommandExitCodes(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	create := []string{"create", "--owner", "q", "--module", "NOTE", "--key", "kq", "--title", "t"}

	for _, args := range [][]string{
		append([]string{"storm"}, create...),                                    // no --n
		{"storm", "--n", "5"},                                                   // no operation
		append([]string{"storm", "--n", "5", "--via", "pigeon"}, create...),     // bad --via
		append([]string{"storm", "--n", "0"}, create...),                        // no requests
		append([]string{"storm", "--n", "5", "--url", "http://x:1"}, create...), // --url without --via http
	} {
		code, _, errOut := runCLI(t, db, args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
	}
	code, _, errOut := runCLI(t, db, "storm-worker")
	require.Equal(t, 2, code, "run by hand, the worker refuses: %s", errOut)

	// Every request rejected: the summary still prints (with the error), exit 3.
	code, out, errOut := runCLI(t, db, "storm", "--n", "10", "--json", "create", "--owner", "q", "--module", "IDENTITY", "--key", "kl", "--title", "t")
	require.Equal(t, 3, code, errOut)
	s := jsonObject(t, out)
	require.Equal(t, map[string]any{"LEGACY_WRITE_DISABLED": float64(10)}, s["outcomes"])
	require.Equal(t, "LEGACY_WRITE_DISABLED", s["error"].(map[string]any)["code"])
	require.Contains(t, errOut, "LEGACY_WRITE_DISABLED")

	// The database contradicts the responses (a second audit event under the key): exit 4.
	code, _, errOut = runCLI(t, db, append([]string{"storm", "--n", "10"}, create...)...)
	require.Equal(t, 0, code, errOut)
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO audit_event (owner_id, id, module_code, record_id, action, idempotency_key, detail, at)
		SELECT owner_id, id || 'x', module_code, record_id, action, idempotency_key, detail, at FROM audit_event WHERE owner_id = 'q'`)
	require.NoError(t, err)
	code, out, errOut = runCLI(t, db, append([]string{"storm", "--n", "10", "--json"}, create...)...)
	require.Equal(t, 4, code, errOut)
	s = jsonObject(t, out)
	require.Equal(t, false, s["verified"].(map[string]any)["agrees"])
	require.Equal(t, string(stormtypes.CodeDisagrees), s["error"].(map[string]any)["code"])
	require.Contains(t, errOut, "2 audit events carry the key")
}

func TestServeCommandAnswersAndStormsOverItsURL(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	cfgPath := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("[http.tokens]\n\"serve-token-ann\" = \"ann\"\n"), 0o600))

	// Refused before anything starts: not loopback.
	code, _, errOut := runCLI(t, db, "--config", cfgPath, "serve", "--addr", "0.0.0.0:0")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "--allow-remote")

	url, stop := startServe(t, db, cfgPath)
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), url)

	// The storm command against that URL, with the config's token for the owner.
	code, sout, serr := runCLI(t, db, "--config", cfgPath, "storm", "--n", "60", "--via", "http", "--url", url,
		"create", "--owner", "ann", "--module", "NOTE", "--key", "over-serve", "--title", "t", "--json")
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", serr, sout)
	s := jsonObject(t, sout)
	require.Equal(t, float64(1), s["outcomes"].(map[string]any)["EXECUTED"])
	require.Equal(t, true, s["verified"].(map[string]any)["agrees"])

	// An owner without a token gets a usage error, not a guess.
	code, _, serr = runCLI(t, db, "--config", cfgPath, "storm", "--n", "5", "--via", "http", "--url", url,
		"create", "--owner", "nobody", "--module", "NOTE", "--title", "t")
	require.Equal(t, 2, code, serr)

	// SIGINT/SIGTERM cancel the command's context: a graceful stop, exit 0.
	code, log := stop()
	require.Equal(t, 0, code, log)
	require.Contains(t, log, "method=POST path=/v1/modules/NOTE/records status=201 outcome=EXECUTED")
	require.Contains(t, log, "owner=ann")
	require.NotContains(t, log, "serve-token-ann")
	require.Contains(t, log, "stopped")
}

type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
