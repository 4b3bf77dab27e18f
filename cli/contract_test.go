package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/cli"
	"github.com/idemwork/idemwork/wire"
)

// SPEC §6 over the CLI: a replay prints the first call's object byte for byte, apart from
// outcome and waited.
func TestACLIReplayPrintsTheFirstCallsBytes(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	args := []string{"create", "--owner", "alice", "--module", "NOTE", "--key", "cli-bytes", "--title", "t <&>",
		"--summary", "a\nb", "--payload", `{"zz":1e3,"a":[1.0,-0],"n":{"y":"\u00e9"}}`}
	code, first, errOut := c.exec(args...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, first, `"outcome": "EXECUTED"`)
	require.Contains(t, first, `"zz": 1000`)
	args[len(args)-1] = `{"n":{"y":"é"},"a":[1.0,0],"zz":1000}`
	code, replay, errOut := c.exec(args...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, replay, `"outcome": "REPLAYED"`)
	strip := regexp.MustCompile(`(?m)^  "(outcome|waited)": .*\n`)
	require.Equal(t, strip.ReplaceAllString(first, ""), strip.ReplaceAllString(replay, ""))
}

// Observation 6: configuration and command-line mistakes are USAGE, exit 2, naming the key.
func TestConfigAndFlagMistakesAreUsageErrorsNamingTheKey(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		return p
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"malformed TOML", []string{"--config", write("bad.toml", "[database\nurl = 1")}, nil, "line"},
		{"unknown key", []string{"--config", write("unknown.toml", "[idempotency]\nttll = \"1h\"\n")}, nil, "idempotency.ttll"},
		{"ttl below a second", []string{"--config", write("ttl.toml", "[idempotency]\nttl = \"1ns\"\n")}, nil, "idempotency.ttl"},
		{"ttl above the maximum", []string{"--config", write("ttl2.toml", "[idempotency]\nttl = \"9000h\"\n")}, nil, "720h"},
		{"acquire timeout", []string{"--config", write("acq.toml", "[idempotency]\nacquire_timeout = \"0s\"\n")}, nil, "idempotency.acquire_timeout"},
		{"a missing config file", []string{"--config", filepath.Join(dir, "absent.toml")}, nil, "absent.toml"},
		{"bad IDEMWORK_ALLOW_WRITES", nil, map[string]string{"IDEMWORK_ALLOW_WRITES": "perhaps"}, "IDEMWORK_ALLOW_WRITES"},
	} {
		var out, errb bytes.Buffer
		env := map[string]string{"XDG_CONFIG_HOME": t.TempDir()}
		for k, v := range tc.env {
			env[k] = v
		}
		args := append(append([]string{"--dsn", c.db.DSN, "--json"}, tc.args...), "keys", "--owner", "alice")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		code := cli.Run(ctx, args, &out, &errb, func(k string) string { return env[k] })
		cancel()
		require.Equal(t, wire.ExitUsage, code, "%s: %s %s", tc.name, out.String(), errb.String())
		e := c.object(out.String())["error"].(map[string]any)
		require.Equal(t, "USAGE", e["code"], tc.name)
		require.Contains(t, e["message"], tc.want, tc.name)
	}
	e := c.fails(wire.ExitUsage, "create", "--owner", "alice", "--module", "NOTE", "--title", "t", "--key", "")
	require.Equal(t, "USAGE", e["code"])
	require.Contains(t, e["message"], "empty key")
	require.Zero(t, c.count(`SELECT count(*) FROM record`), "--key \"\" never runs an unkeyed write")
	e = c.fails(wire.ExitUsage, "storm", "--n", "5", "--processes", "-1", "create", "--owner", "alice", "--module", "NOTE", "--title", "t")
	require.Contains(t, e["message"], "--processes")
	require.Zero(t, c.count(`SELECT count(*) FROM record`))

	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), []string{"--dsn", "postgres://u:secret@[::1:bad/x", "--json", "keys", "--owner", "alice"}, &out, &errb,
		func(string) string { return "" })
	require.Equal(t, wire.ExitUsage, code, "an invalid DSN exits 2: %s", out.String())
	require.NotContains(t, out.String(), "secret")
}
