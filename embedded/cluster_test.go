package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/embedded"
)

// tempDataDir returns a data dir the server user can reach (as root it runs as postgres).
func tempDataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	// t.TempDir nests in a 0700 per-test parent; both must be searchable by the server user.
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	return filepath.Join(dir, "pg")
}

func start(t *testing.T, opts embedded.Options) *embedded.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := embedded.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	return c
}

func ping(t *testing.T, dsn string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var one int
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT 1").Scan(&one))
	require.Equal(t, 1, one)
}

func processGone(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			if i := strings.LastIndexByte(string(b), ')'); i > 0 && b[i+2] == 'Z' {
				return true
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func TestStartCreatesClusterServesAndStops(t *testing.T) {
	t.Parallel()
	dir := tempDataDir(t)
	c := start(t, embedded.Options{DataDir: dir})
	require.True(t, c.Owned)
	require.FileExists(t, filepath.Join(dir, "PG_VERSION"))
	ping(t, c.DSN("postgres"))
	require.Empty(t, c.TCPDSN("postgres"), "no TCP unless asked")

	// A second start on the same data dir reuses the server, never duplicates it.
	again := start(t, embedded.Options{DataDir: dir})
	require.False(t, again.Owned)
	require.Equal(t, c.PID, again.PID)
	require.NoError(t, again.Stop(context.Background()), "stopping a reused cluster is a no-op")
	ping(t, c.DSN("postgres"))

	pid := c.PID
	require.NoError(t, c.Stop(context.Background()))
	require.True(t, processGone(pid, 5*time.Second))
	st, err := embedded.Inspect(dir)
	require.NoError(t, err)
	require.False(t, st.Running)
}

func TestStaleProcessFileOfAKilledServerIsRecovered(t *testing.T) {
	t.Parallel()
	dir := tempDataDir(t)
	c := start(t, embedded.Options{DataDir: dir})
	require.NoError(t, syscall.Kill(c.PID, syscall.SIGKILL))
	require.True(t, processGone(c.PID, 5*time.Second))
	require.FileExists(t, filepath.Join(dir, "postmaster.pid"), "SIGKILL leaves the pid file behind")

	next := start(t, embedded.Options{DataDir: dir})
	require.True(t, next.Owned)
	require.NotEqual(t, c.PID, next.PID)
	ping(t, next.DSN("postgres"))
}

func TestPidFileNamingAnotherProcessIsRecovered(t *testing.T) {
	t.Parallel()
	dir := tempDataDir(t)
	c := start(t, embedded.Options{DataDir: dir})
	require.NoError(t, c.Stop(context.Background()))
	// A pid file naming a live process that is not our server (a recycled pid): this test.
	stale := fmt.Sprintf("%d\n%s\n0\n5432\n/tmp\n\n0 0\nready\n", os.Getpid(), dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "postmaster.pid"), []byte(stale), 0o600))
	next := start(t, embedded.Options{DataDir: dir})
	require.True(t, next.Owned)
	ping(t, next.DSN("postgres"))
}

// TestHelperOwnerProcess is not a test: the owner-death test re-executes the test binary with
// it to start a cluster in a process that is then SIGKILLed.
func TestHelperOwnerProcess(t *testing.T) {
	dir := os.Getenv("IDEMWORK_HELPER_DATADIR")
	if dir == "" {
		return
	}
	c, err := embedded.Start(context.Background(), embedded.Options{DataDir: dir})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Println("PID", c.PID)
	time.Sleep(time.Hour)
}

func TestServerStopsWhenItsOwnerIsKilled(t *testing.T) {
	t.Parallel()
	dir := tempDataDir(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperOwnerProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "IDEMWORK_HELPER_DATADIR="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var pid int
	buf := make([]byte, 4096)
	deadline := time.Now().Add(time.Minute)
	acc := ""
	for pid == 0 && time.Now().Before(deadline) {
		n, err := out.Read(buf)
		acc += string(buf[:n])
		for _, line := range strings.Split(acc, "\n") {
			if strings.HasPrefix(line, "PID ") {
				pid, _ = strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "PID ")))
			}
		}
		require.NotContains(t, acc, "ERR")
		if err != nil {
			break
		}
	}
	require.NotZero(t, pid, "helper output: %s", acc)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.True(t, processGone(pid, 15*time.Second), "Pdeathsig must stop the server of a killed owner")

	next := start(t, embedded.Options{DataDir: dir})
	require.True(t, next.Owned)
	ping(t, next.DSN("postgres"))
}

func TestTakenTCPPortFallsBackToAFreeOne(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port

	c := start(t, embedded.Options{DataDir: tempDataDir(t), TCPPort: taken})
	require.NotEqual(t, taken, c.Port)
	require.Contains(t, c.TCPDSN("postgres"), "127.0.0.1:")
	ping(t, c.TCPDSN("postgres"))
}

