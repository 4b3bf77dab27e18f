package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/internal/testgate"
	"github.com/idemwork/idemwork/store"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// The runner knows nothing of records, so its tests plug in a tiny business of their own: a
// widget table and a policy that stores {"widgetId"} and restores the exact widget row.

type widget struct {
	ID     string
	Owner  string
	Module string
	Label  string
}

const widgetPolicyName = "widget-reference-v1"

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
	err := p.b.db.Q(ctx).QueryRow(ctx, `SELECT owner_id, module, label FROM widget WHERE owner_id = $1 AND module = $2 AND id = $3`,
		owner, module, ref.WidgetID).Scan(&w.Owner, &w.Module, &w.Label)
	if errors.Is(err, pgx.ErrNoRows) {
		return widget{}, apperr.New(apperr.SnapshotIntegrity, "no widget %s for %s in %s", ref.WidgetID, owner, module)
	}
	return w, err
}

// testBundle is one test's runner over its own database, with counters of what ran.
type testBundle struct {
	db       *testdb.DB
	clock    *idem.OffsetClock
	runner   *idem.Runner
	policy   widgetPolicy
	prepares atomic.Int32
	works    atomic.Int32
	restores atomic.Int32
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	db := testdb.NewWith(t, testdb.Options{MaxConns: 24})
	_, err := db.Pool.Exec(context.Background(), `CREATE TABLE widget (owner_id text NOT NULL, id text NOT NULL, module text NOT NULL,
		label text NOT NULL, PRIMARY KEY (owner_id, id))`)
	require.NoError(t, err)
	clock := &idem.OffsetClock{}
	b := &testBundle{db: db, clock: clock, runner: idem.NewRunner(db.DB, idem.Options{Clock: clock})}
	b.policy = widgetPolicy{b}
	return b
}

// run makes a widget labelled label under req, counting prepare and work calls.
func (b *testBundle) run(ctx context.Context, req idem.Request, label string) (idem.Result[widget], error) {
	if req.Module == "" {
		req.Module = "W"
	}
	if req.Operation == "" {
		req.Operation = "W:widget:create"
	}
	if req.Body == nil {
		req.Body = []byte(`{"label":` + string(mustJSON(label)) + `}`)
	}
	prepare := func(ctx context.Context) (string, error) {
		b.prepares.Add(1)
		return label, nil
	}
	work := func(ctx context.Context, l string, batch *store.Batch) (widget, error) {
		b.works.Add(1)
		w := widget{ID: ulid.Make().String(), Owner: req.Owner, Module: req.Module, Label: l}
		batch.Queue("widget", "insert widget", nil, `INSERT INTO widget (owner_id, id, module, label) VALUES ($1, $2, $3, $4)`, w.Owner, w.ID, w.Module, w.Label)
		return w, nil
	}
	return idem.RunPrepared(ctx, b.runner, req, idem.ResultPolicy[widget](b.policy), prepare, work)
}

func (b *testBundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

func (b *testBundle) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), query, args...)
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

// heldAtSucceeded is a context under which the runner pauses on g just before the SUCCEEDED
// update (its flight running, its reservation held), then fails that step with fail (nil: it
// goes on).
func heldAtSucceeded(g *gate, fail error) context.Context {
	return idem.WithFault(context.Background(), func(step string) error {
		if step == idem.StepSucceeded {
			g.Hold()
			return fail
		}
		return nil
	})
}

// gate holds a step of the commit unit open until the test opens it (see testgate).
type gate = testgate.Gate

func newGate(t testing.TB) *gate { return testgate.New(t) }
