package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/cli"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/storm"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// writeConfig writes a config file for one test.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestAStormThroughAPoolTooSmallForItExitsFourNamingTheError(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	cfg := writeConfig(t, "[database]\nmax_conns = 2\n")
	var out, errb bytes.Buffer
	env := map[string]string{"XDG_CONFIG_HOME": t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The holder sits 3 s in its transaction; the waiters behind it on the unique index hit the
	// 1 s statement_timeout (long enough that the storm's own start-up statements never do, on a
	// loaded machine).
	code := runWith(ctx, env, &out, &errb, "--dsn", testdb.WithParam(db.DSN, "statement_timeout", "1000"), "--allow-writes", "--config", cfg, "--json",
		"storm", "--n", "20", "--concurrency", "8", "--no-share", "--hold", "3s",
		"create", "--owner", "o", "--module", "NOTE", "--key", "small", "--title", "t")
	require.Equal(t, 4, code, "stderr: %s\nstdout: %s", errb.String(), out.String())
	s := jsonObject(t, out.String())
	require.Contains(t, s, "outcomes", "the storm ran: %s\nstderr: %s", out.String(), errb.String())
	outcomes := s["outcomes"].(map[string]any)
	require.Equal(t, float64(1), outcomes["EXECUTED"], "%v", outcomes)
	require.Positive(t, outcomes["DATABASE_UNAVAILABLE"], "%v", outcomes)
	require.NotContains(t, outcomes, "INTERNAL")
	errs := s["errors"].(map[string]any)
	require.Contains(t, errs["DATABASE_UNAVAILABLE"].(map[string]any)["sample"], "statement_timeout (SQLSTATE 57014")
	v := s["verdict"].(map[string]any)
	require.Equal(t, "failed", v["verdict"])
	require.Equal(t, "DATABASE_UNAVAILABLE", v["code"])
	require.Equal(t, true, v["database"].(map[string]any)["ok"], "what was written is right: %v", v)
	require.Equal(t, false, v["answers"].(map[string]any)["ok"])
	require.Equal(t, true, s["verified"].(map[string]any)["agrees"])
	require.Equal(t, "DATABASE_UNAVAILABLE", s["error"].(map[string]any)["code"])
	require.Contains(t, s["error"].(map[string]any)["message"], "requests failed: DATABASE_UNAVAILABLE")
	require.Contains(t, errb.String(), "statement_timeout", "stderr names the error too")
	lk := s["locks"].(map[string]any)
	require.Positive(t, lk["samples"])
}

// runWith is runCLI with a given environment and buffers.
func runWith(ctx context.Context, env map[string]string, out, errb *bytes.Buffer, args ...string) int {
	return cli.Run(ctx, args, out, errb, func(k string) string { return env[k] })
}

func TestAStormWhoseEveryRequestIsRejectedExitsThreeWithItsCode(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	code, out, errOut := runCLI(t, db, "create", "--owner", "r", "--module", "NOTE", "--title", "base", "--json")
	require.Equal(t, 0, code, errOut)
	id := jsonObject(t, out)["record"].(map[string]any)["id"].(string)
	code, _, errOut = runCLI(t, db, "patch", "--owner", "r", "--module", "NOTE", "--record", id, "--expect-revision", "1", "--title", "two")
	require.Equal(t, 0, code, errOut)

	code, out, errOut = runCLI(t, db, "storm", "--n", "50", "patch", "--owner", "r", "--module", "NOTE", "--record", id,
		"--expect-revision", "1", "--key", "stale", "--title", "three")
	require.Equal(t, 3, code, errOut)
	require.Regexp(t, `REVISION_CONFLICT\s+50  "record `+id+` is at revision 2, not the expected 1`, out)
	require.Contains(t, out, "database  ✓ nothing written: the key was ABSENT before the storm and still is")
	require.Contains(t, out, "verdict   ✗ no request succeeded: REVISION_CONFLICT × 50")
	require.Contains(t, errOut, "REVISION_CONFLICT: no request succeeded: REVISION_CONFLICT × 50")
}

func TestStormFlagsAreCheckedBeforeAnythingRuns(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	create := []string{"create", "--owner", "q", "--module", "NOTE", "--key", "kq", "--title", "t"}
	for _, flags := range [][]string{
		{"--processes", "0"},
		{"--processes", "-1"},
		{"--hold", "2m"},
		{"--servers", "2"}, // needs --via http
		{"--via", "http", "--servers", "99"},
		{"--via", "http", "--url", "http://127.0.0.1:1", "--servers", "2", "--token", "t"},
		{"--via", "http", "--url", "http://127.0.0.1:1", "--hold", "1s", "--token", "t"},
	} {
		args := append(append([]string{"storm", "--n", "5"}, flags...), create...)
		code, _, errOut := runCLI(t, db, args...)
		require.Equal(t, 2, code, "%v: %s", flags, errOut)
	}
	require.Zero(t, countRows(t, db, `SELECT count(*) FROM idempotency_record`))
}

