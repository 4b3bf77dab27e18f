package idemhttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemhttp"
	"github.com/idemwork/idemwork/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// The tests serve a tiny order service the way a user of the library would: its own pool, the
// runner's table made by idem.Migrate, its routes on the standard mux behind the middleware.

type order struct {
	ID       string `json:"id"`
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

type orderPolicy struct{ pool *pgxpool.Pool }

func (orderPolicy) Name() string     { return "order-reference-v1" }
func (orderPolicy) Fields() []string { return []string{"orderId"} }

func (orderPolicy) Serialize(o order) (json.RawMessage, error) {
	return json.Marshal(map[string]string{"orderId": o.ID})
}

func (p orderPolicy) Restore(ctx context.Context, owner, _ string, result json.RawMessage) (order, error) {
	var ref struct {
		OrderID string `json:"orderId"`
	}
	if err := json.Unmarshal(result, &ref); err != nil {
		return order{}, err
	}
	o := order{ID: ref.OrderID}
	err := p.pool.QueryRow(ctx, `SELECT sku, quantity FROM orders WHERE owner_id = $1 AND id = $2`, owner, o.ID).Scan(&o.SKU, &o.Quantity)
	if errors.Is(err, pgx.ErrNoRows) {
		return order{}, apperr.New(apperr.SnapshotIntegrity, "order %s is gone", o.ID)
	}
	return o, err
}

type testBundle struct {
	pool   *pgxpool.Pool
	runner *idem.Runner
	url    string
	works  atomic.Int32
	seq    atomic.Int32
}

// setup serves the order service with opts (Owner defaults to the X-Owner-Id header).
func setup(t *testing.T, ropts idem.Options, opts idemhttp.Options) *testBundle {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testdb.DSNOf(t, testdb.NewEmptyDatabase(t)))
	require.NoError(t, err)
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	_, err = idem.Migrate(ctx, pool, "")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE orders (owner_id text, id text, sku text NOT NULL, quantity int NOT NULL CHECK (quantity > 0),
		PRIMARY KEY (owner_id, id))`)
	require.NoError(t, err)
	b := &testBundle{pool: pool, runner: idem.NewRunner(idem.PoolDriver(pool), ropts)}
	if opts.Owner == nil {
		opts.Owner = func(r *http.Request) (string, error) {
			if o := r.Header.Get("X-Owner-Id"); o != "" {
				return o, nil
			}
			return "", errors.New("no X-Owner-Id")
		}
	}
	mux := http.NewServeMux()
	mux.Handle("POST /orders", idemhttp.Middleware(b.runner, opts)(http.HandlerFunc(b.placeOrder)))
	mux.Handle("POST /orders/{id}/gift", idemhttp.Middleware(b.runner, opts)(http.HandlerFunc(b.placeOrder)))
	mux.HandleFunc("POST /unwrapped", b.placeOrder)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	b.url = srv.URL
	return b
}

// placeOrder is the service's handler: it decodes the body, writes the order with the key, and
// renders the answer from the result (the restored order on a replay).
func (b *testBundle) placeOrder(w http.ResponseWriter, r *http.Request) {
	var in struct {
		SKU      string `json:"sku"`
		Quantity int    `json:"quantity"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		idemhttp.Error(w, apperr.New(apperr.BadRequest, "body: %v", err))
		return
	}
	res, err := idemhttp.Run(r, orderPolicy{b.pool}, func(ctx context.Context, tx *idem.Tx) (order, error) {
		b.works.Add(1)
		o := order{ID: fmt.Sprintf("o%d", b.seq.Add(1)), SKU: in.SKU, Quantity: in.Quantity}
		c, _ := idemhttp.CallOf(r)
		tx.Queue(`INSERT INTO orders (owner_id, id, sku, quantity) VALUES ($1, $2, $3, $4)`, c.Owner, o.ID, o.SKU, o.Quantity)
		if in.SKU == "slow" {
			<-ctx.Done() // holds its reservation until the client gives up
			return order{}, ctx.Err()
		}
		return o, nil
	})
	if err != nil {
		idemhttp.Error(w, err)
		return
	}
	w.Header().Set("Location", "/orders/"+res.Value.ID)
	idemhttp.Respond(w, http.StatusCreated, res, res.Value)
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (a answer) code() string {
	var e idemhttp.ErrorBody
	_ = json.Unmarshal([]byte(a.body), &e)
	return string(e.Error.Code)
}

// post sends body to path with headers (name, value pairs; X-Owner-Id alice unless given).
func (b *testBundle) post(t *testing.T, path, body string, headers ...string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.url+path, strings.NewReader(body))
	require.NoError(t, err)
	owner := true
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
		if http.CanonicalHeaderKey(headers[i]) == "X-Owner-Id" {
			owner = false
		}
	}
	if owner {
		req.Header.Set("X-Owner-Id", "alice")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return answer{resp.StatusCode, resp.Header, string(raw)}
}

func (b *testBundle) count(t *testing.T, query string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), query).Scan(&n))
	return n
}
