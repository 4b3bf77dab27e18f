package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/httpapi"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/internal/testgate"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/wire"
)

// outcomeFields matches the two members a replay may change.
var outcomeFields = regexp.MustCompile(`"outcome":"[A-Z]+","waited":(true|false),`)

// send posts raw bytes and returns status, headers and the raw body.
func (b *testBundle) send(t *testing.T, method, path, body string, headers ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, b.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := b.c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(raw)
}

func (b *testBundle) records(t *testing.T, owner string) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM record WHERE owner_id = $1`, owner).Scan(&n))
	return n
}

// SPEC §6: the first response is built from what was stored; every replay carries the same
// bytes apart from outcome and waited, createdAt and updatedAt included.
func TestAReplayIsByteForByteTheFirstResponse(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	body := `{"title":"bytes <&>","summary":"a\nb","payload":{"zz":1e3,"a":[1.0,-0,2.50],"n":{"y":"\u00e9","x":null},"dup":"no"}}`
	status, h, first := b.send(t, "POST", "/v1/modules/NOTE/records", body, key("bytes-1")...)
	require.Equal(t, http.StatusCreated, status, first)
	require.Equal(t, "EXECUTED", h.Get(idemtype.HeaderOutcome))
	require.Contains(t, first, `"payload":{"a":[1.0,0,2.50],"n":{"x":null,"y":"é"},"zz":1000,"dup":"no"}`, "the canonical form, as jsonb stores it")
	for _, again := range []string{body, `{"payload":{"dup":"no","n":{"x":null,"y":"é"},"a":[1.0,0,2.50],"zz":1000},"summary":"a\nb","title":"bytes <&>"}`} {
		status, h, replay := b.send(t, "POST", "/v1/modules/NOTE/records", again, key("bytes-1")...)
		require.Equal(t, http.StatusCreated, status, replay)
		require.Equal(t, "REPLAYED", h.Get(idemtype.HeaderOutcome))
		require.Equal(t, outcomeFields.ReplaceAllString(first, ""), outcomeFields.ReplaceAllString(replay, ""))
	}
	var rec struct {
		Record struct{ ID string } `json:"record"`
	}
	require.NoError(t, json.Unmarshal([]byte(first), &rec))
	status, _, f1 := b.send(t, "POST", "/v1/modules/NOTE/records/"+rec.Record.ID+"/features/F01", `{"input":{"b":2E1,"a":true}}`, key("bytes-f")...)
	require.Equal(t, http.StatusOK, status, f1)
	_, _, f2 := b.send(t, "POST", "/v1/modules/NOTE/records/"+rec.Record.ID+"/features/F01", `{"input":{"a":true,"b":20}}`, key("bytes-f")...)
	require.Equal(t, outcomeFields.ReplaceAllString(f1, ""), outcomeFields.ReplaceAllString(f2, ""))
	require.Contains(t, f1, `"input":{"a":true,"b":20}`)
}

// Observation 1: the IETF draft's sf-string form and the bare key name one key.
func TestTheQuotedAndTheBareKeyAreTheSameKey(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	const uuid = "8e03978e-40d5-43e8-bc93-6894a57f9324"
	status, h, _ := b.send(t, "POST", "/v1/modules/NOTE/records", `{"title":"t"}`, idemtype.HeaderIdempotencyKey, `"`+uuid+`"`)
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, "EXECUTED", h.Get(idemtype.HeaderOutcome))
	status, h, raw := b.send(t, "POST", "/v1/modules/NOTE/records", `{"title":"t"}`, idemtype.HeaderIdempotencyKey, uuid)
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, "REPLAYED", h.Get(idemtype.HeaderOutcome))
	require.Contains(t, raw, `"key":"`+uuid+`"`, "stored without the quotes")
	status, h, _ = b.send(t, "POST", "/v1/modules/NOTE/records", `{"title":"t"}`, idemtype.HeaderIdempotencyKey, ` "`+uuid+`" `)
	require.Equal(t, http.StatusCreated, status)
	require.Equal(t, "REPLAYED", h.Get(idemtype.HeaderOutcome))
	// An escaped quote inside an sf-string is part of the key.
	status, _, raw = b.send(t, "POST", "/v1/modules/NOTE/records", `{"title":"t"}`, idemtype.HeaderIdempotencyKey, `"a\"b\\c"`)
	require.Equal(t, http.StatusCreated, status, raw)
	status, h, _ = b.send(t, "POST", "/v1/modules/NOTE/records", `{"title":"t"}`, idemtype.HeaderIdempotencyKey, `a"b\c`)
	require.Equal(t, "REPLAYED", h.Get(idemtype.HeaderOutcome), status)
	require.Equal(t, 2, b.records(t, "alice"))
}

