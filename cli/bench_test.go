package cli_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/cli"
	"github.com/idemwork/idemwork/embedded"
	"github.com/idemwork/idemwork/internal/testdb"
)

// TestBenchCommandJSONShape runs `idemwork bench` at toy size: one JSON object with every
// workload (both sides, ratio, allocations), the storms, and the scratch database gone
// afterwards. No timing is asserted.
func TestBenchCommandJSONShape(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	code, out, errOut := runCLI(t, db, "bench", "--duration", "200ms", "--clients", "1", "--rows", "0", "--no-fairness", "--storm-rounds", "1", "--json")
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
		require.Positive(t, c["efficiency"].(float64))
		trips := c["roundTrips"].(map[string]any)
		// The limit takes as many round trips as the write allows (a feature run reads, then
		// writes), and the runner as many (issue 27).
		want := map[string]float64{"fresh-key": 1, "feature-run": 2, "replay-hit": 1}[c["name"].(string)]
		require.Equal(t, want, trips["limit"], "%s: the limit's round trips", c["name"])
		require.Equal(t, want, trips["runner"], "%s: the runner's round trips", c["name"])
		for _, side := range []string{"runner", "raw", "limit"} {
			require.Equal(t, trips[side], c[side].(map[string]any)["roundTripsPerOp"], "%s %s", c["name"], side)
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
	require.Len(t, runs, 4) // inproc-share, inproc-no-share, 4-processes, inproc-floor
	for _, r := range runs {
		run := r.(map[string]any)
		require.Equal(t, true, run["verified"], "%v", run)
		require.Positive(t, run["wallMs"].(float64))
	}
	require.Len(t, rep["roundTrips"], 3)
	require.NotEmpty(t, rep["targets"])
	require.Nil(t, rep["setup"].(map[string]any)["proxy"], "no --rtt: no proxy")

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
		{"bench", "--rtt", "-1ms"},
		{"bench", "--rtt", "2s"},
		{"bench", "--storm-rounds", "0"},
	} {
		var out, errb bytes.Buffer
		env := map[string]string{"XDG_CONFIG_HOME": t.TempDir()}
		code := cli.Run(context.Background(), args, &out, &errb, func(k string) string { return env[k] })
		require.Equal(t, 2, code, "%v: %s", args, errb.String())
	}
}

// TestBenchThroughTheLatencyProxyOnTheEmbeddedCluster: with --rtt the bench reaches the embedded
// cluster it starts over loopback TCP (with the cluster's password) through the proxy, every
// side and the storms included: a SELECT 1 takes at least the round trip, each side's op at least
// its round trips, and the 4-process storm, whose workers get the proxy's URL in IDEMWORK_DSN,
// still verifies. The password never reaches the output, and the cluster stops afterwards.
func TestBenchThroughTheLatencyProxyOnTheEmbeddedCluster(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	t.Cleanup(func() { _, _ = embedded.StopDataDir(context.Background(), dir) })
	code, out, errOut := run(t, nil, "--data-dir", dir, "bench", "--rtt", "2ms", "--duration", "150ms", "--slice", "50ms",
		"--clients", "1", "--rows", "0", "--no-fairness", "--storm-rounds", "1", "--json")
	require.Equal(t, 0, code, "stderr: %s\nstdout: %s", errOut, out)
	rep := decode(t, out)
	setup := rep["setup"].(map[string]any)
	require.Equal(t, 2.0, setup["rttMs"])
	proxy := setup["proxy"].(map[string]any)
	require.Regexp(t, `^127\.0\.0\.1:\d+$`, proxy["listen"])
	require.Regexp(t, `^tcp 127\.0\.0\.1:\d+$`, proxy["upstream"], "the embedded cluster is reached over loopback TCP")
	require.GreaterOrEqual(t, setup["roundTripMs"].(float64), 2.0)
	for _, w := range rep["workloads"].([]any) {
		c := w.(map[string]any)
		for _, side := range []string{"runner", "raw", "limit"} {
			s := c[side].(map[string]any)
			require.GreaterOrEqual(t, s["p50Ms"].(float64), 2*s["roundTripsPerOp"].(float64), "%s %s", c["name"], side)
		}
	}
	for _, r := range rep["storm"].(map[string]any)["runs"].([]any) {
		run := r.(map[string]any)
		require.Equal(t, true, run["verified"], "%v", run)
	}
	pw, err := os.ReadFile(filepath.Join(dir, "idemwork-password"))
	require.NoError(t, err)
	require.NotEmpty(t, strings.TrimSpace(string(pw)))
	require.NotContains(t, out+errOut, strings.TrimSpace(string(pw)))
	st, err := embedded.Inspect(dir)
	require.NoError(t, err)
	require.False(t, st.Running, "the bench stops the cluster it started")
}

// The fairness cell's flood runs in a child process of the binary (the hidden bench-flood): it
// takes its job and token on stdin, parks, fires on the release line and reports.
func TestBenchFloodIsTheFairnessCellsChild(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.Header.Get("Authorization")))
	}))
	defer srv.Close()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "bench-flood")
	cmd.Env = append(os.Environ(), mainEnvVar+"=1", "XDG_CONFIG_HOME="+t.TempDir())
	cmd.Stdin = strings.NewReader(`{"url":"` + srv.URL + `","token":"tok-flood","n":12,"inFlight":4}` + "\ngo\n")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), errb.String())
	require.NotContains(t, strings.Join(cmd.Args, " "), "tok-flood", "the token travels on stdin")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 2, out.String())
	require.JSONEq(t, `{"ready":true}`, lines[0])
	require.Contains(t, lines[1], `"statuses":{"200":12}`)
}
