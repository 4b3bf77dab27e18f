package cli_test

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"idemwork/cli"
	"idemwork/internal/testdb"
)

// TestBenchCommandJSONShape runs `idemwork bench` at toy size: one JSON object with every
// workload (both sides, ratio, allocations), the storms, and the scratch database gone
// afterwards. No timing is asserted.
func TestBenchCommandJSONShape(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	code, out, errOut := runCLI(t, db, "bench", "--duration", "200ms", "--clients", "1", "--rows", "0", "--json")
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errOut, out)
	rep := jsonObject(t, out)

	workloads := rep["workloads"].([]any)
	require.Len(t, workloads, 3)
	names := map[string]bool{}
	for _, w := range workloads {
		c := w.(map[string]any)
		names[c["name"].(string)] = true
		require.Equal(t, float64(1), c["clients"])
		require.Equal(t, float64(0), c["rows"])
		require.Positive(t, c["ratio"].(float64))
		for _, side := range []string{"runner", "raw"} {
			s := c[side].(map[string]any)
			for _, f := range []string{"opsPerSec", "p50Ms", "p99Ms", "allocsPerOp"} {
				require.Positive(t, s[f].(float64), "%s %s %s", c["name"], side, f)
			}
		}
	}
	require.Equal(t, map[string]bool{"fresh-key": true, "feature-run": true, "replay-hit": true}, names)

	st := rep["storm"].(map[string]any)
	require.Positive(t, st["lone"].(map[string]any)["p50Ms"].(float64))
	runs := st["runs"].([]any)
	require.Len(t, runs, 3)
	for _, r := range runs {
		run := r.(map[string]any)
		require.Equal(t, true, run["verified"], "%v", run)
		require.Positive(t, run["wallMs"].(float64))
	}
	require.Len(t, rep["roundTrips"], 3)
	require.NotEmpty(t, rep["targets"])

	// The scratch database is gone.
	require.Zero(t, countRows(t, db, `SELECT count(*) FROM pg_database WHERE datname LIKE $1`,
		"idemwork_bench_"+strconv.Itoa(os.Getpid())+"_%"))
}

func TestBenchCommandUsage(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	for _, args := range [][]string{
		{"--dsn", db.DSN, "bench"}, // a URL without --allow-writes
		{"bench", "--clients", "0"},
		{"bench", "--clients", "two"},
		{"bench", "--rows", "-5"},
		{"bench", "--duration", "1ms"},
	} {
		var out, errb bytes.Buffer
		env := map[string]string{"XDG_CONFIG_HOME": t.TempDir()}
		code := cli.Run(context.Background(), args, &out, &errb, func(k string) string { return env[k] })
		require.Equal(t, 2, code, "%v: %s", args, errb.String())
	}
}