// The header is an RFC 8941 Item: parameters after the string (which the draft does not define)
// are ignored, so a client that adds one names the same key.
func TestAQuotedKeysParametersAreIgnored(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	status, h, raw := b.send(t, "POST", "/v1/modules/NOTE/records", `{"title":"t"}`, idemtype.HeaderIdempotencyKey, `"a1";x=1`)
	require.Equal(t, http.StatusCreated, status, raw)
	require.Equal(t, "EXECUTED", h.Get(idemtype.HeaderOutcome))
	require.Contains(t, raw, `"key":"a1"`, "stored without the parameters")
	for _, v := range []string{`"a1"`, `a1`, `"a1";trace=?0;n=2.5`, `"a1";v="x;y"`} {
		status, h, raw = b.send(t, "POST", "/v1/modules/NOTE/records", `{"title":"t"}`, idemtype.HeaderIdempotencyKey, v)
		require.Equal(t, http.StatusCreated, status, "%s: %s", v, raw)
		require.Equal(t, "REPLAYED", h.Get(idemtype.HeaderOutcome), v)
	}
	require.Equal(t, 1, b.records(t, "alice"))
}

// Observation 2: a header the client sent is never dropped into an unkeyed write.
func TestEmptyRepeatedAndUnparsableHeadersAre400AndWriteNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	for _, c := range []struct {
		name    string
		headers []string
	}{
		{"empty key", []string{idemtype.HeaderIdempotencyKey, ""}},
		{"whitespace key", []string{idemtype.HeaderIdempotencyKey, "   "}},
		{"empty sf-string", []string{idemtype.HeaderIdempotencyKey, `""`}},
		{"unterminated sf-string", []string{idemtype.HeaderIdempotencyKey, `"abc`}},
		{"bad escape", []string{idemtype.HeaderIdempotencyKey, `"a\b"`}},
		{"text after the string that is not parameters", []string{idemtype.HeaderIdempotencyKey, `"a" x`}},
		{"a parameter name in capitals", []string{idemtype.HeaderIdempotencyKey, `"a";X=1`}},
		{"a parameter without its value", []string{idemtype.HeaderIdempotencyKey, `"a";x=`}},
		{"two keys", []string{idemtype.HeaderIdempotencyKey, "k1", idemtype.HeaderIdempotencyKey, "k1"}},
		{"two Authorization headers", []string{"Authorization", "Bearer " + bobToken}},
	} {
		for i := 0; i < 3; i++ {
			status, h, raw := b.send(t, "POST", "/v1/modules/NOTE/records", `{"title":"t"}`, c.headers...)
			require.Equal(t, http.StatusBadRequest, status, "%s: %s", c.name, raw)
			require.Equal(t, "application/json; charset=utf-8", h.Get("Content-Type"))
			require.Contains(t, raw, `"code":"BAD_REQUEST"`, c.name)
		}
	}
	require.Zero(t, b.records(t, "alice"), "three identical requests made no record at all")
	require.Zero(t, b.records(t, "bob"))
}

func TestRequireKeyMakesAKeylessWrite400(t *testing.T) {
	t.Parallel()
	b := setupWith(t, serverOptions{db: testdb.Options{MaxConns: 10}, api: func(o *httpapi.Options) { o.RequireKey = true }})
	status, _, raw := b.send(t, "POST", "/v1/modules/NOTE/records", `{"title":"t"}`)
	require.Equal(t, http.StatusBadRequest, status, raw)
	require.Contains(t, raw, "require_key")
	status, _, raw = b.send(t, "POST", "/v1/modules/NOTE/records", `{"title":"t"}`, key("k")...)
	require.Equal(t, http.StatusCreated, status, raw)
	require.Equal(t, 1, b.records(t, "alice"))
}

