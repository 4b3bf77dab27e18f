package testdb

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/embedded"
	"github.com/idemwork/idemwork/internal/autofailover"
	"github.com/idemwork/idemwork/store"
)

// AsyncPair is a primary and a plain asynchronous hot standby made from it with pg_basebackup
// -R, of one test (not the binary's shared server): what a team has before it adopts an HA
// engine. Both are durable (fsync, synchronous_commit on locally) and listen on loopback TCP
// with the primary's password, which the standby's copy shares. Killing the primary and
// promoting the standby is the failover it can do. Both are stopped, and their directory
// removed, when the test ends.
type AsyncPair struct {
	Primary, Standby *embedded.Cluster
	t                testing.TB
	dir              string
}

// NewAsyncPair starts the primary, takes the standby's base backup and starts it streaming.
func NewAsyncPair(t testing.TB) *AsyncPair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "idemwork-async-")
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	p := &AsyncPair{t: t, dir: dir}
	t.Cleanup(p.stop)
	settings := map[string]string{"max_connections": "300", "wal_level": "replica", "max_wal_senders": "10", "hot_standby": "on"}
	p.Primary, err = embedded.Start(ctx, embedded.Options{DataDir: filepath.Join(dir, "primary"), TCPPort: -1, Durable: true, Settings: settings})
	if err != nil {
		t.Fatalf("testdb: start the primary: %v", err)
	}
	standbyDir := filepath.Join(dir, "standby")
	if err := baseBackup(ctx, p.Primary.DSN("postgres"), standbyDir); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	p.Standby, err = embedded.Start(ctx, embedded.Options{DataDir: standbyDir, TCPPort: -1, Durable: true, Settings: settings})
	if err != nil {
		t.Fatalf("testdb: start the standby: %v", err)
	}
	return p
}

// baseBackup makes dir a standby of the server at dsn (pg_basebackup -R, as the server user).
func baseBackup(ctx context.Context, dsn, dir string) error {
	cred, err := embedded.ServerCredential("")
	if err != nil {
		return err
	}
	bins, err := embedded.FindBinaries(ctx, os.Getenv("IDEMWORK_PG_BINDIR"), 0)
	if err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bins.Dir, "pg_basebackup"), "--pgdata", dir, "-R",
		"--wal-method", "stream", "--checkpoint", "fast", "--dbname", dsn)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pg_basebackup: %v: %s", err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

func (p *AsyncPair) stop() {
	for _, c := range []*embedded.Cluster{p.Standby, p.Primary} {
		if c != nil {
			_ = c.Stop(context.Background())
		}
	}
	_ = os.RemoveAll(p.dir)
}

// URI reaches database on whichever of the two accepts writes, as an application configured
// for a manual failover would: both hosts, target_session_attrs=read-write.
func (p *AsyncPair) URI(database string) string {
	u, err := url.Parse(p.Primary.TCPDSN(database))
	if err != nil {
		p.t.Fatalf("testdb: %v", err)
	}
	u.Host = fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d", p.Primary.Port, p.Standby.Port)
	u.RawQuery = "target_session_attrs=read-write&sslmode=disable"
	return u.String()
}

// NewDatabase creates database name on the primary, migrated to this binary's schema, and
// returns the pair's URI of it.
func (p *AsyncPair) NewDatabase(name string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := store.EnsureDatabase(ctx, p.Primary.DSN("postgres"), name); err != nil {
		p.t.Fatalf("testdb: %v", err)
	}
	db, err := store.Open(ctx, p.Primary.DSN(name), store.Options{Migrate: true})
	if err != nil {
		p.t.Fatalf("testdb: migrate %s: %v", name, err)
	}
	db.Close()
	return p.URI(name)
}

// KillPrimary sends SIGKILL to the primary's postmaster and every backend at once (the machine
// died) and waits until they are gone.
func (p *AsyncPair) KillPrimary() {
	p.t.Helper()
	if err := autofailover.KillProcessTree(p.Primary.PID); err != nil {
		p.t.Fatalf("testdb: kill the primary: %v", err)
	}
}

// Promote promotes the standby and waits until it accepts writes.
func (p *AsyncPair) Promote() {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.Standby.DSN("postgres"))
	if err != nil {
		p.t.Fatalf("testdb: standby: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_promote(true, 60)`); err != nil {
		p.t.Fatalf("testdb: promote: %v", err)
	}
	for {
		var recovering bool
		if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&recovering); err != nil {
			p.t.Fatalf("testdb: standby: %v", err)
		}
		if !recovering {
			return
		}
		select {
		case <-ctx.Done():
			p.t.Fatalf("testdb: the standby was still in recovery a minute after pg_promote")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// StallWALSenders stops (SIGSTOP) every WAL sender of the server at dsn — replication stalls
// as over a congested link: an asynchronous primary keeps acknowledging commits its standby
// never receives, a synchronous one keeps them waiting — and returns the function that lets
// them go on (SIGCONT). Killing the server while they are stopped needs no resume.
func StallWALSenders(t testing.TB, dsn string) (resume func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_replication`)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	if len(pids) == 0 {
		t.Fatalf("testdb: %s has no WAL sender to stall", store.RedactDSN(dsn))
	}
	starts := map[int32]string{}
	for _, pid := range pids {
		if st, ok := autofailover.StartTime(int(pid)); ok {
			starts[pid] = st
			_ = syscall.Kill(int(pid), syscall.SIGSTOP)
		}
	}
	resume = func() {
		for pid, st := range starts {
			if now, ok := autofailover.StartTime(int(pid)); ok && now == st {
				_ = syscall.Kill(int(pid), syscall.SIGCONT)
			}
		}
	}
	// A stopped WAL sender outlives a server killed without it and holds its shared memory:
	// whatever the test does, none is left stopped.
	t.Cleanup(resume)
	return resume
}
