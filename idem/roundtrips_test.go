package idem_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/testdb"
)

// Through PoolDriver a fresh key costs two round trips — BEGIN, the key read and the reservation
// in the first; the work's queued writes, the success row and COMMIT in the second — and the
// replay of a key the runner answered one: the key read alone. A work that runs a statement at
// once pays its round trip, and only that.
func TestThroughAPoolAFreshKeyTakesTwoRoundTripsAndAReplayOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pool, w := tracedPool(t, b.dsn)
	runner := idem.NewRunner(idem.PoolDriver(pool), idem.Options{Schema: runnerSchema})
	write := func(key string, atOnce bool) idemtype.Outcome {
		res, err := idem.Run(ctx, runner, idem.Request{Owner: "alice", Key: key, Operation: "W:widget:create", Module: "W", Body: []byte(`{}`)},
			idem.ResultPolicy[widget](b.policy), func(ctx context.Context, tx *idem.Tx) (widget, error) {
				if atOnce {
					if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
						return widget{}, err
					}
				}
				tx.Queue(`INSERT INTO widget (owner_id, id, module, label) VALUES ($1, $2, 'W', 'l')`, "alice", key)
				return widget{ID: key, Owner: "alice", Module: "W", Label: "l"}, nil
			})
		require.NoError(t, err)
		return res.Outcome
	}
	write("warm", false) // the connection and its statement cache
	write("warm", false)
	w.Take()

	require.Equal(t, idemtype.Executed, write("fresh", false))
	require.Equal(t, []string{
		`batch[begin; select operation, fingerprint,; with ins as]`,
		`batch[insert into widget; with u as; commit]`,
	}, w.Take())
	require.Equal(t, idemtype.Replayed, write("fresh", false))
	require.Equal(t, []string{`select operation, fingerprint,`}, w.Take())
	require.Equal(t, idemtype.Executed, write("at-once", true))
	require.Equal(t, []string{
		`batch[begin; select operation, fingerprint,; with ins as]`,
		`select 1`,
		`batch[insert into widget; with u as; commit]`,
	}, w.Take())
}

// RunAhead through PoolDriver: a fresh key is one round trip — BEGIN, the key read, the
// reservation, the work's guarded write, the success row and COMMIT — and a key another runner
// committed is answered from that same round trip, its guarded write doing nothing. A work
// that tries to run a statement at once is refused (it may only queue), and leaves nothing.
func TestThroughAPoolRunAheadTakesOneRoundTripForAFreshKeyAndForATakenOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pool, w := tracedPool(t, b.dsn)
	newRunner := func() *idem.Runner { return idem.NewRunner(idem.PoolDriver(pool), idem.Options{Schema: runnerSchema}) }
	runner := newRunner()
	guarded := `INSERT INTO widget (owner_id, id, module, label) SELECT $1, $2, 'W', 'l' WHERE ` +
		idem.HeldGuard(runner.Table(), 1, 3)
	write := func(r *idem.Runner, key string, atOnce bool) (idem.Result[widget], error) {
		return idem.RunAhead(ctx, r, idem.Request{Owner: "alice", Key: key, Operation: "W:widget:create", Module: "W", Body: []byte(`{}`)},
			idem.ResultPolicy[widget](b.policy), func(context.Context) (string, error) { return "l", nil },
			func(ctx context.Context, tx *idem.Tx, label string) (widget, error) {
				if atOnce {
					if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
						return widget{}, err
					}
				}
				owner, key, ok := tx.HeldBy()
				require.True(t, ok)
				tx.Queue(guarded, owner, key, key)
				return widget{ID: key, Owner: "alice", Module: "W", Label: label}, nil
			})
	}
	_, err := write(runner, "warm", false) // the connection and its statement cache
	require.NoError(t, err)
	w.Take()

	res, err := write(runner, "fresh", false)
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, res.Outcome)
	oneTrip := `batch[begin; select operation, fingerprint,; with ins as; insert into widget; with u as; commit]`
	require.Equal(t, []string{oneTrip}, w.Take())

	again, err := write(newRunner(), "fresh", false)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	require.Equal(t, string(res.Envelope), string(again.Envelope))
	require.Equal(t, []string{oneTrip}, w.Take())
	var widgets int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM widget WHERE id = 'fresh'`).Scan(&widgets))
	require.Equal(t, 1, widgets, "the taken key's guarded write wrote nothing")

	_, err = write(runner, "at-once", true)
	require.ErrorContains(t, err, "runs no statement")
	var keys int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+runner.Table()+` WHERE idempotency_key = 'at-once'`).Scan(&keys))
	require.Zero(t, keys)
}

// tracedPool is a one-connection pool on dsn whose statements w counts in round trips.
func tracedPool(t *testing.T, dsn string) (*pgxpool.Pool, *testdb.Trips) {
	t.Helper()
	w := &testdb.Trips{Words: 3}
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	cfg.MaxConns = 1
	cfg.ConnConfig.Tracer = w
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, w
}
