package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/cli"
	"github.com/idemwork/idemwork/embedded"
)

// run executes one command line the way a user's shell would, with a private config home.
func run(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if env == nil {
		env = map[string]string{}
	}
	if _, ok := env["XDG_CONFIG_HOME"]; !ok {
		env["XDG_CONFIG_HOME"] = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := cli.Run(ctx, args, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m), "stdout must be exactly one JSON object: %q", s)
	return m
}

func clusterDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	return filepath.Join(dir, "pg")
}

func TestDBStartStatusURLStop(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	t.Cleanup(func() { _, _ = embedded.StopDataDir(context.Background(), dir) })

	code, out, errOut := run(t, nil, "--data-dir", dir, "db", "start", "--json")
	require.Equal(t, 0, code, errOut)
	started := decode(t, out)
	require.Equal(t, true, started["running"])
	pid := int(started["pid"].(float64))

	code, out, _ = run(t, nil, "--data-dir", dir, "db", "start", "--json")
	require.Equal(t, 0, code, "a second start while running is harmless")
	require.Equal(t, float64(pid), decode(t, out)["pid"])

	code, out, _ = run(t, nil, "--data-dir", dir, "db", "status", "--json")
	require.Equal(t, 0, code)
	st := decode(t, out)
	for _, k := range []string{"running", "dataDir", "socketDir", "port", "pid", "version"} {
		require.Contains(t, st, k)
	}
	require.Equal(t, true, st["running"])

	code, out, _ = run(t, nil, "--data-dir", dir, "db", "url")
	require.Equal(t, 0, code)
	require.Contains(t, out, "postgres:///idemwork?host=")

	code, out, _ = run(t, nil, "--data-dir", dir, "migrate", "--status", "--json")
	require.Equal(t, 0, code)
	require.Equal(t, float64(0), decode(t, out)["pending"])

	code, out, _ = run(t, nil, "--data-dir", dir, "db", "stop", "--json")
	require.Equal(t, 0, code)
	require.Equal(t, true, decode(t, out)["stopped"])
	require.True(t, gone(pid), "no server process remains after db stop")

	code, out, _ = run(t, nil, "--data-dir", dir, "db", "url", "--json")
	require.Equal(t, 3, code)
	require.Equal(t, "CLUSTER_NOT_RUNNING", decode(t, out)["error"].(map[string]any)["code"])
}

func gone(pid int) bool {
	for i := 0; i < 500; i++ {
		if _, err := os.Stat("/proc/" + itoa(pid)); os.IsNotExist(err) {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestAOneShotCommandStartsAStoppedClusterAndStopsItAgain(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	code, out, errOut := run(t, nil, "--data-dir", dir, "migrate", "--json")
	require.Equal(t, 0, code, errOut)
	sqlFiles, err := filepath.Glob("../migrations/*.sql")
	require.NoError(t, err)
	require.Equal(t, float64(len(sqlFiles)), decode(t, out)["applied"], "every migration of this binary")
	st, err := embedded.Inspect(dir)
	require.NoError(t, err)
	require.False(t, st.Running, "the cluster it started is stopped on exit")
}

func TestUsageErrorsExitTwoWithACodedJSONError(t *testing.T) {
	t.Parallel()
	code, out, _ := run(t, nil, "--json", "--no-such-flag")
	require.Equal(t, 2, code)
	e := decode(t, out)["error"].(map[string]any)
	require.Equal(t, "USAGE", e["code"])
	require.Equal(t, float64(400), e["status"])
}

func TestABadConfigFileIsReportedNotIgnored(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "c.toml")
	require.NoError(t, os.WriteFile(p, []byte("[databse]\n"), 0o600))
	code, out, _ := run(t, nil, "--json", "--config", p, "db", "status")
	require.Equal(t, 2, code, "a config mistake is the user's to fix: USAGE")
	require.Equal(t, "USAGE", decode(t, out)["error"].(map[string]any)["code"])
	require.Contains(t, decode(t, out)["error"].(map[string]any)["message"], "databse")
}

// TestDBURLOverTCPCarriesTheClustersPassword: with database.tcp_port set, db url --tcp prints the
// loopback URL with the generated password, and that URL (only that) gets in over TCP.
func TestDBURLOverTCPCarriesTheClustersPassword(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	t.Cleanup(func() { _, _ = embedded.StopDataDir(context.Background(), dir) })
	env := map[string]string{"IDEMWORK_CONFIG": filepath.Join(t.TempDir(), "c.toml")}
	require.NoError(t, os.WriteFile(env["IDEMWORK_CONFIG"], []byte("[database]\ntcp_port = -1\n"), 0o600))

	code, _, errOut := run(t, env, "--data-dir", dir, "db", "start")
	require.Equal(t, 0, code, errOut)
	code, out, _ := run(t, env, "--data-dir", dir, "db", "url", "--tcp")
	require.Equal(t, 0, code)
	tcpURL := strings.TrimSpace(out)
	require.Regexp(t, `^postgres://postgres:[A-Za-z0-9_-]{20,}@127\.0\.0\.1:\d+/idemwork\?sslmode=disable$`, tcpURL)
	code, out, _ = run(t, env, "--data-dir", dir, "db", "url", "--json")
	require.Equal(t, 0, code)
	require.Equal(t, tcpURL, decode(t, out)["tcpUrl"])

	code, out, errOut = run(t, nil, "--dsn", tcpURL, "--allow-writes", "--json", "keys", "--owner", "o")
	require.Equal(t, 0, code, "%s %s", out, errOut)
	noPassword := regexp.MustCompile(`//postgres:[A-Za-z0-9_-]+@`).ReplaceAllString(tcpURL, "//postgres@")
	code, out, _ = run(t, nil, "--dsn", noPassword, "--json", "keys", "--owner", "o")
	require.Equal(t, 3, code, "a refused login is AUTH_FAILED, exit 3: retrying does not cure it")
	require.Equal(t, "AUTH_FAILED", decode(t, out)["error"].(map[string]any)["code"])
	require.Contains(t, decode(t, out)["error"].(map[string]any)["message"], "password")
}