func TestDetachedServerOutlivesItsStarterAndStopsByDataDir(t *testing.T) {
	t.Parallel()
	dir := tempDataDir(t)
	c, err := embedded.Start(context.Background(), embedded.Options{DataDir: dir, Detached: true})
	require.NoError(t, err)
	require.False(t, c.Owned, "nobody owns a detached server")
	t.Cleanup(func() { _, _ = embedded.StopDataDir(context.Background(), dir) })
	require.NoError(t, c.Stop(context.Background()))
	ping(t, c.DSN("postgres"))

	st, err := embedded.Inspect(dir)
	require.NoError(t, err)
	require.True(t, st.Running)
	require.Equal(t, c.PID, st.PID)

	was, err := embedded.StopDataDir(context.Background(), dir)
	require.NoError(t, err)
	require.True(t, was)
	require.True(t, processGone(c.PID, 5*time.Second))
	was, err = embedded.StopDataDir(context.Background(), dir)
	require.NoError(t, err)
	require.False(t, was)
}

func TestMissingBinariesSayWhatToInstall(t *testing.T) {
	t.Parallel()
	_, err := embedded.FindBinaries(context.Background(), "/nonexistent/pg/bin", 0)
	require.ErrorIs(t, err, embedded.ErrNoBinaries)
	require.Contains(t, err.Error(), "IDEMWORK_PG_BINDIR=/nonexistent/pg/bin")

	_, err = embedded.FindBinaries(context.Background(), "", 9)
	require.ErrorIs(t, err, embedded.ErrNoBinaries)
	require.Contains(t, err.Error(), "created by PostgreSQL 9")
	require.Contains(t, err.Error(), "install postgresql-9")

	b, err := embedded.FindBinaries(context.Background(), "", 0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, b.Major, embedded.MinMajor)
}

func TestUnreachableDataDirIsExplained(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Log("only root hands the server to another user; the reachability check does not apply")
		return
	}
	parent := filepath.Join(filepath.Dir(tempDataDir(t)), "private")
	require.NoError(t, os.Mkdir(parent, 0o700)) // owned by root: postgres cannot enter it
	_, err := embedded.Start(context.Background(), embedded.Options{DataDir: filepath.Join(parent, "pg")})
	require.Error(t, err)
	require.Contains(t, err.Error(), "cannot enter "+parent)
	require.Contains(t, err.Error(), "--data-dir")
}

func TestNonEmptyDirWithoutClusterIsRefused(t *testing.T) {
	t.Parallel()
	dir := tempDataDir(t)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644))
	_, err := embedded.Start(context.Background(), embedded.Options{DataDir: dir})
	require.Error(t, err)
	require.Contains(t, err.Error(), "not empty")
	require.FileExists(t, filepath.Join(dir, "notes.txt"), "never delete a user's files")
}

// TestLoopbackTCPAsksForThePasswordAndOtherOSUsersAreRefused: with TCP on, any local account can
// reach the port, so it asks for the postgres role's password (scram-sha-256), generated on first
// use and kept 0600 in the data dir; the socket stays reachable by the server's OS user alone.
func TestLoopbackTCPAsksForThePasswordAndOtherOSUsersAreRefused(t *testing.T) {
	t.Parallel()
	dir := tempDataDir(t)
	c := start(t, embedded.Options{DataDir: dir, TCPPort: -1})
	st, err := os.Stat(filepath.Join(dir, "idemwork-password"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	ping(t, c.TCPDSN("postgres")) // the URL db url --tcp prints carries the password

	ctx := context.Background()
	noPassword := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.Port)
	_, err = pgx.Connect(ctx, noPassword)
	require.ErrorContains(t, err, "password", "TCP without the password is refused")
	_, err = pgx.Connect(ctx, strings.Replace(noPassword, "postgres@", "postgres:guess@", 1))
	require.ErrorContains(t, err, "password authentication failed")

	// Restarted, the same password still works (it is kept, not regenerated).
	require.NoError(t, c.Stop(ctx))
	again := start(t, embedded.Options{DataDir: dir, TCPPort: -1})
	ping(t, again.TCPDSN("postgres"))
	require.Equal(t, strings.Split(c.TCPDSN("postgres"), "@")[0], strings.Split(again.TCPDSN("postgres"), "@")[0])

	t.Run("another OS user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("switching to another OS user (runuser -u nobody) needs root; CI runs as root")
		}
		bins, err := embedded.FindBinaries(ctx, "", 0)
		require.NoError(t, err)
		psql := filepath.Join(bins.Dir, "psql")
		asNobody := func(env []string, args ...string) (string, error) {
			cmd := exec.Command("runuser", append([]string{"-u", "nobody", "--", "env", "-i", "PGPASSFILE=/nonexistent", "PGCONNECT_TIMEOUT=5"},
				append(env, append([]string{psql, "-X", "-w", "-At", "-U", "postgres", "-d", "postgres"}, args...)...)...)...)
			cmd.Dir = "/"
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		port := strconv.Itoa(again.Port)
		// What the issue saw: any account ran a program as the server's user.
		out, err := asNobody(nil, "-h", "127.0.0.1", "-p", port, "-c", "COPY (SELECT 1) TO PROGRAM 'id'")
		require.Error(t, err, "nobody over TCP without the password: %s", out)
		require.Contains(t, out, "password")
		out, err = asNobody(nil, "-h", "::1", "-p", port, "-c", "SELECT 1")
		require.Error(t, err, out)
		out, err = asNobody(nil, "-h", again.SocketDir, "-p", port, "-c", "SELECT 1")
		require.Error(t, err, "nobody through the socket: %s", out)
		require.Contains(t, out, "Permission denied")
		// The refusal is the password's: with it, the same account gets in.
		pw := strings.TrimPrefix(strings.Split(again.TCPDSN("postgres"), "@")[0], "postgres://postgres:")
		out, err = asNobody([]string{"PGPASSWORD=" + pw}, "-h", "127.0.0.1", "-p", port, "-c", "SELECT 1")
		require.NoError(t, err, out)
		require.Equal(t, "1\n", out)
	})
}

