package testdb

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/internal/autofailover"
	"github.com/idemwork/idemwork/store"
)

// Formation is a pg_auto_failover formation of one test: a monitor and two nodes under
// pg_autoctl on loopback, as the server's unprivileged user, in a temporary directory, with
// the monitor's fast timeouts (an unplanned failover takes seconds). It is stopped, every
// process gone, and its directory removed when the test ends.
type Formation struct {
	*autofailover.Formation
	t testing.TB
}

// FormationTimeout bounds each wait of the formation helpers: start-up, a failover, a rejoin.
const FormationTimeout = 5 * time.Minute

// NewFormation starts a formation and returns once its secondary replicates synchronously.
func NewFormation(t testing.TB) *Formation {
	t.Helper()
	dir, err := os.MkdirTemp("", "idemwork-ha-")
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	// As root the servers run as postgres, which must be able to enter the directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("testdb: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), FormationTimeout)
	defer cancel()
	start := time.Now()
	f, err := autofailover.Start(ctx, autofailover.Options{Dir: dir, BinDir: os.Getenv("IDEMWORK_PG_BINDIR"), Fast: true})
	if err != nil {
		_ = os.RemoveAll(dir)
		t.Fatalf("testdb: start a pg_auto_failover formation: %v", err)
	}
	t.Logf("testdb: pg_auto_failover formation up in %s (monitor %s, nodes %s and %s)", time.Since(start).Round(time.Millisecond),
		store.RedactDSN(f.URL), f.Nodes[0].Addr(), f.Nodes[1].Addr())
	t.Cleanup(func() {
		f.Stop()
		_ = os.RemoveAll(dir)
	})
	return &Formation{Formation: f, t: t}
}

func (f *Formation) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), FormationTimeout)
}

func (f *Formation) fatal(what string, err error) {
	f.t.Helper()
	f.t.Fatalf("testdb: %s: %v\nmonitor log:\n%s\nnode1 log:\n%s\nnode2 log:\n%s", what, err,
		f.LogTail("monitor", 800), f.LogTail("node1", 1500), f.LogTail("node2", 1500))
}

// NewDatabase creates a database on the formation's primary, migrated to this binary's
// schema, and returns the formation URI of it. (It replicates to the secondary like any write;
// it is not dropped: the formation goes with the test.)
func (f *Formation) NewDatabase(name string) string {
	f.t.Helper()
	ctx, cancel := f.ctx()
	defer cancel()
	admin := f.URI("postgres")
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		f.fatal("connect to the primary", err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	conn.Close(ctx)
	if err != nil {
		f.fatal("create database "+name, err)
	}
	uri := f.URI(name)
	db, err := store.Open(ctx, uri, store.Options{Migrate: true})
	if err != nil {
		f.fatal("migrate "+name, err)
	}
	db.Close()
	return uri
}

// WaitSynchronous waits until a primary replicates synchronously to a healthy secondary and
// returns the primary.
func (f *Formation) WaitSynchronous() *autofailover.Node {
	f.t.Helper()
	ctx, cancel := f.ctx()
	defer cancel()
	st, err := f.Formation.WaitSynchronous(ctx)
	if err != nil {
		f.fatal("wait for a synchronous formation", err)
	}
	p, _ := st.Primary()
	return f.Node(p.Name)
}

// Primary is the settled primary.
func (f *Formation) Primary() *autofailover.Node {
	f.t.Helper()
	ctx, cancel := f.ctx()
	defer cancel()
	n, err := f.PrimaryNode(ctx)
	if err != nil {
		f.fatal("find the primary", err)
	}
	return n
}

// PerformFailover runs `pg_autoctl perform failover` and returns the new primary, once it
// replicates synchronously to the old one.
func (f *Formation) PerformFailover() *autofailover.Node {
	f.t.Helper()
	ctx, cancel := f.ctx()
	defer cancel()
	n, err := f.Formation.PerformFailover(ctx)
	if err != nil {
		f.fatal("perform failover", err)
	}
	return n
}

// KillPrimaryNode kills the primary's whole node (keeper, postmaster, backends) and returns it
// and the node the monitor promoted in its place, once that one accepts writes. The killed node
// stays down until RejoinNode.
func (f *Formation) KillPrimaryNode() (killed, promoted *autofailover.Node) {
	f.t.Helper()
	ctx, cancel := f.ctx()
	defer cancel()
	old, err := f.PrimaryNode(ctx)
	if err != nil {
		f.fatal("find the primary", err)
	}
	if err := f.KillNode(old); err != nil {
		f.fatal("kill "+old.Name, err)
	}
	st, err := f.WaitNewPrimary(ctx, old.Name, func(autofailover.State) bool { return true })
	if err != nil {
		f.fatal("wait for the promotion after "+old.Name+" died", err)
	}
	p, _ := st.Primary()
	return old, f.Node(p.Name)
}

// KillPrimaryPostmaster sends SIGKILL to the primary's postmaster and returns the node: its
// keeper restarts Postgres (crash recovery) and it stays the primary.
func (f *Formation) KillPrimaryPostmaster() *autofailover.Node {
	f.t.Helper()
	n := f.Primary()
	if err := f.KillPostmaster(n); err != nil {
		f.fatal("kill the postmaster of "+n.Name, err)
	}
	return n
}

// RejoinNode starts a killed node again and waits until it is the synchronous secondary.
func (f *Formation) RejoinNode(n *autofailover.Node) {
	f.t.Helper()
	if err := f.RestartNode(n); err != nil {
		f.fatal("restart "+n.Name, err)
	}
	f.WaitSynchronous()
}

// StallAndKill stalls node n's WAL senders (StallWALSenders) for d, then kills the node as
// KillPrimaryNode does, and returns the node promoted in its place.
func (f *Formation) StallAndKill(n *autofailover.Node, d time.Duration) *autofailover.Node {
	f.t.Helper()
	if p := f.WaitSynchronous(); p != n {
		f.t.Fatalf("testdb: %s is not the primary (%s is)", n.Name, p.Name)
	}
	StallWALSenders(f.t, f.NodeDSN(n, "postgres"))
	time.Sleep(d) // the stall is the fault: it lasts d
	ctx, cancel := f.ctx()
	defer cancel()
	if err := f.KillNode(n); err != nil {
		f.fatal("kill "+n.Name, err)
	}
	st, err := f.WaitNewPrimary(ctx, n.Name, func(autofailover.State) bool { return true })
	if err != nil {
		f.fatal("wait for the promotion after "+n.Name+" died", err)
	}
	p, _ := st.Primary()
	return f.Node(p.Name)
}
