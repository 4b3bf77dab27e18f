//go:build ha

package autofailover_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/autofailover"
	"github.com/idemwork/idemwork/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// A formation starts synchronous, fails over when asked and when its primary's node dies,
// keeps every acknowledged commit across both, takes a dead node back as its secondary, and
// leaves no process behind when it stops.
func TestAFormationFailsOverAndKeepsWhatItAcknowledged(t *testing.T) {
	start := time.Now()
	var dir string
	t.Run("formation", func(t *testing.T) {
		f := testdb.NewFormation(t)
		dir = f.Dir()
		ctx, cancel := context.WithTimeout(context.Background(), testdb.FormationTimeout)
		defer cancel()

		first := f.WaitSynchronous()
		conn := connect(t, ctx, f.URI("postgres"))
		requireNode(t, ctx, conn, first)
		var names, syncState string
		require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('synchronous_standby_names'),
			(SELECT string_agg(sync_state, ',') FROM pg_stat_replication)`).Scan(&names, &syncState))
		require.NotEmpty(t, names, "the primary names its standby as synchronous")
		require.Contains(t, []string{"sync", "quorum"}, syncState, "the standby replicates synchronously")
		_, err := conn.Exec(ctx, `CREATE TABLE acked (n int PRIMARY KEY)`)
		require.NoError(t, err)
		insert(t, ctx, conn, 1)
		conn.Close(ctx)

		t.Logf("planned failover from %s", first.Name)
		began := time.Now()
		second := f.PerformFailover()
		t.Logf("planned failover took %s", time.Since(began).Round(time.Millisecond))
		require.NotEqual(t, first.Name, second.Name, "pg_autoctl perform failover moves the primary")
		conn = connect(t, ctx, f.URI("postgres"))
		requireNode(t, ctx, conn, second)
		insert(t, ctx, conn, 2)
		conn.Close(ctx)

		began = time.Now()
		killed, promoted := f.KillPrimaryNode()
		t.Logf("unplanned failover (node %s killed) took %s", killed.Name, time.Since(began).Round(time.Millisecond))
		require.Equal(t, second.Name, killed.Name)
		require.Equal(t, first.Name, promoted.Name)
		conn = connect(t, ctx, f.URI("postgres"))
		requireNode(t, ctx, conn, promoted)
		var rows []int
		r, err := conn.Query(ctx, `SELECT n FROM acked ORDER BY n`)
		require.NoError(t, err)
		rows, err = pgx.CollectRows(r, pgx.RowTo[int])
		require.NoError(t, err)
		require.Equal(t, []int{1, 2}, rows, "every commit the dead primary acknowledged is on the promoted node")
		insert(t, ctx, conn, 3)
		conn.Close(ctx)

		began = time.Now()
		f.RejoinNode(killed)
		t.Logf("%s rejoined as the secondary in %s", killed.Name, time.Since(began).Round(time.Millisecond))

		began = time.Now()
		crashed := f.KillPrimaryPostmaster()
		require.Equal(t, promoted.Name, crashed.Name)
		conn = waitConnect(t, ctx, f.URI("postgres"))
		requireNode(t, ctx, conn, crashed) // its keeper restarted it: no failover
		insert(t, ctx, conn, 4)
		conn.Close(ctx)
		t.Logf("the primary's postmaster was back in %s", time.Since(began).Round(time.Millisecond))
	})
	require.NotEmpty(t, dir, "the formation started")
	// The formation's cleanup ran with the subtest: nothing of it may be left running.
	require.Empty(t, processesUnder(dir), "every pg_autoctl and postgres process of the formation is gone")
	_, err := os.Stat(dir)
	require.True(t, os.IsNotExist(err), "the formation's directory is removed")
	t.Logf("the whole test took %s", time.Since(start).Round(time.Millisecond))
}

func connect(t *testing.T, ctx context.Context, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	return conn
}

// waitConnect connects, retrying while the primary is restarting.
func waitConnect(t *testing.T, ctx context.Context, dsn string) *pgx.Conn {
	t.Helper()
	for {
		conn, err := pgx.Connect(ctx, dsn)
		if err == nil {
			return conn
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no writable node: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// requireNode checks that conn reached node n, writable.
func requireNode(t *testing.T, ctx context.Context, conn *pgx.Conn, n *autofailover.Node) {
	t.Helper()
	var port int
	var recovering bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT inet_server_port(), pg_is_in_recovery()`).Scan(&port, &recovering))
	require.Equal(t, n.Port, port, "the formation URI reaches %s", n.Name)
	require.False(t, recovering)
}

func insert(t *testing.T, ctx context.Context, conn *pgx.Conn, n int) {
	t.Helper()
	_, err := conn.Exec(ctx, `INSERT INTO acked VALUES ($1)`, n)
	require.NoError(t, err)
}

// processesUnder lists the live processes whose command line names dir.
func processesUnder(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, dir) {
			out = append(out, e.Name()+": "+cmd)
		}
	}
	return out
}
