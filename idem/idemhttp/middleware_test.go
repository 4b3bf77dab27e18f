package idemhttp_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemhttp"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/testdb"
)

const key = "Idempotency-Key"

// A retry with the same key gets the first answer byte for byte — status, body, Location —
// restored from the order's row; only the outcome headers say it is a replay. The order is
// written once.
func TestARetryGetsTheFirstAnswerByteForByteAndTheWorkRunsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, idem.Options{}, idemhttp.Options{})
	first := b.post(t, "/orders", `{"sku":"tea","quantity":2}`, key, `"8e03978e-40d5-43e8-bc93-6894a57f9324"`)
	require.Equal(t, http.StatusCreated, first.status, first.body)
	require.Equal(t, "EXECUTED", first.header.Get(idemtype.HeaderOutcome))
	require.Empty(t, first.header.Get(idemtype.HeaderReplayed))
	require.JSONEq(t, `{"id":"o1","sku":"tea","quantity":2}`, first.body)
	// The bare spelling names the same key; a reordered body is the same request.
	again := b.post(t, "/orders", `{"quantity": 2, "sku": "tea"}`, key, `8e03978e-40d5-43e8-bc93-6894a57f9324`)
	require.Equal(t, first.status, again.status)
	require.Equal(t, first.body, again.body, "byte-identical")
	require.Equal(t, first.header.Get("Location"), again.header.Get("Location"))
	require.Equal(t, "REPLAYED", again.header.Get(idemtype.HeaderOutcome))
	require.Equal(t, "true", again.header.Get(idemtype.HeaderReplayed))
	require.Equal(t, int32(1), b.works.Load())
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM orders`))
}

// The header contract of idemwork serve (SPEC §10.3, §9): a malformed key is 400; a key bound to
// another operation (another path) is 409; reused with another body, 422; a body over the cap,
// 413; without the owner function's blessing, 401 — each with the coded JSON error body, and
// nothing written.
func TestTheHeaderContractRefusesWhatItMustWithCodedBodies(t *testing.T) {
	t.Parallel()
	b := setup(t, idem.Options{}, idemhttp.Options{MaxBodyBytes: 1 << 10})
	for name, headers := range map[string][]string{
		"empty":                  {key, ""},
		"whitespace":             {key, "   "},
		"repeated":               {key, "a", key, "b"},
		"unterminated sf-string": {key, `"abc`},
		"a space in a bare key":  {key, "a b"},
	} {
		a := b.post(t, "/orders", `{"sku":"tea","quantity":1}`, headers...)
		require.Equal(t, http.StatusBadRequest, a.status, "%s: %s", name, a.body)
		require.Equal(t, "BAD_REQUEST", a.code(), name)
	}
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM idempotency_record`))

	ok := b.post(t, "/orders", `{"sku":"tea","quantity":1}`, key, "k")
	require.Equal(t, http.StatusCreated, ok.status, ok.body)
	scope := b.post(t, "/orders/o1/gift", `{"sku":"tea","quantity":1}`, key, "k")
	require.Equal(t, http.StatusConflict, scope.status, scope.body)
	require.Equal(t, "IDEMPOTENCY_SCOPE_CONFLICT", scope.code())
	reused := b.post(t, "/orders", `{"sku":"tea","quantity":5}`, key, "k")
	require.Equal(t, http.StatusUnprocessableEntity, reused.status, reused.body)
	require.Equal(t, "IDEMPOTENCY_KEY_REUSED", reused.code())
	big := b.post(t, "/orders", `{"sku":"`+strings.Repeat("t", 2<<10)+`","quantity":1}`, key, "k2")
	require.Equal(t, http.StatusRequestEntityTooLarge, big.status, big.body)
	require.Equal(t, "PAYLOAD_TOO_LARGE", big.code())
	anon := b.post(t, "/orders", `{"sku":"tea","quantity":1}`, key, "k3", "X-Owner-Id", "")
	require.Equal(t, http.StatusUnauthorized, anon.status, anon.body)
	badOwner := b.post(t, "/orders", `{"sku":"tea","quantity":1}`, key, "k3", "X-Owner-Id", "a/b")
	require.Equal(t, http.StatusUnprocessableEntity, badOwner.status, badOwner.body)
	require.Equal(t, "VALIDATION_FAILED", badOwner.code())
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM orders`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM idempotency_record`))

	// A write the server refuses (quantity 0 fails the table's CHECK) caches nothing: the key
	// then runs the corrected request.
	bad := b.post(t, "/orders", `{"sku":"tea","quantity":0}`, key, "k4")
	require.Equal(t, http.StatusInternalServerError, bad.status, bad.body)
	require.Equal(t, "INTERNAL", bad.code())
	require.Contains(t, bad.body, "SQLSTATE 23514")
	require.NotContains(t, bad.body, "orders_quantity_check", "never the driver's text")
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM idempotency_record WHERE idempotency_key = 'k4'`))
}