func TestStormViaHTTPOnThreeServersExecutesOnceAndReportsEach(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	code, out, errOut := runCLI(t, db, "storm", "--n", "300", "--via", "http", "--servers", "3", "--no-share", "--json",
		"create", "--owner", "s", "--module", "NOTE", "--key", "three", "--title", "t")
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errOut, out)
	s := jsonObject(t, out)
	require.Equal(t, float64(1), s["outcomes"].(map[string]any)["EXECUTED"])
	servers := s["byServer"].([]any)
	require.Len(t, servers, 3)
	for _, sv := range servers {
		require.Equal(t, float64(100), sv.(map[string]any)["requests"])
	}
	require.Equal(t, "agrees", s["verdict"].(map[string]any)["verdict"])
	require.Equal(t, 1, countRows(t, db, `SELECT count(*) FROM record WHERE owner_id = 's'`))
}

func TestATokenOfAnotherOwnerIsRefusedUpFront(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	cfg := writeConfig(t, "[http.tokens]\n\"token-of-ann\" = \"ann\"\n")
	// The config maps the token to ann: refused without asking any server.
	code, _, errOut := runCLI(t, db, "--config", cfg, "storm", "--n", "5", "--via", "http", "--url", "http://127.0.0.1:1", "--token", "token-of-ann",
		"create", "--owner", "bob", "--module", "NOTE", "--title", "t")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "the token is mapped to owner ann in config [http.tokens], not to --owner bob")

	// A token this config does not know: the server says whose it is.
	url, _ := startServe(t, db, cfg)
	code, _, errOut = runCLI(t, db, "storm", "--n", "5", "--via", "http", "--url", url, "--token", "token-of-ann",
		"create", "--owner", "bob", "--module", "NOTE", "--title", "t")
	require.Equal(t, 2, code, errOut)
	require.Contains(t, errOut, "the token acts as owner ann at "+url+", not as --owner bob")
	require.Zero(t, countRows(t, db, `SELECT count(*) FROM idempotency_record`))
}

// startServe runs `idemwork serve` in this process on a loopback port; stop (also run when the
// test ends) cancels it as SIGINT would and returns its exit code and its log.
func startServe(t *testing.T, db *testdb.DB, cfg string) (url string, stop func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncWriter
	env := map[string]string{"XDG_CONFIG_HOME": t.TempDir()}
	exited := make(chan int, 1)
	go func() {
		exited <- cli.Run(ctx, []string{"--dsn", db.DSN, "--allow-writes", "--config", cfg, "--json", "serve", "--addr", "127.0.0.1:0"},
			&out, &errb, func(k string) string { return env[k] })
	}()
	var once sync.Once
	code := -1
	stop = func() (int, string) {
		once.Do(func() {
			cancel()
			select {
			case code = <-exited:
			case <-time.After(30 * time.Second):
				t.Error("serve did not stop")
			}
		})
		return code, errb.String()
	}
	t.Cleanup(func() { stop() })
	require.Eventually(t, func() bool {
		var m map[string]any
		if json.Unmarshal([]byte(out.String()), &m) != nil {
			return false
		}
		url, _ = m["listening"].(string)
		return url != ""
	}, time.Minute, 20*time.Millisecond, "serve never printed where it listens; stderr: %s", errb.String())
	return url, stop
}

func TestAStormWorkerNeverWritesToADatabaseItsSessionMayNotWrite(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	spec := stormtypes.Spec{Op: stormtypes.OpCreate, N: 3, Concurrency: 1, Processes: 1, Via: stormtypes.ViaInproc}
	spec.Create.Owner, spec.Create.Module, spec.Create.Key, spec.Create.Title = "w", "NOTE", "forged", "t"
	// A hand-made job without readOnly, naming the database.
	job, err := json.Marshal(map[string]any{"spec": spec, "dsn": db.DSN, "ttl": int64(time.Hour), "memMaxContentLength": 2000})
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"the database by --dsn, writes not allowed", []string{"--dsn", db.DSN, "storm-worker"}},
		{"no database named: the embedded cluster of an empty data dir is not running", []string{"--data-dir", t.TempDir(), "storm-worker"}},
	} {
		r, w, err := os.Pipe()
		require.NoError(t, err)
		cmd := exec.Command(exe, c.args...)
		cmd.Env = append(os.Environ(), storm.WorkerEnvVar+"=1", "XDG_CONFIG_HOME="+t.TempDir(), "IDEMWORK_DSN=", "DATABASE_URL=")
		cmd.Stdin = bytes.NewReader(job)
		cmd.ExtraFiles = []*os.File{r}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Start())
		_ = r.Close()
		_, _ = w.Write([]byte{'G'}) // released, in case it got that far
		_ = w.Close()
		err = cmd.Wait()
		require.Error(t, err, c.name)
		require.NotContains(t, stdout.String(), `"t":"event"`, c.name)
		if c.args[0] == "--dsn" {
			require.Contains(t, stderr.String(), "READ_ONLY", c.name)
		}
	}
	require.Zero(t, countRows(t, db, `SELECT count(*) FROM idempotency_record WHERE owner_id = 'w'`))
	require.Zero(t, countRows(t, db, `SELECT count(*) FROM record WHERE owner_id = 'w'`))
}