// Observations 3 and 4: duplicate names and invalid UTF-8 are refused naming the member, never
// resolved "last wins" or replaced by U+FFFD.
func TestDuplicateNamesAndInvalidUTF8InABodyAre422NamingTheField(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	for _, c := range []struct{ body, field, why string }{
		{`{"title":"a","title":"b"}`, `title: `, "twice"},
		{`{"title":"t","payload":{"dup":1,"dup":2}}`, `payload.dup: `, "twice"},
		{"{\"title\":\"bad \xff\"}", `title: `, "UTF-8"},
		{"{\"title\":\"t\",\"payload\":{\"a\":[\"\xc3\x28\"]}}", `payload.a[0]: `, "UTF-8"},
		{`{"title":"t","payload":{"a":"\ud800"}}`, `payload.a: `, "surrogate"},
		{`{"title":"\u001b[2J"}`, `title: `, "U+001B"},
		{`{"title":"t","summary":"ok\n\u0007"}`, `summary: `, "U+0007"},
	} {
		status, _, raw := b.send(t, "POST", "/v1/modules/NOTE/records", c.body, key("k")...)
		require.Equal(t, http.StatusUnprocessableEntity, status, "%q: %s", c.body, raw)
		var e wire.ErrorBody
		require.NoError(t, json.Unmarshal([]byte(raw), &e))
		require.Equal(t, "VALIDATION_FAILED", string(e.Error.Code))
		require.True(t, strings.HasPrefix(e.Error.Message, c.field), "%q: %s", c.body, e.Error.Message)
		require.Contains(t, e.Error.Message, c.why)
	}
	require.Zero(t, b.records(t, "alice"))
}

// Observation 6: net/http's own answers (a control character in a header value) are the JSON
// error object too, and every answer carries a request id.
func TestNetHTTPsOwnErrorsAreTheJSONErrorObject(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	addr := strings.TrimPrefix(b.url, "http://")
	for _, raw := range []string{
		"POST /v1/modules/NOTE/records HTTP/1.1\r\nHost: x\r\nIdempotency-Key: a\x01b\r\nContent-Length: 2\r\n\r\n{}",
		"GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: something\r\n\r\n",
		"GET /healthz HTTP/1.1\r\n\r\n", // no Host
		"GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
	} {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, err = c.Write([]byte(raw))
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err, "%q", raw)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		_ = c.Close()
		require.GreaterOrEqual(t, resp.StatusCode, 400, "%q", raw)
		require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"), "%q: %s", raw, body)
		var e wire.ErrorBody
		require.NoError(t, json.Unmarshal(body, &e), "%q: %s", raw, body)
		require.Equal(t, resp.StatusCode, e.Error.Status)
		require.NotEmpty(t, e.Error.Code)
	}
	// A request id is echoed when it is sane, generated otherwise.
	_, h, _ := b.send(t, "GET", "/healthz", "", httpapi.HeaderRequestID, "req-42")
	require.Equal(t, "req-42", h.Get(httpapi.HeaderRequestID))
	_, h, _ = b.send(t, "GET", "/healthz", "", httpapi.HeaderRequestID, "bad id with spaces")
	require.Regexp(t, `^[0-9a-f]{24}$`, h.Get(httpapi.HeaderRequestID))
	require.Contains(t, b.log.String(), "request_id=req-42")
}

func TestHealthReadinessAndMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	status, _, raw := b.send(t, "GET", "/healthz", "")
	require.Equal(t, http.StatusOK, status, raw)
	status, _, raw = b.send(t, "GET", "/readyz", "")
	require.Equal(t, http.StatusOK, status, raw)
	require.Contains(t, raw, `"ready":true`)
	b.send(t, "POST", "/v1/modules/NOTE/records", `{"title":"t"}`, key("m")...)
	b.send(t, "POST", "/v1/modules/NOTE/records", `{"title":"t"}`, key("m")...)
	b.send(t, "POST", "/v1/modules/NOTE/records", `{"title":""}`, key("m2")...)
	resp, err := http.Get(b.url + "/metrics")
	require.NoError(t, err)
	text, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Contains(t, resp.Header.Get("Content-Type"), "text/plain")
	for _, want := range []string{
		`idemwork_http_requests_total{method="POST",outcome="EXECUTED",route="POST /v1/modules/{module}/records",status="201"} 1`,
		`idemwork_http_requests_total{method="POST",outcome="REPLAYED",route="POST /v1/modules/{module}/records",status="201"} 1`,
		`idemwork_http_requests_total{method="POST",outcome="VALIDATION_FAILED",route="POST /v1/modules/{module}/records",status="422"} 1`,
		`idemwork_http_request_duration_seconds_bucket{outcome="EXECUTED",route="POST /v1/modules/{module}/records",le="10"} 1`,
		"idemwork_inflight_flights 0", "idemwork_inflight_followers 0", "idemwork_db_pool_max_conns 40",
		"idemwork_unique_index_waits_total 0", "idemwork_key_queue_waiting 0",
	} {
		require.Contains(t, string(text), want)
	}

	// An unmigrated database is not ready, and says what to run.
	bare := testdb.New(t)
	_, err = bare.Pool.Exec(context.Background(), `DELETE FROM goose_db_version WHERE version_id > 0`)
	require.NoError(t, err)
	nb := setupOver(t, bare)
	status, _, raw = nb.send(t, "GET", "/readyz", "")
	require.Equal(t, http.StatusServiceUnavailable, status, raw)
	require.Contains(t, raw, `"code":"SCHEMA_NOT_READY"`)
	require.Contains(t, raw, "idemwork migrate")
}