// Issue 28: a data dir reached through a symlink or ".." is the same cluster. Before, `db status`
// through a symlink to a running cluster's directory compared /proc/PID/cwd (the real path) with
// the unresolved one, called the server's postmaster.pid stale and deleted it — and PostgreSQL
// shut down a minute later ("data directory lock file is invalid").
func TestADataDirReachedThroughASymlinkOrDotDotIsTheSameRunningCluster(t *testing.T) {
	t.Parallel()
	dir := tempDataDir(t)
	c, err := embedded.Start(context.Background(), embedded.Options{DataDir: dir, Detached: true})
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = embedded.StopDataDir(context.Background(), dir) })
	pidFile := filepath.Join(dir, "postmaster.pid")
	before, err := os.ReadFile(pidFile)
	require.NoError(t, err)

	link := filepath.Join(filepath.Dir(dir), "link-to-pg")
	require.NoError(t, os.Symlink(dir, link))
	dotdot := filepath.Join(filepath.Dir(dir), "pg", "..", "link-to-pg", ".")
	real, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	for _, path := range []string{link, dotdot} {
		st, err := embedded.Inspect(path)
		require.NoError(t, err)
		require.True(t, st.Running, "%s reaches the running cluster", path)
		require.Equal(t, c.PID, st.PID)
		require.Equal(t, real, st.DataDir, "the status names the real directory")

		again, err := embedded.Start(context.Background(), embedded.Options{DataDir: path})
		require.NoError(t, err)
		require.False(t, again.Owned, "a start through %s reuses the server, never starts a second one", path)
		require.Equal(t, c.PID, again.PID)

		attached, err := embedded.Attach(path)
		require.NoError(t, err)
		require.NotNil(t, attached)
		require.Equal(t, c.PID, attached.PID)
	}
	after, err := os.ReadFile(pidFile)
	require.NoError(t, err, "the server's postmaster.pid is still there")
	require.Equal(t, before, after)
	ping(t, c.DSN("postgres"))

	was, err := embedded.StopDataDir(context.Background(), link)
	require.NoError(t, err)
	require.True(t, was, "db stop through the symlink stops the server")
	require.True(t, processGone(c.PID, 10*time.Second))
}

// The pid file of a live postgres is never removed, whatever it says: one naming a running
// server of another directory refuses the start and names the file, and that server keeps
// running.
func TestAPidFileNamingAnotherLiveServerIsNeverRemoved(t *testing.T) {
	t.Parallel()
	a := start(t, embedded.Options{DataDir: tempDataDir(t)})
	dir := tempDataDir(t)
	require.NoError(t, os.MkdirAll(dir, 0o700))
	planted := fmt.Sprintf("%d\n%s\n0\n5432\n/tmp\n\n0 0\nready\n", a.PID, dir)
	pidFile := filepath.Join(dir, "postmaster.pid")
	require.NoError(t, os.WriteFile(pidFile, []byte(planted), 0o600))

	st, err := embedded.Inspect(dir)
	require.Error(t, err)
	require.False(t, st.Running)
	require.Contains(t, err.Error(), pidFile)
	require.Contains(t, err.Error(), "another directory")
	_, err = embedded.Start(context.Background(), embedded.Options{DataDir: dir})
	require.Error(t, err)
	got, err := os.ReadFile(pidFile)
	require.NoError(t, err, "not removed")
	require.Equal(t, planted, string(got))
	ping(t, a.DSN("postgres"))
}
