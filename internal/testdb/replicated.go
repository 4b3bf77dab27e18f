package testdb

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/embedded"
)

// StandbyName is the application_name the standby of a Replicated pair streams as: what
// synchronous_standby_names names it by.
const StandbyName = "standby1"

// Replicated is a primary of a test's own with a hot standby made by pg_basebackup -R, both on
// loopback TCP with the cluster's password: for what a shared server must not have done to it
// (synchronous_standby_names set, the standby stopped, a promotion). Stopped when the test ends.
type Replicated struct {
	Primary, Standby *embedded.Cluster
	standbyDir       string
	bins             embedded.Binaries
	cred             *syscall.Credential
}

// NewReplicated starts a primary (commits with synchronous_commit = on, as production does), takes
// a base backup of it with pg_basebackup -R streaming as StandbyName, and starts the standby.
func NewReplicated(t testing.TB) *Replicated {
	t.Helper()
	shared.ensure(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cred, err := embedded.ServerCredential("")
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	bins, err := embedded.FindBinaries(ctx, os.Getenv("IDEMWORK_PG_BINDIR"), 0)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	dir, err := os.MkdirTemp(shared.tmpDir, "replicated-")
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	r := &Replicated{bins: bins, cred: cred, standbyDir: filepath.Join(dir, "standby")}
	r.Primary, err = embedded.Start(ctx, embedded.Options{DataDir: filepath.Join(dir, "primary"), TCPPort: -1,
		Settings: map[string]string{"wal_level": "replica", "max_wal_senders": "5", "synchronous_commit": "on", "max_connections": "200",
			"wal_sender_timeout": "5s"}})
	if err != nil {
		t.Fatalf("testdb: start the primary: %v", err)
	}
	t.Cleanup(func() {
		_ = r.Standby.Stop(context.Background())
		_ = r.Primary.Stop(context.Background())
		_ = os.RemoveAll(dir)
	})
	if err := os.Mkdir(r.standbyDir, 0o700); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	if cred != nil {
		if err := os.Chown(r.standbyDir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatalf("testdb: %v", err)
		}
	}
	conninfo := fmt.Sprintf("host=%s port=%d user=postgres application_name=%s", r.Primary.SocketDir, r.Primary.Port, StandbyName)
	if out, err := r.run(ctx, "pg_basebackup", "--pgdata", r.standbyDir, "-R", "--wal-method", "stream", "--checkpoint", "fast",
		"--no-sync", "--dbname", conninfo); err != nil {
		t.Fatalf("testdb: pg_basebackup: %v: %s", err, out)
	}
	r.StartStandby(t)
	return r
}

func (r *Replicated) run(ctx context.Context, bin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(r.bins.Dir, bin), args...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if r.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.cred}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return string(bytes.TrimSpace(out.Bytes())), err
}

// StartStandby starts the standby (again): it reconnects to the primary and streams.
func (r *Replicated) StartStandby(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	port := -1
	if r.Standby != nil {
		port = r.Standby.Port // the same address again: a multi-host URL names it
	}
	s, err := embedded.Start(ctx, embedded.Options{DataDir: r.standbyDir, TCPPort: port,
		Settings: map[string]string{"hot_standby": "on", "max_connections": "200", "synchronous_commit": "on"}})
	if err != nil {
		t.Fatalf("testdb: start the standby: %v", err)
	}
	r.Standby = s
}

// StopStandby stops the standby (a fast shutdown): the primary's walsender goes away.
func (r *Replicated) StopStandby(t testing.TB) {
	t.Helper()
	if err := r.Standby.Stop(context.Background()); err != nil {
		t.Fatalf("testdb: stop the standby: %v", err)
	}
}

// StopPrimary stops the primary (a fast shutdown), as a failover's first step.
func (r *Replicated) StopPrimary(t testing.TB) {
	t.Helper()
	if err := r.Primary.Stop(context.Background()); err != nil {
		t.Fatalf("testdb: stop the primary: %v", err)
	}
}

// Promote promotes the standby (pg_ctl promote) and waits until it takes writes.
func (r *Replicated) Promote(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := r.run(ctx, "pg_ctl", "promote", "-D", r.standbyDir, "-w", "-t", "60"); err != nil {
		t.Fatalf("testdb: pg_ctl promote: %v: %s", err, out)
	}
	r.await(t, r.Standby.DSN("postgres"), "SELECT NOT pg_is_in_recovery()", "the promoted standby takes writes")
}

// PrimaryDSN, StandbyDSN reach database name on each node over loopback TCP.
func (r *Replicated) PrimaryDSN(name string) string { return r.Primary.TCPDSN(name) }
func (r *Replicated) StandbyDSN(name string) string { return r.Standby.TCPDSN(name) }

// MultiHostDSN names both nodes, primary first, with target_session_attrs=read-write: new
// connections go to whichever takes writes.
func (r *Replicated) MultiHostDSN(name string) string {
	u, _ := url.Parse(r.Primary.TCPDSN(name))
	u.Host = fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", r.Primary.Port, r.Standby.Port)
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	u.RawQuery = q.Encode()
	return u.String()
}

// OnPrimary runs sql as the superuser on the primary's database name.
func (r *Replicated) OnPrimary(t testing.TB, name, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, r.Primary.DSN(name))
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("testdb: %s: %v", sql, err)
	}
}

// SetSynchronousStandbyNames sets synchronous_standby_names on the primary ("" resets it).
func (r *Replicated) SetSynchronousStandbyNames(t testing.TB, names string) {
	t.Helper()
	if names == "" {
		r.OnPrimary(t, "postgres", "ALTER SYSTEM RESET synchronous_standby_names")
	} else {
		r.OnPrimary(t, "postgres", "ALTER SYSTEM SET synchronous_standby_names = "+quoteLiteral(names))
	}
	r.OnPrimary(t, "postgres", "SELECT pg_reload_conf()")
	r.await(t, r.Primary.DSN("postgres"), "SELECT current_setting('synchronous_standby_names') = "+quoteLiteral(names),
		"the primary reloaded synchronous_standby_names")
}

// AwaitStandbys waits until the primary has n standbys attached, streaming, with sync_state
// state (any when "").
func (r *Replicated) AwaitStandbys(t testing.TB, n int, state string) {
	t.Helper()
	cond := "state = 'streaming'"
	if state != "" {
		cond += " AND sync_state = " + quoteLiteral(state)
	}
	r.await(t, r.Primary.DSN("postgres"), "SELECT count(*) = "+strconv.Itoa(n)+" FROM pg_stat_replication WHERE "+cond,
		fmt.Sprintf("%d standby(s) %s", n, state))
}

// await polls sql (one boolean) on dsn until it is true, for at most a minute.
func (r *Replicated) await(t testing.TB, dsn, sql, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			var ok bool
			err = conn.QueryRow(ctx, sql).Scan(&ok)
			conn.Close(ctx)
			cancel()
			if err == nil && ok {
				return
			}
		} else {
			cancel()
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("testdb: waited a minute for %s (%s): %v", what, sql, last)
}

func quoteLiteral(s string) string {
	return "'" + string(bytes.ReplaceAll([]byte(s), []byte("'"), []byte("''"))) + "'"
}
