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
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemwork/idemwork/embedded"
)

// Standby is a hot standby of the test server: a base backup taken with pg_basebackup -R,
// started as the server's unprivileged user on loopback (its socket and a TCP port). It streams
// from the test server, so a database created there appears here after WaitCaughtUp.
//
// Its roles are the test server's. Of the embedded cluster the standby's copy shares the postgres
// role's TCP password; of a server of IDEMWORK_TEST_DSN it knows no password (that server may
// trust, or keep a password of its own), so DSN reaches it over its private socket instead, as
// the DSN's user.
type Standby struct {
	cluster *embedded.Cluster
	// user is the role the test server's DSN logs in as; overSocket is set when the standby's
	// TCP password is not that role's (a server of IDEMWORK_TEST_DSN).
	user       string
	overSocket bool
}

// HotStandby returns the standby of the test binary, making it on first use; Main stops it.
func HotStandby(t testing.TB) *Standby {
	t.Helper()
	shared.ensure(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.standby == nil && shared.standErr == nil {
		shared.standby, shared.standErr = startStandby()
	}
	if shared.standErr != nil && shared.cluster == nil {
		// Only a server set up for it gives a base backup (a replication entry in its
		// pg_hba.conf, a role with REPLICATION, max_wal_senders): without one the standby's
		// tests have nothing to run against.
		t.Skipf("testdb: IDEMWORK_TEST_DSN's server gave no hot standby (%v); the standby tests need a base backup of it "+
			"(a pg_hba.conf replication entry for loopback and a role with REPLICATION), or unset IDEMWORK_TEST_DSN to use the embedded cluster", shared.standErr)
	}
	if shared.standErr != nil {
		t.Fatalf("testdb: hot standby: %v", shared.standErr)
	}
	return shared.standby
}

func startStandby() (*Standby, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cred, err := embedded.ServerCredential("")
	if err != nil {
		return nil, err
	}
	admin, err := pgconn.ParseConfig(shared.adminDSN)
	if err != nil {
		return nil, err
	}
	bins, err := embedded.FindBinaries(ctx, os.Getenv("IDEMWORK_PG_BINDIR"), 0)
	if err != nil {
		return nil, err
	}
	// WaitCaughtUp's marker table, made before the backup so the standby has it from the start.
	conn, err := pgx.Connect(ctx, shared.adminDSN)
	if err != nil {
		return nil, err
	}
	_, err = conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS testdb_standby_marker (n bigserial PRIMARY KEY)`)
	conn.Close(ctx)
	if err != nil {
		return nil, err
	}
	dataDir := filepath.Join(shared.tmpDir, "standby")
	// pg_basebackup runs as the server's user: it fills a directory of that user's own.
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dataDir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	// -R writes standby.signal and primary_conninfo; -X stream takes the WAL the backup needs.
	cmd := exec.CommandContext(ctx, filepath.Join(bins.Dir, "pg_basebackup"), "--pgdata", dataDir, "-R",
		"--wal-method", "stream", "--checkpoint", "fast", "--no-sync", "--dbname", shared.adminDSN)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("pg_basebackup: %v: %s", err, bytes.TrimSpace(out.Bytes()))
	}
	c, err := embedded.Start(ctx, embedded.Options{DataDir: dataDir, TCPPort: -1,
		Settings: map[string]string{"max_connections": "1000", "hot_standby": "on"}})
	if err != nil {
		return nil, fmt.Errorf("start the standby: %w", err)
	}
	return &Standby{cluster: c, user: admin.User, overSocket: shared.cluster == nil}, nil
}

func (s *Standby) stop() { _ = s.cluster.Stop(context.Background()) }

// DSN reaches database name on the standby: over loopback TCP with the cluster's password when
// the test server is the embedded cluster, otherwise over its private socket (see Standby).
func (s *Standby) DSN(name string) string {
	if s.overSocket {
		return s.SocketDSN(name)
	}
	return s.cluster.TCPDSN(name)
}

// OverTCP reports whether DSN reaches the standby over loopback TCP (see Standby).
func (s *Standby) OverTCP() bool { return !s.overSocket }

// SocketDSN reaches database name on the standby over its private socket, as the test server's
// DSN's user.
func (s *Standby) SocketDSN(name string) string {
	u, err := url.Parse(s.cluster.DSN(name))
	if err != nil {
		panic(fmt.Sprintf("testdb: the embedded cluster's DSN: %v", err)) // the cluster builds it
	}
	q := u.Query()
	q.Set("user", s.user)
	u.RawQuery = q.Encode()
	return u.String()
}

// WaitCaughtUp waits until the standby has replayed everything the primary wrote so far: it
// writes a marker row on the primary and waits for the standby to see it (WAL replays in order).
// Comparing WAL positions would not do: the test server commits with synchronous_commit = off,
// and an idle primary's insert position can sit past a page header no record will fill.
func (s *Standby) WaitCaughtUp(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	primary, err := pgx.Connect(ctx, shared.adminDSN)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	var mark int64
	err = primary.QueryRow(ctx, `INSERT INTO testdb_standby_marker DEFAULT VALUES RETURNING n`).Scan(&mark)
	primary.Close(ctx)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	standby, err := pgx.Connect(ctx, s.SocketDSN("postgres"))
	if err != nil {
		t.Fatalf("testdb: standby: %v", err)
	}
	defer standby.Close(ctx)
	for {
		var seen int64
		if err := standby.QueryRow(ctx, `SELECT coalesce(max(n), 0) FROM testdb_standby_marker`).Scan(&seen); err != nil {
			t.Fatalf("testdb: standby: %v", err)
		}
		if seen >= mark {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("testdb: the standby did not replay the primary's marker %d within 60 s", mark)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
