package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/testdb"
)

// Order is a service's own row: the result its policy restores.
type Order struct {
	ID       string
	SKU      string
	Quantity int
}

// orderPolicy stores the order's id (never its contents) and restores the order from its row.
type orderPolicy struct{ pool *pgxpool.Pool }

func (orderPolicy) Name() string     { return "order-reference-v1" }
func (orderPolicy) Fields() []string { return []string{"orderId"} }

func (orderPolicy) Serialize(o Order) (json.RawMessage, error) {
	return json.Marshal(map[string]string{"orderId": o.ID})
}

func (p orderPolicy) Restore(ctx context.Context, owner, _ string, result json.RawMessage) (Order, error) {
	var ref struct {
		OrderID string `json:"orderId"`
	}
	if err := json.Unmarshal(result, &ref); err != nil {
		return Order{}, err
	}
	o := Order{ID: ref.OrderID}
	err := p.pool.QueryRow(ctx, `SELECT sku, quantity FROM shop.orders WHERE owner_id = $1 AND id = $2`, owner, o.ID).Scan(&o.SKU, &o.Quantity)
	if errors.Is(err, pgx.ErrNoRows) {
		return Order{}, apperr.New(apperr.SnapshotIntegrity, "order %s is gone", o.ID)
	}
	return o, err
}

// A request runs once per owner and key: a retry gets the first result, restored from the
// order's own row, and the same key with another body is refused.
func Example() {
	ctx := context.Background()
	pool, done := examplePool() // the service's *pgxpool.Pool
	defer done()

	// The runner's table, in a schema of the service's choosing; then the service's own.
	if _, err := idem.Migrate(ctx, pool, "shop"); err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE shop.orders (owner_id text, id text, sku text, quantity int, PRIMARY KEY (owner_id, id))`); err != nil {
		panic(err)
	}
	runner := idem.NewRunner(idem.PoolDriver(pool), idem.Options{Schema: "shop"})

	place := func(key, body string) {
		req := idem.Request{Owner: "alice", Key: key, Operation: "shop:order:create", Body: []byte(body)}
		res, err := idem.Run(ctx, runner, req, orderPolicy{pool}, func(ctx context.Context, tx *idem.Tx) (Order, error) {
			var in struct {
				SKU      string `json:"sku"`
				Quantity int    `json:"quantity"`
			}
			if err := json.Unmarshal(req.Body, &in); err != nil {
				return Order{}, apperr.New(apperr.ValidationFailed, "body: %v", err)
			}
			o := Order{ID: "order-" + key, SKU: in.SKU, Quantity: in.Quantity}
			// Sent with the key's success row and COMMIT: one transaction, one round trip.
			tx.Queue(`INSERT INTO shop.orders (owner_id, id, sku, quantity) VALUES ($1, $2, $3, $4)`, req.Owner, o.ID, o.SKU, o.Quantity)
			return o, nil
		})
		if err != nil {
			fmt.Println(apperr.CodeOf(err))
			return
		}
		fmt.Println(res.Outcome, res.Value.ID, res.Value.SKU, res.Value.Quantity)
	}
	place("k1", `{"sku":"tea","quantity":2}`)
	place("k1", `{"sku":"tea","quantity":2}`) // a retry
	place("k1", `{"sku":"tea","quantity":3}`) // the key again, another body
	// Output:
	// EXECUTED order-k1 tea 2
	// REPLAYED order-k1 tea 2
	// IDEMPOTENCY_KEY_REUSED
}

// A call can run inside the caller's own transaction (Request.Tx), River's InsertTx way: the
// reservation, the work's writes and the success row commit — or roll back — with the rest.
func ExampleRun_callersTransaction() {
	ctx := context.Background()
	pool, done := examplePool()
	defer done()
	if _, err := idem.Migrate(ctx, pool, "shop"); err != nil {
		panic(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE shop.orders (owner_id text, id text, sku text, quantity int, PRIMARY KEY (owner_id, id))`); err != nil {
		panic(err)
	}
	runner := idem.NewRunner(idem.PoolDriver(pool), idem.Options{Schema: "shop"})
	write := func(tx pgx.Tx) idem.Result[Order] {
		req := idem.Request{Owner: "alice", Key: "k2", Operation: "shop:order:create", Body: []byte(`{}`), Tx: tx}
		res, err := idem.Run(ctx, runner, req, orderPolicy{pool}, func(ctx context.Context, tx *idem.Tx) (Order, error) {
			o := Order{ID: "order-k2", SKU: "mate", Quantity: 1}
			_, err := tx.Exec(ctx, `INSERT INTO shop.orders VALUES ($1, $2, $3, $4)`, req.Owner, o.ID, o.SKU, o.Quantity)
			return o, err
		})
		if err != nil {
			panic(err)
		}
		return res
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(write(tx).Outcome)
	_ = tx.Rollback(ctx) // the caller changes its mind: nothing of the call remains
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		fmt.Println(write(tx).Outcome)
		return nil
	})
	if err != nil {
		panic(err)
	}
	var keys int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM shop.idempotency_record`).Scan(&keys)
	fmt.Println(keys, "key")
	// Output:
	// EXECUTED
	// EXECUTED
	// 1 key
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