// RequireKey makes a keyless write 400; without it a keyless write runs, unkeyed, every time.
func TestAKeylessWriteRunsEachTimeUnlessAKeyIsRequired(t *testing.T) {
	t.Parallel()
	b := setup(t, idem.Options{}, idemhttp.Options{})
	for range 2 {
		a := b.post(t, "/orders", `{"sku":"tea","quantity":1}`)
		require.Equal(t, http.StatusCreated, a.status, a.body)
		require.Equal(t, "EXECUTED", a.header.Get(idemtype.HeaderOutcome))
	}
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM orders`))
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM idempotency_record`))

	strict := setup(t, idem.Options{}, idemhttp.Options{RequireKey: true})
	a := strict.post(t, "/orders", `{"sku":"tea","quantity":1}`)
	require.Equal(t, http.StatusBadRequest, a.status, a.body)
	require.Contains(t, a.body, "Idempotency-Key")
}

// Concurrent requests with one key execute once: the rest share the leader's result (JOINED) or
// replay it, every body the same bytes.
func TestConcurrentRequestsWithOneKeyExecuteOnceAndAnswerTheSameBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, idem.Options{}, idemhttp.Options{})
	const n = 24
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i] = b.post(t, "/orders", `{"sku":"tea","quantity":3}`, key, "storm") })
	}
	wg.Wait()
	outcomes := map[string]int{}
	for _, a := range answers {
		require.Equal(t, http.StatusCreated, a.status, a.body)
		require.Equal(t, answers[0].body, a.body)
		outcomes[a.header.Get(idemtype.HeaderOutcome)]++
	}
	require.Equal(t, 1, outcomes["EXECUTED"], "%v", outcomes)
	require.Equal(t, n-1, outcomes["REPLAYED"]+outcomes["JOINED"], "%v", outcomes)
	require.Equal(t, int32(1), b.works.Load())
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM orders`))
}

// Past an owner's share of the pool a write is 503 OVERLOADED with Retry-After, and nothing is
// written for it.
func TestPastTheOwnersShareAWriteIs503OverloadedWithRetryAfter(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	b := setup(t, idem.Options{Limits: idem.Limits{OwnerMaxConns: 1, AcquireTimeout: 100 * time.Millisecond}}, idemhttp.Options{})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slow := make(chan struct{})
	go func() {
		defer close(slow)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/orders", strings.NewReader(`{"sku":"slow","quantity":1}`))
		req.Header.Set("X-Owner-Id", "alice")
		req.Header.Set(key, "holder")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}()
	require.Eventually(t, func() bool { return b.runner.Stats().OwnerConns == 1 }, time.Minute, 5*time.Millisecond)
	a := b.post(t, "/orders", `{"sku":"tea","quantity":1}`, key, "second")
	require.Equal(t, http.StatusServiceUnavailable, a.status, a.body)
	require.Equal(t, "OVERLOADED", a.code())
	require.Equal(t, "1", a.header.Get("Retry-After"))
	// Another owner has a share of its own.
	bob := b.post(t, "/orders", `{"sku":"tea","quantity":1}`, key, "second", "X-Owner-Id", "bob")
	require.Equal(t, http.StatusCreated, bob.status, bob.body)
	cancel()
	<-slow
	require.Equal(t, 0, b.count(t, `SELECT count(*) FROM idempotency_record WHERE owner_id = 'alice'`), "the cancelled write left nothing")
}

// A handler that runs a write without the middleware in front fails loudly (500), never runs
// the write unkeyed.
func TestAWriteWithoutTheMiddlewareInFrontIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, idem.Options{}, idemhttp.Options{})
	a := b.post(t, "/unwrapped", `{"sku":"tea","quantity":1}`, key, "k")
	require.Equal(t, http.StatusInternalServerError, a.status, a.body)
	require.Contains(t, a.body, "idemhttp.Middleware")
	require.Equal(t, int32(0), b.works.Load())
}
