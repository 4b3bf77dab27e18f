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
	w := &testdb.Trips{Words: 3}
	cfg, err := pgxpool.ParseConfig(b.dsn)
	require.NoError(t, err)
	cfg.MaxConns = 1
	cfg.ConnConfig.Tracer = w
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
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
