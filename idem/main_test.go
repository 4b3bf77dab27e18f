package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/internal/testgate"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// The runner knows nothing of records, so its tests plug in a tiny business of their own: a
// widget table and a policy that stores {"widgetId"} and restores the exact widget row. They run
// the library as a service would: a pgx pool of their own on a database without idemwork's
// schema, the runner's table created by idem.Migrate in a schema of its own.

type widget struct {
	ID     string
	Owner  string
	Module string
	Label  string
}

const (
	widgetPolicyName = "widget-reference-v1"
	// runnerSchema holds the runner's table; the widgets live in public, as a service's own
	// tables would.
	runnerSchema = "idem"
)

type widgetPolicy struct{ b *testBundle }

func (widgetPolicy) Name() string     { return widgetPolicyName }
func (widgetPolicy) Fields() []string { return []string{"widgetId"} }

func (widgetPolicy) Serialize(w widget) (json.RawMessage, error) {
	return json.Marshal(map[string]string{"widgetId": w.ID})
}

func (p widgetPolicy) Restore(ctx context.Context, owner, module string, result json.RawMessage) (widget, error) {
	p.b.restores.Add(1)
	var ref struct {
		WidgetID string `json:"widgetId"`
	}
	if err := json.Unmarshal(result, &ref); err != nil {
		return widget{}, err
	}
	w := widget{ID: ref.WidgetID}
	err := p.b.pool.QueryRow(ctx, `SELECT owner_id, module, label FROM widget WHERE owner_id = $1 AND module = $2 AND id = $3`,
		owner, module, ref.WidgetID).Scan(&w.Owner, &w.Module, &w.Label)
	if errors.Is(err, pgx.ErrNoRows) {
		return widget{}, apperr.New(apperr.SnapshotIntegrity, "no widget %s for %s in %s", ref.WidgetID, owner, module)
	}
	return w, err
}

// testBundle is one test's runner over its own database, with counters of what ran.
type testBundle struct {
	pool     *pgxpool.Pool
	dsn      string
	clock    *idem.OffsetClock
	runner   *idem.Runner
	policy   widgetPolicy
	prepares atomic.Int32
	works    atomic.Int32
	restores atomic.Int32
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	ctx := context.Background()
	dsn := testdb.DSNOf(t, testdb.NewEmptyDatabase(t))
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	cfg.MaxConns = 24
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = idem.Migrate(ctx, pool, runnerSchema)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE widget (owner_id text NOT NULL, id text NOT NULL, module text NOT NULL,
		label text NOT NULL, PRIMARY KEY (owner_id, id))`)
	require.NoError(t, err)
	clock := &idem.OffsetClock{}
	b := &testBundle{pool: pool, dsn: dsn, clock: clock,
		runner: idem.NewRunner(idem.PoolDriver(pool), idem.Options{Schema: runnerSchema, Clock: clock})}
	b.policy = widgetPolicy{b}
	return b
}

// held makes a call's work pause on g at its end — its flight running, its reservation held,
// its writes queued — and then fail with fail (nil: it goes on).
type held struct {
	g    *gate
	fail error
}

// run makes a widget labelled label under req, counting prepare and work calls.
func (b *testBundle) run(ctx context.Context, req idem.Request, label string) (idem.Result[widget], error) {
	return b.runHeld(ctx, req, label, held{})
}

// runHeld is run whose work pauses on h.g (when set) once it queued its write.
func (b *testBundle) runHeld(ctx context.Context, req idem.Request, label string, h held) (idem.Result[widget], error) {
	if req.Module == "" {
		req.Module = "W"
	}
	if req.Operation == "" {
		req.Operation = "W:widget:create"
	}
	if req.Body == nil {
		req.Body = []byte(`{"label":` + string(mustJSON(label)) + `}`)
	}
	prepare := func(ctx context.Context, _ idem.Querier) (string, error) {
		b.prepares.Add(1)
		return label, nil
	}
	work := func(ctx context.Context, tx *idem.Tx, l string) (widget, error) {
		b.works.Add(1)
		w := widget{ID: ulid.Make().String(), Owner: req.Owner, Module: req.Module, Label: l}
		tx.Queue(`INSERT INTO widget (owner_id, id, module, label) VALUES ($1, $2, $3, $4)`, w.Owner, w.ID, w.Module, w.Label)
		if h.g != nil {
			h.g.Hold()
			if h.fail != nil {
				return widget{}, h.fail
			}
		}
		return w, nil
	}
	return idem.RunPrepared(ctx, b.runner, req, idem.ResultPolicy[widget](b.policy), prepare, work)
}

func (b *testBundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

func (b *testBundle) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), query, args...)
	require.NoError(t, err)
}

func mustJSON(v any) json.RawMessage {
	out, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return out
}

func requireCode(t *testing.T, err error, code apperr.Code) *apperr.Error {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, apperr.CodeOf(err), "error: %v", err)
	var ae *apperr.Error
	require.ErrorAs(t, err, &ae)
	return ae
}

func boolp(v bool) *bool { return &v }

// gate holds a step of the commit unit open until the test opens it (see testgate).
type gate = testgate.Gate

func newGate(t testing.TB) *gate { return testgate.New(t) }
