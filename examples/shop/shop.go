package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemhttp"
)

// Shop serves the order API over one pool: its own tables and the runner's live in one schema.
type Shop struct {
	pool   *pgxpool.Pool
	schema string
	runner *idem.Runner
	policy OrderPolicy
}

// prices is the catalogue, in cents.
var prices = map[string]int{"tea": 450, "coffee": 390, "mate": 520}

// Open migrates the runner's table and the shop's (both idempotent; concurrent instances
// migrate once) and returns the shop.
func Open(ctx context.Context, pool *pgxpool.Pool, schema string) (*Shop, error) {
	if _, err := idem.Migrate(ctx, pool, schema); err != nil {
		return nil, err
	}
	q := pgx.Identifier{schema}.Sanitize()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('shop.migrate:' || $1, 0))`, schema); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
			CREATE TABLE IF NOT EXISTS `+q+`.orders (
				owner_id        text        NOT NULL,
				id              text        NOT NULL,
				sku             text        NOT NULL,
				quantity        integer     NOT NULL CHECK (quantity BETWEEN 1 AND 100),
				amount_cents    integer     NOT NULL,
				idempotency_key text,
				created_at      timestamptz NOT NULL,
				PRIMARY KEY (owner_id, id)
			);
			CREATE INDEX IF NOT EXISTS orders_owner_key_idx ON `+q+`.orders (owner_id, idempotency_key);
			CREATE TABLE IF NOT EXISTS `+q+`.payment_outbox (
				owner_id     text        NOT NULL,
				id           text        NOT NULL,
				order_id     text        NOT NULL,
				amount_cents integer     NOT NULL,
				status       text        NOT NULL DEFAULT 'PENDING',
				created_at   timestamptz NOT NULL,
				PRIMARY KEY (owner_id, id),
				FOREIGN KEY (owner_id, order_id) REFERENCES `+q+`.orders (owner_id, id)
			)`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("migrate the shop's tables: %w", err)
	}
	return &Shop{pool: pool, schema: schema, runner: idem.NewRunner(idem.PoolDriver(pool), idem.Options{Schema: schema}),
		policy: OrderPolicy{Pool: pool, Schema: schema}}, nil
}

// Handler routes the API: POST /orders behind the idempotency middleware, GET /orders/{id}.
func (s *Shop) Handler() http.Handler {
	idempotent := idemhttp.Middleware(s.runner, idemhttp.Options{Owner: ownerOf, Module: "shop"})
	mux := http.NewServeMux()
	mux.Handle("POST /orders", idempotent(http.HandlerFunc(s.placeOrder)))
	mux.HandleFunc("GET /orders/{id}", s.getOrder)
	return mux
}

// ownerOf names the owner of a request from X-Owner-Id. A demo shortcut: a real service takes
// the owner from its authentication (a session, a verified token), never from a header the
// client chooses.
func ownerOf(r *http.Request) (string, error) {
	if owner := r.Header.Get("X-Owner-Id"); owner != "" {
		return owner, nil
	}
	return "", apperr.New(apperr.Unauthorized, "send X-Owner-Id: <owner> (the demo's stand-in for authentication)")
}

// Order is an order as the API returns it. Its row is never updated: a replay restores it.
type Order struct {
	ID          string    `json:"id"`
	SKU         string    `json:"sku"`
	Quantity    int       `json:"quantity"`
	AmountCents int       `json:"amountCents"`
	CreatedAt   time.Time `json:"createdAt"`
}

