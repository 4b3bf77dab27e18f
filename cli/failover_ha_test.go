//go:build ha

package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/cli"
	"github.com/idemwork/idemwork/internal/failover"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/internal/workbench"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/storm"
)

// stallFor is how long replication stalls before the primary dies: a congested link. The door
// issue measured 21 % of acknowledged keys executed again after it, with an async standby.
const stallFor = 1500 * time.Millisecond

// SPEC §13: on pg_auto_failover (synchronous replication, automatic failover), keyed creates
// and storms sent through two serve processes across a planned failover and across the
// primary's node killed while replication stalled keep exactly-once: after every key is
// retried, no key executed twice, no acknowledged key lost, no partial row, verify clean. The
// same load against a plain async standby promoted after its primary was killed shows what the
// engine buys: acknowledged keys lost, and executed a second time by their retries.
func TestExactlyOnceAcrossFailover(t *testing.T) {
	t.Parallel()
	var formationDir string
	t.Cleanup(func() {
		// The formation was stopped with its subtest: nothing of it may be left.
		require.NotEmpty(t, formationDir, "the formation started")
		require.Empty(t, processesNaming(formationDir), "every pg_autoctl and postgres process of the formation is gone")
		_, err := os.Stat(formationDir)
		require.True(t, os.IsNotExist(err), "the formation's directory is removed")
	})
	t.Run("pg_auto_failover", func(t *testing.T) {
		t.Parallel()
		f := testdb.NewFormation(t)
		formationDir = f.Dir()
		first := f.WaitSynchronous()
		requireSynchronous(t, f.URI("postgres"), first.Port)
		uri := f.NewDatabase("idemwork")
		requireClusterView(t, uri, first.Name, first.Addr())
		requireDoctorNames(t, uri, first.Name, first.Addr())
		urls := startServers(t, uri, 2)
		rep := runScenario(t, uri, urls, []failover.Fault{
			{Name: "pg_autoctl perform failover", Failover: true, Inject: func(context.Context) error {
				second := f.PerformFailover()
				requireClusterView(t, uri, second.Name, second.Addr())
				requireDoctorNames(t, uri, second.Name, second.Addr())
				return nil
			}},
			{Name: "replication stalled 1.5 s, then the primary's node killed", Failover: true, Inject: func(ctx context.Context) error {
				primary := f.Primary()
				f.StallAndKill(primary, stallFor)
				return nil
			}},
			{Name: "the killed node rejoins as the secondary", Inject: func(context.Context) error {
				for _, n := range f.Nodes {
					if !n.Running() {
						f.RejoinNode(n)
					}
				}
				return nil
			}},
			{Name: "the primary's postmaster killed (its keeper restarts it)", Inject: func(context.Context) error {
				f.KillPrimaryPostmaster()
				f.WaitSynchronous()
				return nil
			}},
		})
		require.Equal(t, 2, rep.Failovers)
		require.Positive(t, rep.Acknowledged)
		require.Positive(t, rep.Unavailable+rep.CommitUnknown+rep.NoAnswer, "the faults reached the clients: %+v", rep.Outcomes)
		require.Zero(t, rep.ExecutedTwice, "no key executed twice: %v", rep.Examples)
		require.Zero(t, rep.Lost, "no acknowledged key lost: %v", rep.Examples)
		require.Zero(t, rep.Partial, "no partial row: %v", rep.Examples)
		require.Zero(t, rep.Unresolved, "every key settled by its retries: %v", rep.Examples)
		require.Zero(t, rep.Violations, "verify --all is clean")
	})
	t.Run("async standby", func(t *testing.T) {
		t.Parallel()
		p := testdb.NewAsyncPair(t)
		uri := p.NewDatabase("idemwork")
		urls := startServers(t, uri, 2)
		rep := runScenario(t, uri, urls, []failover.Fault{
			{Name: "replication stalled 1.5 s, then the primary killed and the standby promoted", Failover: true, Inject: func(context.Context) error {
				testdb.StallWALSenders(t, p.Primary.DSN("postgres"))
				time.Sleep(stallFor) // the stall is the fault: it lasts this long
				p.KillPrimary()
				p.Promote()
				return nil
			}},
		})
		require.Equal(t, 1, rep.Failovers)
		require.Positive(t, rep.Lost, "acknowledged keys were lost with the async standby: %+v", rep)
		require.Positive(t, rep.ExecutedTwice, "and their retries executed them again: %+v", rep)
	})
}

// requireSynchronous checks, on the node the formation URI reaches, that it is the primary
// named and that it waits for a synchronous standby.
func requireSynchronous(t *testing.T, uri string, port int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, uri)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var at int
	var recovering bool
	var names, syncState string
	require.NoError(t, conn.QueryRow(ctx, `SELECT inet_server_port(), pg_is_in_recovery(), current_setting('synchronous_standby_names'),
		coalesce((SELECT string_agg(sync_state, ',') FROM pg_stat_replication), '')`).Scan(&at, &recovering, &names, &syncState))
	require.Equal(t, port, at, "the formation URI reaches the primary")
	require.False(t, recovering)
	require.NotEmpty(t, names, "the primary names its standby as synchronous")
	require.Contains(t, []string{"sync", "quorum"}, syncState, "the standby replicates synchronously")
}

// requireClusterView checks what the workbench's Cluster view reads of the formation through
// its URI: the monitor's view (found from the local keeper of the node it reached), the
// primary named, synchronous, and this session on the primary.
func requireClusterView(t *testing.T, uri, primary, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := store.Open(ctx, uri, store.Options{ReadOnly: true})
	require.NoError(t, err)
	defer db.Close()
	st, err := workbench.Cluster(db, "").Cluster(ctx)
	require.NoError(t, err)
	require.Equal(t, "monitor", st.Source, "the monitor is found from the node's keeper: %v", st.Notes)
	p, ok := st.Primary()
	require.True(t, ok, "%+v", st.Nodes)
	require.Equal(t, primary, p.Name)
	require.True(t, p.Connected, "the session is on the primary")
	require.Equal(t, addr, st.Connected)
	require.True(t, st.Synchronous, "%+v", st)
	require.Len(t, st.Nodes, 2)
}

