package idem_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/store"
)

// The runner depends on no session state: through a transaction-pooling pgbouncer whose one
// server connection another client has left with a search_path pointing nowhere, a pool of the
// service's own runs concurrent calls of one key once, and Migrate runs there too (its lock is a
// transaction's, its search_path LOCAL).
func TestTheRunnerWorksThroughATransactionPoolerWhateverOthersLeftOnTheSession(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	name := testdb.NewEmptyDatabase(t)
	bouncer := testdb.NewBouncer(t, store.PoolerTransaction, testdb.BouncerOptions{PoolSize: 1})
	dsn := bouncer.DSN(name)

	// Another client of the pooler leaves its session settings on the one server connection.
	other, err := pgx.Connect(ctx, dsn+"&default_query_exec_mode=simple_protocol")
	require.NoError(t, err)
	defer other.Close(ctx)
	_, err = other.Exec(ctx, `SET search_path TO nowhere`)
	require.NoError(t, err)

	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	// The pooler hands statements prepared on one server connection to another client: no
	// statement cache (pgbouncer 1.21+ with max_prepared_statements would allow one).
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	_, err = idem.Migrate(ctx, pool, "svc")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE svc.widget (owner_id text, id text, label text, PRIMARY KEY (owner_id, id))`)
	require.NoError(t, err)
	var path string
	require.NoError(t, other.QueryRow(ctx, `SHOW search_path`).Scan(&path))
	require.Equal(t, "nowhere", path, "the other client's setting is still on the server connection")

	runner := idem.NewRunner(idem.PoolDriver(pool), idem.Options{Schema: "svc"})
	var mu sync.Mutex
	outcomes := map[idemtype.Outcome]int{}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			res, err := idem.Run(ctx, runner, idem.Request{Owner: "alice", Key: "k", Operation: "widget:create", Body: []byte(`{}`), ShareInFlight: boolp(false)},
				svcPolicy{pool}, func(ctx context.Context, tx *idem.Tx) (widget, error) {
					tx.Queue(`INSERT INTO svc.widget VALUES ('alice', 'w1', 'one')`)
					return widget{ID: "w1", Owner: "alice", Label: "one"}, nil
				})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				outcomes[idemtype.Outcome("error: "+err.Error())]++
				return
			}
			outcomes[res.Outcome]++
		})
	}
	wg.Wait()
	require.Equal(t, map[idemtype.Outcome]int{idemtype.Executed: 1, idemtype.Replayed: 15}, outcomes)
	var widgets int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM svc.widget`).Scan(&widgets))
	require.Equal(t, 1, widgets)
}

// svcPolicy restores a widget of schema svc.
type svcPolicy struct{ pool *pgxpool.Pool }

func (svcPolicy) Name() string     { return widgetPolicyName }
func (svcPolicy) Fields() []string { return []string{"widgetId"} }
func (svcPolicy) Serialize(w widget) (json.RawMessage, error) {
	return mustJSON(map[string]string{"widgetId": w.ID}), nil
}
func (p svcPolicy) Restore(ctx context.Context, owner, _ string, result json.RawMessage) (widget, error) {
	w := widget{Owner: owner}
	err := p.pool.QueryRow(ctx, `SELECT id, label FROM svc.widget WHERE owner_id = $1 AND id = $2::jsonb->>'widgetId'`, owner, string(result)).
		Scan(&w.ID, &w.Label)
	return w, err
}

// idemwork's own databases keep working: Migrate on a database an idemwork migration set up
// adopts its idempotency_record as it is (the same shape) and the runner writes there.
func TestMigrateAdoptsTheTableAnIdemworkMigrationCreated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t) // migrated by idemwork's own migrations (0001-0003 made idempotency_record)
	var before int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE tablename = 'idempotency_record'`).Scan(&before))
	n, err := idem.Migrate(ctx, db.Pool, "public")
	require.NoError(t, err)
	require.Equal(t, 1, n, "the version is recorded")
	n, err = idem.Migrate(ctx, db.Pool, "public")
	require.NoError(t, err)
	require.Zero(t, n, "once")
	var after int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE tablename = 'idempotency_record'`).Scan(&after))
	require.Equal(t, before, after, "nothing added: the same indexes")
	_, err = db.Pool.Exec(ctx, `CREATE TABLE svc_widget_probe (id text)`)
	require.NoError(t, err)
	runner := idem.NewRunner(idem.PoolDriver(db.Pool), idem.Options{})
	res, err := idem.Run(ctx, runner, idem.Request{Owner: "alice", Key: "adopted", Operation: "probe", Body: []byte(`{}`)},
		probePolicy{}, func(ctx context.Context, tx *idem.Tx) (string, error) {
			tx.Queue(`INSERT INTO svc_widget_probe VALUES ('p1')`)
			return "p1", nil
		})
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, res.Outcome)
}

type probePolicy struct{}

func (probePolicy) Name() string     { return "probe-v1" }
func (probePolicy) Fields() []string { return []string{"id"} }
func (probePolicy) Serialize(id string) (json.RawMessage, error) {
	return mustJSON(map[string]string{"id": id}), nil
}
func (probePolicy) Restore(_ context.Context, _, _ string, result json.RawMessage) (string, error) {
	return string(result), nil
}
