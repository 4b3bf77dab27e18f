package bench

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"idemwork/internal/testdb"
)

// TestRunMeasuresEveryWorkloadStormAndGrowth runs the whole bench at toy sizes: every cell is
// there with both sides measured, the runner never makes more round trips than the naive SQL,
// every storm leaves exactly one execution, and growth covers the second level. No timing is
// asserted: the machine is shared.
func TestRunMeasuresEveryWorkloadStormAndGrowth(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Env{DSN: db.DSN, Display: "test", Progress: &progress},
		Options{Duration: 100 * time.Millisecond, Slice: 25 * time.Millisecond, Clients: []int{1, 2}, Rows: []int{500, 0}, StormRounds: 1})
	require.NoError(t, err, progress.String())

	require.Equal(t, []int{0, 500}, rep.Setup.Rows, "levels are sorted")
	type cellKey struct {
		name          string
		clients, rows int
	}
	got := map[cellKey]Workload{}
	for _, c := range rep.Workloads {
		got[cellKey{c.Name, c.Clients, c.Rows}] = c
		for side, s := range map[string]Side{"runner": c.Runner, "raw": c.Raw} {
			require.Positive(t, s.Ops, "%s %s", c.Name, side)
			require.Positive(t, s.OpsPerSec, "%s %s", c.Name, side)
			require.Positive(t, s.P50Ms, "%s %s", c.Name, side)
			require.GreaterOrEqual(t, s.P99Ms, s.P50Ms, "%s %s", c.Name, side)
			require.Positive(t, s.AllocsPerOp, "%s %s", c.Name, side)
			require.Positive(t, s.RoundTripsPerOp, "%s %s", c.Name, side)
		}
		require.InDelta(t, c.Runner.OpsPerSec/c.Raw.OpsPerSec, c.Ratio, 1e-9)
		require.Equal(t, 2, c.SlicesPerSide)
	}
	want := []cellKey{}
	for _, name := range []string{FreshKey, FeatureRun, ReplayHit} {
		for _, c := range []int{1, 2} {
			want = append(want, cellKey{name, c, 0})
			if name != FeatureRun {
				want = append(want, cellKey{name, c, 500})
			}
		}
	}
	require.Len(t, got, len(want))
	for _, k := range want {
		require.Contains(t, got, k)
	}
	require.Len(t, rep.Growth, 4)
	require.GreaterOrEqual(t, got[cellKey{FreshKey, 1, 500}].KeysInTable, int64(500))

	// Raw is one statement per round trip by definition; the runner must never need more.
	rawTrips := map[string]float64{FreshKey: 8, FeatureRun: 10, ReplayHit: 3}
	require.Len(t, rep.RoundTrips, 3)
	for _, rt := range rep.RoundTrips {
		require.Equal(t, rawTrips[rt.Workload], rt.Raw.PerOp, rt.Workload)
		require.LessOrEqual(t, rt.Runner.PerOp, rt.Raw.PerOp, "%s: %v", rt.Workload, rt.Runner.Statements)
		for _, tr := range []RoundTripTrace{rt.Runner, rt.Raw} {
			require.NotEmpty(t, tr.Statements)
			require.Len(t, tr.StatementMs, len(tr.Statements))
			require.Positive(t, tr.OpMs)
			require.Less(t, tr.ClientMs, tr.OpMs)
		}
	}

	require.NotNil(t, rep.Storm)
	require.Positive(t, rep.Storm.Lone.P50Ms)
	require.Len(t, rep.Storm.Runs, 3)
	for _, r := range rep.Storm.Runs {
		require.True(t, r.Verified, "%s: %v", r.Name, r.Problems)
		require.Equal(t, 1, r.Outcomes["EXECUTED"], r.Name)
		require.Positive(t, r.WallMs, r.Name)
		require.Len(t, r.WallsMs, 1)
	}
	require.Equal(t, 999, rep.Storm.Runs[0].Outcomes["JOINED"]+rep.Storm.Runs[0].Outcomes["REPLAYED"])
	require.Zero(t, rep.Storm.Runs[1].Outcomes["JOINED"], "no sharing: nobody joins")
	require.Equal(t, 4, rep.Storm.Runs[2].Processes)

	// fresh-key, feature-run and replay-hit at 1 client, the two storms, growth of two workloads.
	require.Len(t, rep.Targets, 7)

	var out bytes.Buffer
	Print(&out, rep)
	for _, s := range []string{"fresh-key", "feature-run", "replay-hit", "ratio", "inproc-share", "4-processes", "growth", "round trips", "targets"} {
		require.Contains(t, out.String(), s)
	}
}

func TestScratchDatabaseIsCreatedAndDropped(t *testing.T) {
	t.Parallel()
	admin := testdb.AdminDSN(t)
	ctx := context.Background()
	s, err := CreateScratch(ctx, admin)
	require.NoError(t, err)
	require.Regexp(t, `^idemwork_bench_\d+_[0-9a-f]{8}$`, s.Name)
	conn, err := pgx.Connect(ctx, s.DSN)
	require.NoError(t, err)
	var name string
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_database()`).Scan(&name))
	require.Equal(t, s.Name, name)
	// Drop closes sessions still in it.
	require.NoError(t, s.Drop(ctx))
	_ = conn.Close(ctx)

	c, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	defer c.Close(ctx)
	var n int
	require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, s.Name).Scan(&n))
	require.Zero(t, n)
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres:///postgres?host=%2Ftmp%2Fs&port=5432&user=postgres": "postgres:///x?host=%2Ftmp%2Fs&port=5432&user=postgres",
		"postgres://u:p@127.0.0.1:5432/app?sslmode=disable":            "postgres://u:p@127.0.0.1:5432/x?sslmode=disable",
		"postgresql://h/app?dbname=app":                                "postgresql://h/x?dbname=x",
		"host=127.0.0.1 dbname=app user=u":                             "host=127.0.0.1 user=u dbname=x",
		"host=/tmp user=u":                                             "host=/tmp user=u dbname=x",
	} {
		require.Equal(t, want, WithDatabase(in, "x"), in)
	}
}

func TestOptionsNormalized(t *testing.T) {
	t.Parallel()
	o, err := Options{}.Normalized()
	require.NoError(t, err)
	require.Equal(t, DefaultDuration, o.Duration)
	require.Equal(t, DefaultClients, o.Clients)
	require.Equal(t, DefaultRows, o.Rows)
	o, err = Options{Rows: []int{}}.Normalized()
	require.NoError(t, err)
	require.Equal(t, []int{0}, o.Rows)
	for _, bad := range []Options{{Clients: []int{0}}, {Clients: []int{MaxClients + 1}}, {Rows: []int{-1}}, {Duration: time.Millisecond}} {
		_, err := bad.Normalized()
		require.Error(t, err, "%+v", bad)
	}
}