// requireDoctorNames checks issue 24's acceptance: `idemwork doctor --json --dsn <the
// formation's URI>` names the primary (the node connected, host:port) and synchronous: true,
// and its cluster section is the monitor's view with that node as the primary. Right after a
// failover the new primary may still be settling its standby: doctor is asked again until it
// says so, for at most a minute.
func requireDoctorNames(t *testing.T, uri, primary, addr string) {
	t.Helper()
	type report struct {
		Host        string `json:"host"`
		Port        int    `json:"port"`
		Replication struct {
			Synchronous             bool   `json:"synchronous"`
			SynchronousStandbyNames string `json:"synchronousStandbyNames"`
		} `json:"replication"`
		WritesSafe bool `json:"writesSafe"`
		Cluster    struct {
			Source    string `json:"source"`
			Connected string `json:"connected"`
			Nodes     []struct {
				Name, Addr, Role string
				Connected        bool
			} `json:"nodes"`
		} `json:"cluster"`
	}
	ask := func() (int, report, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out, errb bytes.Buffer
		code := cli.Run(ctx, []string{"--dsn", uri, "--json", "doctor"}, &out, &errb, func(string) string { return "" })
		var r report
		_ = json.Unmarshal(out.Bytes(), &r)
		return code, r, out.String() + errb.String()
	}
	deadline := time.Now().Add(time.Minute)
	code, r, raw := ask()
	for (r.Host+":"+strconv.Itoa(r.Port) != addr || !r.Replication.Synchronous) && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond) // polling doctor's answer, bounded by the deadline
		code, r, raw = ask()
	}
	t.Logf("doctor: %s", raw)
	require.Equal(t, addr, r.Host+":"+strconv.Itoa(r.Port), "doctor names the primary the formation's URI reaches")
	require.True(t, r.Replication.Synchronous, "doctor: synchronous")
	require.Contains(t, r.Replication.SynchronousStandbyNames, "pgautofailover_standby_", "pg_auto_failover's own standby names")
	require.Equal(t, 0, code, "writes are safe on a synchronous formation")
	require.True(t, r.WritesSafe)
	require.Equal(t, "monitor", r.Cluster.Source, "doctor reads the monitor's view")
	require.Equal(t, addr, r.Cluster.Connected)
	var named []string
	for _, n := range r.Cluster.Nodes {
		if n.Role == "primary" {
			named = append(named, n.Name)
			require.Equal(t, addr, n.Addr)
			require.True(t, n.Connected)
		}
	}
	require.Equal(t, []string{primary}, named, "the monitor's primary")
	require.Len(t, r.Cluster.Nodes, 2)
}

func runScenario(t *testing.T, uri string, urls []string, faults []failover.Fault) failover.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := failover.Run(ctx, failover.Options{URLs: urls, DSN: uri, Faults: faults, Between: 150, Rate: 150, Progress: testWriter{t},
		Verify: func(ctx context.Context) (int64, error) { return verifyAll(ctx, uri) }})
	js, _ := json.Marshal(rep)
	t.Logf("report: %s", js)
	require.NoError(t, err)
	return rep
}

// verifyAll runs `idemwork verify --all --json` on the database.
func verifyAll(ctx context.Context, dsn string) (int64, error) {
	var out, errb bytes.Buffer
	code := cli.Run(ctx, []string{"--dsn", dsn, "--json", "verify", "--all"}, &out, &errb, func(string) string { return "" })
	var rep struct {
		Violations *int64 `json:"violations"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.Violations == nil {
		return 0, fmt.Errorf("verify --all exited %d: %s %s", code, out.String(), errb.String())
	}
	return *rep.Violations, nil
}

// startServers starts n `idemwork serve --dev-auth` processes (this test binary, which runs the
// CLI when storm.WorkerEnvVar is set) on dsn and returns their base URLs; each is stopped when
// the test ends.
func startServers(t *testing.T, dsn string, n int) []string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	var urls []string
	for i := range n {
		cmd := exec.Command(exe, "--allow-writes", "--json", "serve", "--addr", "127.0.0.1:0", "--dev-auth")
		cmd.Env = append(os.Environ(), storm.WorkerEnvVar+"=1", "IDEMWORK_DSN="+dsn, "XDG_CONFIG_HOME="+t.TempDir(), "DATABASE_URL=")
		log, err := os.Create(fmt.Sprintf("%s/serve-%d.log", t.TempDir(), i))
		require.NoError(t, err)
		cmd.Stderr = log
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		exited := make(chan struct{})
		started := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // Pdeathsig follows the forking thread
			if err := cmd.Start(); err != nil {
				started <- err
				close(exited)
				return
			}
			started <- nil
			_ = cmd.Wait()
			close(exited)
		}()
		require.NoError(t, <-started)
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
			if t.Failed() {
				b, _ := os.ReadFile(log.Name())
				t.Logf("serve %d's log ends with:\n%s", i, tail(string(b), 3000))
			}
		})
		var banner struct {
			Listening string `json:"listening"`
		}
		require.NoError(t, json.NewDecoder(stdout).Decode(&banner))
		require.NotEmpty(t, banner.Listening)
		go func() { _, _ = io.Copy(io.Discard, stdout) }()
		urls = append(urls, banner.Listening)
	}
	return urls
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
