package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
)

// mainEnvVar makes this test binary run the whole command line as main does (TestMain).
const mainEnvVar = "IDEMWORK_TEST_RUN_MAIN"

// cmdlines reads the argument vector of every process, as ps -eo args does.
func cmdlines(t *testing.T) map[int]string {
	t.Helper()
	out := map[int]string{}
	dirs, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		out[pid] = strings.ReplaceAll(string(b), "\x00", " ")
	}
	return out
}

// parentOf reads a process's parent pid (0 when it is gone).
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// Issue 28: during a storm given --token and a DSN with a password on its command line, with
// --via http --servers 2, no process's argument vector (what ps -eo args shows every local
// user) holds the token or the password: the storm hides its own, and its children get theirs
// through stdin and the environment. The command says why --token is a bad idea.
func TestPsShowsNoTokenAndNoPasswordDuringAStormWithServers(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	const token, password = "tok-ps-d0e5a1f7c3", "pw-ps-8b1e44c2a9"
	// The socket trusts its user: a password in the URL is sent only if the server asks, and
	// the storm runs as it would with one.
	dsn := db.DSN + "&password=" + password
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "--dsn", dsn, "--allow-writes", "storm", "--token", token, "--n", "40", "--concurrency", "4",
		"--via", "http", "--servers", "2", "--hold", "3s", "create", "--owner", "ps-owner", "--module", "NOTE", "--key", "ps-key", "--title", "t", "--json")
	cmd.Env = append(os.Environ(), mainEnvVar+"=1", "XDG_CONFIG_HOME="+t.TempDir(), "IDEMWORK_DSN=", "DATABASE_URL=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	// Wait until the storm and both its servers run, then read every process's arguments.
	var seen map[int]string
	servers := 0
	deadline := time.Now().Add(2 * time.Minute)
	for servers < 2 {
		select {
		case err := <-done:
			t.Fatalf("the storm ended before its servers were seen (%v): %s %s", err, stdout.String(), stderr.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "the storm's two servers never ran")
		seen = cmdlines(t)
		servers = 0
		for pid, args := range seen {
			if strings.Contains(args, "storm-worker") && parentOf(pid) == cmd.Process.Pid {
				servers++
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Contains(t, seen[cmd.Process.Pid], "--token x", "the storm's own arguments, hidden: %s", seen[cmd.Process.Pid])
	for pid, args := range seen {
		require.NotContains(t, args, token, "pid %d shows the token: %s", pid, args)
		require.NotContains(t, args, password, "pid %d shows the password: %s", pid, args)
	}
	require.NoError(t, <-done, "%s %s", stdout.String(), stderr.String())
	require.Contains(t, stdout.String(), `"verified"`)
	require.Contains(t, stderr.String(), "--token on the command line can be read by other local users")
	require.Contains(t, stderr.String(), "--dsn carries a password")
}

// A config holding tokens that other users can read is USAGE naming chmod 600, unless
// --allow-insecure-config; a --token-file others can read is refused the same way.
func TestAReadableConfigWithTokensIsUsageNamingChmod600(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(cfg, []byte("[http.tokens]\n\"token-of-ann-42\" = \"ann\"\n"), 0o600))
	require.NoError(t, os.Chmod(cfg, 0o644))
	dataDir := filepath.Join(t.TempDir(), "pg")
	code, out, _ := run(t, nil, "--config", cfg, "--json", "db", "status", "--data-dir", dataDir)
	require.Equal(t, 2, code, out)
	e := decode(t, out)["error"].(map[string]any)
	require.Equal(t, "USAGE", e["code"])
	require.Contains(t, e["message"], "chmod 600 "+cfg)
	require.NotContains(t, out, "token-of-ann-42")

	code, out, _ = run(t, nil, "--config", cfg, "--allow-insecure-config", "--json", "db", "status", "--data-dir", dataDir)
	require.Equal(t, 0, code, out)
	require.Equal(t, false, decode(t, out)["running"])

	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("token-of-ann-42\n"), 0o600))
	require.NoError(t, os.Chmod(tokenFile, 0o644))
	code, out, _ = run(t, nil, "--json", "storm", "--n", "2", "--via", "http", "--url", "http://127.0.0.1:1", "--token-file", tokenFile,
		"create", "--owner", "ann", "--module", "NOTE", "--title", "t")
	require.Equal(t, 2, code, out)
	require.Contains(t, decode(t, out)["error"].(map[string]any)["message"], "chmod 600 "+tokenFile)
}
