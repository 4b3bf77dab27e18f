// Package idem is an idempotency runner for Go services over PostgreSQL (pgx): a request with an
// Idempotency-Key runs at most once per owner and key, and every retry gets the exact first
// result back. Unlike a middleware that caches whole responses in a separate store, the key's
// reservation and its success commit in the same PostgreSQL transaction as the service's own
// writes — a crash between the business write and the cache write cannot run the work twice —
// and a replay restores the first result from the service's own immutable rows through a
// versioned ResultPolicy, so no response body is ever stored.
//
// # From go get to a replayed request
//
// Add the module:
//
//	go get github.com/idemwork/idemwork
//
// Create the runner's table, in a schema of your choice, once at start-up (or copy
// MigrationFiles into your own goose migrations):
//
//	if _, err := idem.Migrate(ctx, pool, "shop"); err != nil { … }
//
// Make one Runner per process over your pool:
//
//	runner := idem.NewRunner(idem.PoolDriver(pool), idem.Options{Schema: "shop"})
//
// Write a ResultPolicy for each kind of result: it stores the minimal reference of a result (the
// order's id) and restores the result from your rows, reading only inside the owner:
//
//	type orderPolicy struct{ pool *pgxpool.Pool }
//	func (orderPolicy) Name() string     { return "order-reference-v1" }
//	func (orderPolicy) Fields() []string { return []string{"orderId"} }
//	func (orderPolicy) Serialize(o Order) (json.RawMessage, error) { … {"orderId": o.ID} … }
//	func (p orderPolicy) Restore(ctx context.Context, owner, module string, ref json.RawMessage) (Order, error) { … SELECT … }
//
// Run the write. The work gets the transaction that holds the key's reservation, as a pgx.Tx;
// what it writes commits with the key's SUCCEEDED row or not at all. Writes it Queues travel
// with that row and the COMMIT, in one round trip:
//
//	res, err := idem.Run(ctx, runner, idem.Request{Owner: owner, Key: key, Operation: "shop:order:create", Body: body},
//		orderPolicy{pool}, func(ctx context.Context, tx *idem.Tx) (Order, error) {
//			o := Order{ID: newID(), …}
//			tx.Queue(`INSERT INTO shop.orders …`, …)
//			tx.Queue(`INSERT INTO shop.payment_outbox …`, …)
//			return o, nil
//		})
//
// The first call's res.Outcome is EXECUTED. The same request again — from this process or any
// other on the database — is REPLAYED with the same value, restored by the policy (or JOINED,
// sharing a call of this process still running); the work does not run again. The same key with
// another body is IDEMPOTENCY_KEY_REUSED (422), with another operation
// IDEMPOTENCY_SCOPE_CONFLICT (409). Errors carry the codes of package apperr.
//
// Over HTTP, package idemhttp is the middleware of draft-ietf-httpapi-idempotency-key-header
// around the same runner; examples/shop in the repository is a whole service built on both,
// which the idemwork workbench inspects and storms (idemwork keys --dsn … --schema shop).
//
// # What the runner guarantees
//
// RunPrepared follows the flow of the specification (SPEC §4.2): a committed SUCCEEDED row is
// a hit — operation, fingerprint and policy name are checked in that order, the policy restores,
// nothing is written and prepare and work never run; otherwise an INSERT reserves the key
// (waiting on the unique index while another transaction holds it), prepare reads and
// validates, work writes, and the SUCCEEDED envelope is written in the same transaction. Any
// error rolls all of it back: no failure is cached. A leftover PROCESSING row is never treated
// as success nor re-executed (IDEMPOTENCY_IN_PROGRESS until it expires); an expired key is
// deleted and reserved again; a replay never extends a key's life. PostgreSQL's unique index
// arbitrates between processes; in-process sharing only saves duplicate work.
//
// Nothing depends on session state: every statement names the runner's schema, and a
// Driver's transactions set what they need per transaction, so the runner works through a
// transaction-pooling pgbouncer. A call may also run inside the caller's own transaction
// (Request.Tx), as River's InsertTx does.
package idem