// Observation 6: a client that goes away is logged 499 and is not a server error.
func TestAClientThatLeftIsLogged499(t *testing.T) {
	t.Parallel()
	reached := make(chan struct{})
	var once sync.Once
	b := setupWith(t, serverOptions{db: testdb.Options{MaxConns: 10}, faults: func(ctx context.Context, step string) error {
		if step == kernel.StepReserved {
			// Slow work, still in its transaction when the client leaves.
			once.Do(func() { close(reached) })
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", b.url+"/v1/modules/NOTE/records", strings.NewReader(`{"title":"t"}`))
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	req.Header.Set(idemtype.HeaderIdempotencyKey, "gone")
	done := make(chan error, 1)
	go func() {
		resp, err := b.c.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		done <- err
	}()
	select {
	case <-reached:
	case <-time.After(time.Minute):
		t.Fatal("the request never reached its work")
	}
	cancel()
	require.Error(t, <-done)
	require.Eventually(t, func() bool { return strings.Contains(b.log.String(), "status=499") }, 10*time.Second, 10*time.Millisecond)
	log := b.log.String()
	require.Contains(t, log, "outcome=CLIENT_CLOSED_REQUEST")
	require.NotContains(t, log, "status=500")
	require.Zero(t, b.records(t, "alice"), "the cancelled write rolled back")
	resp, err := http.Get(b.url + "/metrics")
	require.NoError(t, err)
	text, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Contains(t, string(text), `status="499"`)
	require.NotContains(t, string(text), `status="500"`)
}

// Observation 5: a stalled leader and 100 no-share requests on its key cannot take the pool
// from another owner.
func TestOneKeysQueueCannotStarveAnotherOwner(t *testing.T) {
	t.Parallel()
	gate := testgate.New(t)
	defer gate.Open() // before the server and database are closed, even when the test fails
	wrap, faults := holdAt(gate)
	b := setupWith(t, serverOptions{db: testdb.Options{MaxConns: 64, AcquireTimeout: 2 * time.Second}, wrap: wrap, faults: faults})
	// bob has a record to read.
	bobRec := b.as(t, bobToken, "POST", "/v1/modules/NOTE/records", `{"title":"bob's"}`)
	require.Equal(t, http.StatusCreated, bobRec.status, bobRec.raw)
	bobID := bobRec.record()["id"].(string)

	var wg sync.WaitGroup
	statuses := make(chan int, 101)
	fire := func() {
		defer wg.Done()
		req, _ := http.NewRequest("POST", b.url+"/v1/modules/NOTE/records", strings.NewReader(`{"title":"stall"}`))
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		req.Header.Set(idemtype.HeaderIdempotencyKey, "stalled")
		req.Header.Set(httpapi.HeaderShare, "off")
		req.Header.Set("X-Test-Hold", "1") // only the leader reaches the step; the others queue behind its key
		resp, err := b.c.Do(req)
		if err != nil {
			statuses <- -1
			return
		}
		_ = resp.Body.Close()
		statuses <- resp.StatusCode
	}
	wg.Add(1)
	go fire()
	gate.AwaitHeld(t) // the leader holds the key in an open transaction
	for range 100 {
		wg.Add(1)
		go fire()
	}
	// Let the queue build: the requests that may go to the database wait on the unique index,
	// the rest in-process.
	require.Eventually(t, func() bool {
		n, err := waitingOnIndex(b)
		return err == nil && n >= idem.DefaultKeyMaxConns-1 && b.k.Runner().Stats().KeyWaiting >= 100-idem.DefaultKeyMaxConns
	}, 20*time.Second, 10*time.Millisecond)
	// bob's read must be answered while alice's leader still holds the key (the gate opens only
	// after it): a read queued behind her key would wait here until the minute is out, and a
	// read that found the pool taken by her queue would be 503 OVERLOADED after the 2 s acquire
	// timeout. No wall-clock bound on a healthy answer: a loaded CI machine stretches those.
	type answer struct {
		status int
		raw    string
		err    error
	}
	read := make(chan answer, 1)
	go func() { // no require off the test's goroutine
		req, _ := http.NewRequest("GET", b.url+"/v1/modules/NOTE/records/"+bobID, nil)
		req.Header.Set("Authorization", "Bearer "+bobToken)
		resp, err := b.c.Do(req)
		if err != nil {
			read <- answer{err: err}
			return
		}
		raw, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		read <- answer{status: resp.StatusCode, raw: string(raw), err: err}
	}()
	var r answer
	select {
	case r = <-read:
	case <-time.After(time.Minute):
		t.Fatal("another owner's read was still waiting a minute into alice's stalled key: it is queued behind her key")
	}
	require.NoError(t, r.err)
	require.Equal(t, http.StatusOK, r.status, "another owner's read while alice's key is stalled: %s", r.raw)
	inUse := b.db.Pool.Stat().AcquiredConns()
	require.LessOrEqual(t, inUse, int32(idem.DefaultKeyMaxConns+2), "the stalled key holds at most its share of connections")

	gate.Open()
	wg.Wait()
	close(statuses)
	for s := range statuses {
		require.Equal(t, http.StatusCreated, s)
	}
	require.Equal(t, 1, b.records(t, "alice"))
}

func waitingOnIndex(b *testBundle) (int, error) {
	var n int
	err := b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO %idempotency_record%'`).Scan(&n)
	return n, err
}

// An owner past its share of the pool, or a pool with no free connection within the acquire
// timeout, is 503 OVERLOADED with Retry-After.
func TestPastTheOwnersShareAWriteIs503OverloadedWithRetryAfter(t *testing.T) {
	t.Parallel()
	gate := testgate.New(t)
	defer gate.Open()
	wrap, faults := holdAt(gate)
	b := setupWith(t, serverOptions{db: testdb.Options{MaxConns: 10}, wrap: wrap, faults: faults,
		runner: idem.Options{Limits: idem.Limits{OwnerMaxConns: 1, AcquireTimeout: 200 * time.Millisecond}}})
	done := make(chan int, 1)
	go func() {
		status, _, _ := b.send(t, "POST", "/v1/modules/NOTE/records", `{"title":"held"}`, "X-Test-Hold", "1", idemtype.HeaderIdempotencyKey, "held")
		done <- status
	}()
	gate.AwaitHeld(t)
	status, h, raw := b.send(t, "POST", "/v1/modules/NOTE/records", `{"title":"other"}`, key("other")...)
	require.Equal(t, http.StatusServiceUnavailable, status, raw)
	require.Contains(t, raw, `"code":"OVERLOADED"`)
	require.Equal(t, "1", h.Get("Retry-After"))
	// Another owner is not affected.
	r := b.as(t, bobToken, "POST", "/v1/modules/NOTE/records", `{"title":"bob"}`, key("bob")...)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	gate.Open()
	require.Equal(t, http.StatusCreated, <-done)
}

// setupOver serves an API over an existing test database.
func setupOver(t *testing.T, db *testdb.DB) *testBundle {
	t.Helper()
	return setupWith(t, serverOptions{existing: db})
}

// holdMarked is the mark holdAt puts on the context of a request carrying X-Test-Hold.
type holdMarked struct{}

// holdAt returns a handler wrapper that marks requests carrying the header X-Test-Hold, and the
// kernel faults that hold a marked request at the step just after its reservation, until gate
// opens.
func holdAt(gate *testgate.Gate) (func(http.Handler) http.Handler, kernel.FaultFunc) {
	wrap := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Test-Hold") != "" {
				r = r.WithContext(context.WithValue(r.Context(), holdMarked{}, true))
			}
			h.ServeHTTP(w, r)
		})
	}
	faults := func(ctx context.Context, step string) error {
		if step == kernel.StepReserved && ctx.Value(holdMarked{}) != nil {
			gate.Hold()
		}
		return nil
	}
	return wrap, faults
}

// A client picks the method and the path, up to the 64 KiB header limit: the refusal and the
// access log echo a bounded, marked piece of them, so one request cannot write a 60 KB log line.
func TestALongMethodOrPathIsEchoedCutNeverWhole(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	method, path := strings.Repeat("M", 20_000), "/v1/"+strings.Repeat("p", 20_000)
	r := b.do(t, method, path, nil)
	require.Equal(t, http.StatusNotFound, r.status, r.raw)
	require.Less(t, len(r.raw), 2_000, "the refusal echoes a piece of what was sent")
	require.Contains(t, r.raw, "MMM…")
	require.Eventually(t, func() bool { return strings.Contains(b.log.String(), "status=404") }, 10*time.Second, 10*time.Millisecond)
	for line := range strings.Lines(b.log.String()) {
		require.Less(t, len(line), 2_500, "an access log line is bounded: %.200s", line)
	}
}
