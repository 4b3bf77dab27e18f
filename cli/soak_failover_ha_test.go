//go:build ha

package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/cli"
)

// SPEC §10.2, §13: `soak --failover` without a database starts a pg_auto_failover formation,
// injects planned failovers and killed primaries among its rounds (every round one here, the
// two kinds in turn), reports them, finds no duplicate and no violation, and leaves nothing
// running or on disk.
func TestSoakFailoverCountsPlannedAndUnplannedFailovers(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	// As root the formation runs as postgres, which must be able to enter the temp dirs.
	require.NoError(t, os.Chmod(tmp, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(tmp), 0o755))
	env := map[string]string{"XDG_CONFIG_HOME": t.TempDir(), "TMPDIR": tmp}
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	code := cli.Run(ctx, []string{"--json", "soak", "--failover", "--rounds", "2", "--faults", "terminate,kill-server,failover,kill-primary",
		"--rates", "failover=0.5,kill-primary=0.5,kill-server=0.3"}, &out, &errb, func(k string) string { return env[k] })
	t.Logf("stderr:\n%s", tail(errb.String(), 4000))
	require.Equal(t, 0, code, "stdout: %s", out.String())
	var res struct {
		Rounds     int            `json:"rounds"`
		Faults     map[string]int `json:"faults"`
		Executions int64          `json:"executions"`
		Duplicates int64          `json:"duplicates"`
		Violations int64          `json:"violations"`
		Database   string         `json:"database"`
		Problems   []string       `json:"problems"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &res), out.String())
	require.Equal(t, 2, res.Rounds)
	require.Equal(t, 2, res.Faults["failover"]+res.Faults["kill-primary"], "every round failed over: %v", res.Faults)
	require.Positive(t, res.Faults["failover"], "a planned failover: %v", res.Faults)
	require.Positive(t, res.Faults["kill-primary"], "an unplanned one: %v", res.Faults)
	require.Equal(t, int64(2), res.Executions, "each round's key executed once")
	require.Zero(t, res.Duplicates)
	require.Zero(t, res.Violations, "%v", res.Problems)
	require.Contains(t, errb.String(), "soak: formation up in")

	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasPrefix(e.Name(), "idemwork-soak-ha-"), "the formation's directory %s is removed", filepath.Join(tmp, e.Name()))
	}
	require.Empty(t, processesNaming(tmp), "no process of the formation is left")
}

// processesNaming lists the live processes whose command line names dir.
func processesNaming(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || e.Name() == "self" || e.Name() == "thread-self" {
			continue
		}
		if cmd := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(cmd, dir) {
			out = append(out, e.Name()+": "+cmd)
		}
	}
	return out
}
