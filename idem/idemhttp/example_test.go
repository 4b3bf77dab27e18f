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

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemhttp"
	"github.com/idemwork/idemwork/internal/testdb"
)

// The middleware on the standard mux: POST /orders runs once per owner and Idempotency-Key, and
// a retry gets the first answer back, byte for byte, with Idempotent-Replayed: true.
func ExampleMiddleware() {
	ctx := context.Background()
	pool, done := examplePool() // the service's *pgxpool.Pool
	defer done()
	if _, err := idem.Migrate(ctx, pool, "public"); err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE orders (owner_id text, id text, sku text, quantity int, PRIMARY KEY (owner_id, id))`); err != nil {
		panic(err)
	}
	runner := idem.NewRunner(idem.PoolDriver(pool), idem.Options{})
	idempotent := idemhttp.Middleware(runner, idemhttp.Options{
		// The service's authentication names the owner; a demo trusts a header.
		Owner: func(r *http.Request) (string, error) {
			if owner := r.Header.Get("X-Owner-Id"); owner != "" {
				return owner, nil
			}
			return "", errors.New("sign in first")
		},
	})

	mux := http.NewServeMux()
	mux.Handle("POST /orders", idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in order
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			idemhttp.Error(w, apperr.New(apperr.BadRequest, "body: %v", err))
			return
		}
		res, err := idemhttp.Run(r, orderPolicy{pool}, func(ctx context.Context, tx *idem.Tx) (order, error) {
			o := order{ID: "o-1", SKU: in.SKU, Quantity: in.Quantity}
			c, _ := idemhttp.CallOf(r)
			tx.Queue(`INSERT INTO orders VALUES ($1, $2, $3, $4)`, c.Owner, o.ID, o.SKU, o.Quantity)
			return o, nil
		})
		if err != nil {
			idemhttp.Error(w, err)
			return
		}
		idemhttp.Respond(w, http.StatusCreated, res, res.Value) // rendered from the (restored) order
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	send := func(body string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders", strings.NewReader(body))
		req.Header.Set("X-Owner-Id", "alice")
		req.Header.Set("Idempotency-Key", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d %s replayed=%q %s", resp.StatusCode, resp.Header.Get("Idempotency-Outcome"), resp.Header.Get("Idempotent-Replayed"), b)
	}
	send(`{"sku":"tea","quantity":2}`)
	send(`{"sku":"tea","quantity":2}`) // the client retries
	send(`{"sku":"tea","quantity":9}`) // the same key for another request
	// Output:
	// 201 EXECUTED replayed="" {"id":"o-1","sku":"tea","quantity":2}
	// 201 REPLAYED replayed="true" {"id":"o-1","sku":"tea","quantity":2}
	// 422  replayed="" {"error":{"code":"IDEMPOTENCY_KEY_REUSED","status":422,"message":"key \"8e03978e-40d5-43e8-bc93-6894a57f9324\" was first used with a different request body; a retry must send the same body, a new request needs a new key"}}
}

// examplePool is a pool on a fresh database of the test server; done closes it and drops the
// database.
func examplePool() (pool *pgxpool.Pool, done func()) {
	dsn, drop := testdb.EmptyForExample()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		drop()
		panic(err)
	}
	return pool, func() {
		pool.Close()
		drop()
	}
}