func (s *Shop) placeOrder(w http.ResponseWriter, r *http.Request) {
	var in struct {
		SKU      string `json:"sku"`
		Quantity int    `json:"quantity"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		idemhttp.Error(w, apperr.New(apperr.BadRequest, "the body must be {\"sku\": …, \"quantity\": …}"))
		return
	}
	res, err := idemhttp.Run(r, idem.ResultPolicy[Order](s.policy), func(ctx context.Context, tx *idem.Tx) (Order, error) {
		price, ok := prices[in.SKU]
		if !ok {
			return Order{}, apperr.New(apperr.ValidationFailed, "sku: %q is not in the catalogue (tea, coffee, mate)", in.SKU)
		}
		if in.Quantity < 1 || in.Quantity > 100 {
			return Order{}, apperr.New(apperr.ValidationFailed, "quantity: must be 1-100")
		}
		c, _ := idemhttp.CallOf(r)
		o := Order{ID: newID("ord"), SKU: in.SKU, Quantity: in.Quantity, AmountCents: price * in.Quantity,
			CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
		var key *string
		if c.Key != "" {
			key = &c.Key
		}
		// The order and its payment message travel with the key's success row and COMMIT: one
		// transaction, one round trip. The payment worker (not part of the demo) reads the outbox.
		tx.Queue(`INSERT INTO `+s.table("orders")+` (owner_id, id, sku, quantity, amount_cents, idempotency_key, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, c.Owner, o.ID, o.SKU, o.Quantity, o.AmountCents, key, o.CreatedAt)
		tx.Queue(`INSERT INTO `+s.table("payment_outbox")+` (owner_id, id, order_id, amount_cents, created_at)
			VALUES ($1, $2, $3, $4, $5)`, c.Owner, newID("pay"), o.ID, o.AmountCents, o.CreatedAt)
		return o, nil
	})
	if err != nil {
		idemhttp.Error(w, err)
		return
	}
	// The answer is rendered from the result only — on a replay, the order restored from its row.
	w.Header().Set("Location", "/orders/"+res.Value.ID)
	idemhttp.Respond(w, http.StatusCreated, res, res.Value)
}

func (s *Shop) getOrder(w http.ResponseWriter, r *http.Request) {
	owner, err := ownerOf(r)
	if err != nil {
		idemhttp.Error(w, err)
		return
	}
	o, err := s.policy.find(r.Context(), owner, r.PathValue("id"))
	if errors.Is(err, pgx.ErrNoRows) {
		idemhttp.Error(w, apperr.New(apperr.NotFound, "owner %s has no order %s", owner, r.PathValue("id")))
		return
	}
	if err != nil {
		idemhttp.Error(w, err)
		return
	}
	writeJSON(w, http.StatusOK, o)
}

func (s *Shop) table(name string) string { return pgx.Identifier{s.schema, name}.Sanitize() }

// OrderPolicy stores an order's id and the digest of the order as first returned — never its
// contents — and restores the order from its row, failing closed when the row no longer matches
// the digest (someone edited it): a replay returns the exact first result or nothing.
type OrderPolicy struct {
	Pool   *pgxpool.Pool
	Schema string
}

// OrderPolicyName names the policy and its version: a change of restore rules is a new name.
const OrderPolicyName = "shop-order-reference-v1"

func (OrderPolicy) Name() string     { return OrderPolicyName }
func (OrderPolicy) Fields() []string { return []string{"orderId", "digest"} }

func (OrderPolicy) Serialize(o Order) (json.RawMessage, error) {
	return json.Marshal(map[string]string{"orderId": o.ID, "digest": digest(o)})
}

func (p OrderPolicy) Restore(ctx context.Context, owner, _ string, result json.RawMessage) (Order, error) {
	var ref struct {
		OrderID string `json:"orderId"`
		Digest  string `json:"digest"`
	}
	if err := json.Unmarshal(result, &ref); err != nil {
		return Order{}, apperr.New(apperr.SnapshotIntegrity, "the stored result is not an order reference")
	}
	o, err := p.find(ctx, owner, ref.OrderID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Order{}, apperr.New(apperr.SnapshotIntegrity, "the stored result references order %s, which owner %s does not have", ref.OrderID, owner)
	}
	if err != nil {
		return Order{}, err
	}
	if digest(o) != ref.Digest {
		return Order{}, apperr.New(apperr.SnapshotIntegrity, "order %s changed since it was first returned (its row no longer matches the stored digest); refusing to replay it", o.ID)
	}
	return o, nil
}

// find reads one order of owner.
func (p OrderPolicy) find(ctx context.Context, owner, id string) (Order, error) {
	o := Order{ID: id}
	err := p.Pool.QueryRow(ctx, `SELECT sku, quantity, amount_cents, created_at FROM `+pgx.Identifier{p.Schema, "orders"}.Sanitize()+`
		WHERE owner_id = $1 AND id = $2`, owner, id).Scan(&o.SKU, &o.Quantity, &o.AmountCents, &o.CreatedAt)
	o.CreatedAt = o.CreatedAt.UTC()
	return o, err
}

// digest is the SHA-256 of the order as the API renders it.
func digest(o Order) string {
	b, _ := json.Marshal(o)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func newID(prefix string) string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + strconv.FormatInt(time.Now().UnixMilli(), 36) + hex.EncodeToString(b[:])
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
