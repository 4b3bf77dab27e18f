package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/httpapi"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/storm"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

func TestMain(m *testing.M) { testdb.Main(m) }

const (
	aliceToken = "token-alice-0001"
	bobToken   = "token-bob-00002"
	maxBody    = 8 << 10
)

type testBundle struct {
	db   *testdb.DB
	k    *kernel.Kernel
	url  string
	log  *syncBuffer
	c    *http.Client
	stop func() error
}

// setup serves the API over a fresh database on a real 127.0.0.1 socket.
func setup(t *testing.T, devAuth bool) *testBundle { t.Helper(); return setupWrapped(t, devAuth, nil) }

// setupWrapped is setup with the API handler wrapped (nil: not wrapped), for tests that must
// know when a request has reached the server.
func setupWrapped(t *testing.T, devAuth bool, wrap func(http.Handler) http.Handler) *testBundle {
	t.Helper()
	return setupWith(t, serverOptions{devAuth: devAuth, wrap: wrap, db: testdb.Options{MaxConns: 40}})
}

// serverOptions tune setupWith.
type serverOptions struct {
	devAuth bool
	wrap    func(http.Handler) http.Handler
	db      testdb.Options
	runner  idem.Options
	// faults are injected into the kernel's writes (kernel.WithFaults).
	faults kernel.FaultFunc
	api    func(*httpapi.Options)
	// existing serves over this database instead of a fresh one.
	existing *testdb.DB
}

func setupWith(t *testing.T, o serverOptions) *testBundle {
	t.Helper()
	ctx := testdb.Context(t)
	db := o.existing
	if db == nil {
		db = testdb.NewWith(t, o.db)
	}
	k := kernel.New(db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{Runner: o.runner})
	if o.faults != nil {
		k = k.WithFaults(o.faults)
	}
	log := &syncBuffer{}
	opts := httpapi.Options{Tokens: map[string]string{aliceToken: "alice", bobToken: "bob"},
		MaxBodyBytes: maxBody, DevAuth: o.devAuth, AccessLog: log}
	if o.api != nil {
		o.api(&opts)
	}
	api := httpapi.New(k, opts)
	wrap := o.wrap
	var h http.Handler = api
	if wrap != nil {
		h = wrap(api)
	}
	ln, err := httpapi.Listen("127.0.0.1:0", false)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- httpapi.Serve(ctx, httpapi.NewServer(h, nil), ln, 5*time.Second) }()
	var once sync.Once
	var serveErr error
	stop := func() error {
		once.Do(func() { cancel(); serveErr = <-done })
		return serveErr
	}
	t.Cleanup(func() { _ = stop() })
	return &testBundle{db: db, k: k, url: "http://" + ln.Addr().String(), log: log, c: &http.Client{Timeout: time.Minute}, stop: stop}
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (r response) code() string {
	if e, ok := r.body["error"].(map[string]any); ok {
		return e["code"].(string)
	}
	return ""
}

func (r response) record() map[string]any {
	rec, _ := r.body["record"].(map[string]any)
	return rec
}

// do sends a request; headers are name, value pairs.
func (b *testBundle) do(t *testing.T, method, path string, body io.Reader, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, b.url+path, body)
	require.NoError(t, err)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := b.c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := response{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"), "%s %s: %s", method, path, raw)
	require.NoError(t, json.Unmarshal(raw, &r.body), "body must be one JSON object: %s", raw)
	return r
}

func (b *testBundle) as(t *testing.T, token, method, path, body string, headers ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	return b.do(t, method, path, rd, append([]string{"Authorization", "Bearer " + token, "Content-Type", "application/json"}, headers...)...)
}

func key(k string) []string { return []string{idemtype.HeaderIdempotencyKey, k} }

func TestCreateReplayPatchActionAndReads(t *testing.T) {
	t.Parallel()
	b := setup(t, false)

	created := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", `{"title":"hello","payload":{"n":1}}`, key("c-1")...)
	require.Equal(t, http.StatusCreated, created.status, created.raw)
	require.Equal(t, "EXECUTED", created.body["outcome"])
	require.Empty(t, created.header.Get(idemtype.HeaderReplayed))
	rec := created.record()
	id := rec["id"].(string)
	require.Equal(t, "alice", rec["ownerId"])
	require.Equal(t, "/v1/modules/NOTE/records/"+id, created.header.Get("Location"))
	require.Equal(t, map[string]any{"recordId": id, "revision": float64(1)}, created.body["envelope"].(map[string]any)["result"])

	// The same request again (keys reordered, spaces added): the exact first result, flagged.
	replay := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", `{ "payload": {"n":1}, "title": "hello" }`, key("c-1")...)
	require.Equal(t, http.StatusCreated, replay.status, replay.raw)
	require.Equal(t, "REPLAYED", replay.body["outcome"])
	require.Equal(t, "true", replay.header.Get(idemtype.HeaderReplayed))
	require.Equal(t, rec, replay.record())

	patched := b.as(t, aliceToken, "PATCH", "/v1/modules/NOTE/records/"+id, `{"expectRevision":1,"title":"second"}`, key("p-1")...)
	require.Equal(t, http.StatusOK, patched.status, patched.raw)
	require.Equal(t, "EXECUTED", patched.body["outcome"])
	require.Equal(t, float64(2), patched.record()["revision"])

	// After the record moved on, the create's replay still returns revision 1.
	replay = b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", `{"title":"hello","payload":{"n":1}}`, key("c-1")...)
	require.Equal(t, float64(1), replay.record()["revision"])
	require.Equal(t, "hello", replay.record()["title"])

	action := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records/"+id+"/features/F01", "", key("a-1")...)
	require.Equal(t, http.StatusOK, action.status, action.raw)
	exec := action.body["execution"].(map[string]any)
	require.Equal(t, "SUCCEEDED", exec["status"])
	require.Equal(t, float64(3), action.record()["revision"])
	again := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records/"+id+"/features/F01", `{}`, key("a-1")...)
	require.Equal(t, "REPLAYED", again.body["outcome"], again.raw)
	require.Equal(t, exec["id"], again.body["execution"].(map[string]any)["id"])

	detail := b.as(t, aliceToken, "GET", "/v1/modules/NOTE/records/"+id, "")
	require.Equal(t, http.StatusOK, detail.status, detail.raw)
	require.Equal(t, float64(3), detail.record()["revision"])
	require.Len(t, detail.body["revisions"], 1, "the latest revision only; links.revisions reads them all")
	require.Equal(t, float64(3), detail.body["revisions"].([]any)[0].(map[string]any)["revision"])
	require.Len(t, detail.body["executions"], 1)
	require.Len(t, detail.body["audit"], 3)
	for part, n := range map[string]int{"revisions": 3, "executions": 1, "audit": 3} {
		r := b.as(t, aliceToken, "GET", "/v1/modules/NOTE/records/"+id+"/"+part, "")
		require.Equal(t, http.StatusOK, r.status, r.raw)
		require.Len(t, r.body[part], n, part)
	}
	k := b.as(t, aliceToken, "GET", "/v1/keys/c-1", "")
	require.Equal(t, http.StatusOK, k.status, k.raw)
	require.Equal(t, "NOTE:record:create", k.body["operation"])
	require.Equal(t, float64(1), k.body["restored"].(map[string]any)["record"].(map[string]any)["revision"])
	require.Equal(t, float64(3), k.body["latest"].(map[string]any)["record"].(map[string]any)["revision"])

	// The access log has a line per request, with outcome and status, never a token.
	log := b.log.String()
	require.Contains(t, log, "status=201 outcome=EXECUTED")
	require.Contains(t, log, "status=201 outcome=REPLAYED")
	require.Contains(t, log, "path=/v1/modules/NOTE/records/"+id+"/features/F01 status=200 outcome=EXECUTED")
	require.NotContains(t, log, aliceToken)
	require.Equal(t, 11, strings.Count(log, "\n"), "one line per request")
}

func TestCommitmentReview(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	c := b.as(t, aliceToken, "POST", "/v1/modules/COMMITMENT/records", `{"title":"ship","payload":{"status":"OPEN"}}`)
	require.Equal(t, http.StatusCreated, c.status, c.raw)
	id := c.record()["id"].(string)
	r := b.as(t, aliceToken, "POST", "/v1/modules/COMMITMENT/records/"+id+"/reviews", `{"verdict":"kept","comment":"done"}`, key("r-1")...)
	require.Equal(t, http.StatusCreated, r.status, r.raw)
	require.Equal(t, "EXECUTED", r.body["outcome"])
	r2 := b.as(t, aliceToken, "POST", "/v1/modules/COMMITMENT/records/"+id+"/reviews", `{"verdict":"kept","comment":"done"}`, key("r-1")...)
	require.Equal(t, "REPLAYED", r2.body["outcome"])
	require.Equal(t, "true", r2.header.Get(idemtype.HeaderReplayed))
	require.Equal(t, r.body["review"], r2.body["review"])
	wrong := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records/"+id+"/reviews", `{"verdict":"kept","comment":"x"}`)
	require.Equal(t, http.StatusNotFound, wrong.status, wrong.raw)
}

func TestErrorStatusesComeFromTheKernel(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	id := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", `{"title":"base"}`).record()["id"].(string)

	cases := []struct {
		name, method, path, body string
		headers                  []string
		status                   int
		code                     string
	}{
		{"scope conflict", "PATCH", "/v1/modules/NOTE/records/" + id, `{"expectRevision":1,"title":"x"}`, key("used-for-create"), 409, "IDEMPOTENCY_SCOPE_CONFLICT"},
		{"key reused with another body", "POST", "/v1/modules/NOTE/records", `{"title":"other"}`, key("used-for-create"), 422, "IDEMPOTENCY_KEY_REUSED"},
		{"stale revision", "PATCH", "/v1/modules/NOTE/records/" + id, `{"expectRevision":7,"title":"x"}`, nil, 409, "REVISION_CONFLICT"},
		{"legacy module", "POST", "/v1/modules/IDENTITY/records", `{"title":"x"}`, key("legacy"), 410, "LEGACY_WRITE_DISABLED"},
		{"unknown record", "GET", "/v1/modules/NOTE/records/NOPE", "", nil, 404, "RECORD_NOT_FOUND"},
		{"feature of unknown record", "POST", "/v1/modules/NOTE/records/NOPE/features/F01", "", nil, 404, "RECORD_NOT_FOUND"},
		{"validation", "POST", "/v1/modules/NOTE/records", `{"title":""}`, nil, 422, "VALIDATION_FAILED"},
		{"payload not an object", "POST", "/v1/modules/NOTE/records", `{"title":"t","payload":[1]}`, nil, 422, "VALIDATION_FAILED"},
		{"unparsable key (a bare value with a space)", "POST", "/v1/modules/NOTE/records", `{"title":"t"}`, key("has space"), 400, "BAD_REQUEST"},
		{"bad key (a quoted key with a space)", "POST", "/v1/modules/NOTE/records", `{"title":"t"}`, key(`"has space"`), 422, "VALIDATION_FAILED"},
		{"bad key (256 characters)", "POST", "/v1/modules/NOTE/records", `{"title":"t"}`, key(strings.Repeat("k", 256)), 422, "VALIDATION_FAILED"},
		{"unknown module", "POST", "/v1/modules/NOPE/records", `{"title":"t"}`, nil, 422, "VALIDATION_FAILED"},
		{"malformed JSON", "POST", "/v1/modules/NOTE/records", `{"title":`, nil, 400, "BAD_REQUEST"},
		{"not an object", "POST", "/v1/modules/NOTE/records", `["title"]`, nil, 400, "BAD_REQUEST"},
		{"trailing data", "POST", "/v1/modules/NOTE/records", `{"title":"t"} {}`, nil, 400, "BAD_REQUEST"},
		{"unknown field", "POST", "/v1/modules/NOTE/records", `{"title":"t","colour":"red"}`, nil, 400, "BAD_REQUEST"},
		{"wrong type", "PATCH", "/v1/modules/NOTE/records/" + id, `{"expectRevision":"1"}`, nil, 400, "BAD_REQUEST"},
		{"empty body", "POST", "/v1/modules/NOTE/records", "", nil, 400, "BAD_REQUEST"},
		{"unknown route", "GET", "/v2/things", "", nil, 404, "NOT_FOUND"},
		{"unknown record part", "GET", "/v1/modules/NOTE/records/" + id + "/secrets", "", nil, 404, "NOT_FOUND"},
		{"method", "DELETE", "/v1/modules/NOTE/records/" + id, "", nil, 405, "METHOD_NOT_ALLOWED"},
	}
	// The key the first two cases collide with.
	require.Equal(t, http.StatusCreated, b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", `{"title":"first"}`, key("used-for-create")...).status)
	for _, c := range cases {
		r := b.as(t, aliceToken, c.method, c.path, c.body, c.headers...)
		require.Equal(t, c.status, r.status, "%s: %s", c.name, r.raw)
		require.Equal(t, c.code, r.code(), "%s: %s", c.name, r.raw)
		require.Equal(t, float64(c.status), r.body["error"].(map[string]any)["status"], c.name)
	}
	// Nothing those requests did left a row behind: two creates, nothing else.
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM record_revision WHERE owner_id = 'alice'`).Scan(&n))
	require.Equal(t, 2, n)
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	id := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", `{"title":"alice's"}`, key("shared-key")...).record()["id"].(string)
	path := "/v1/modules/NOTE/records/" + id

	none := b.do(t, "GET", path, nil)
	require.Equal(t, http.StatusUnauthorized, none.status)
	require.Equal(t, "UNAUTHORIZED", none.code())
	require.Contains(t, none.header.Get("WWW-Authenticate"), "Bearer")

	for _, h := range []string{"Bearer not-a-token-at-all", "Basic YWxpY2U6eA==", "Bearer", "token-alice-0001"} {
		r := b.do(t, "GET", path, nil, "Authorization", h)
		require.Equal(t, http.StatusUnauthorized, r.status, h)
	}
	// A token acts only as its own owner: bob cannot see or write alice's record...
	require.Equal(t, http.StatusNotFound, b.as(t, bobToken, "GET", path, "").status)
	require.Equal(t, http.StatusNotFound, b.as(t, bobToken, "PATCH", path, `{"expectRevision":1,"title":"mine"}`).status)
	// ...nor name another owner in the body or in X-Owner-Id (refused without --dev-auth).
	body := b.as(t, bobToken, "POST", "/v1/modules/NOTE/records", `{"title":"x","owner":"alice"}`)
	require.Equal(t, http.StatusBadRequest, body.status, body.raw)
	hdr := b.as(t, bobToken, "GET", path, "", httpapi.HeaderDevOwner, "alice")
	require.Equal(t, http.StatusUnauthorized, hdr.status, hdr.raw)
	require.Contains(t, hdr.raw, "--dev-auth")
	dev := b.do(t, "GET", path, nil, httpapi.HeaderDevOwner, "alice")
	require.Equal(t, http.StatusUnauthorized, dev.status)
	// Bob's key space is his own: he cannot read alice's key, and the same key executes anew
	// for him.
	theirs := b.as(t, bobToken, "GET", "/v1/keys/shared-key", "")
	require.Equal(t, http.StatusNotFound, theirs.status, theirs.raw)
	mine := b.as(t, bobToken, "POST", "/v1/modules/NOTE/records", `{"title":"alice's"}`, key("shared-key")...)
	require.Equal(t, "EXECUTED", mine.body["outcome"], mine.raw)
	require.Equal(t, "bob", mine.record()["ownerId"])
	require.NotEqual(t, id, mine.record()["id"])
}

func TestDevAuthIsLoopbackOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	created := b.do(t, "POST", "/v1/modules/NOTE/records", strings.NewReader(`{"title":"dev"}`), httpapi.HeaderDevOwner, "carol")
	require.Equal(t, http.StatusCreated, created.status, created.raw)
	require.Equal(t, "carol", created.record()["ownerId"])
	// A token and X-Owner-Id must agree.
	clash := b.as(t, aliceToken, "GET", "/v1/modules/NOTE/records/"+created.record()["id"].(string), "", httpapi.HeaderDevOwner, "carol")
	require.Equal(t, http.StatusUnauthorized, clash.status, clash.raw)
	bad := b.do(t, "GET", "/v1/keys/x", nil, httpapi.HeaderDevOwner, "not an owner")
	require.Equal(t, http.StatusUnauthorized, bad.status)

	// From a non-loopback address the header is refused even in --dev-auth mode. (A real
	// socket here can only be loopback, so this one request goes to the handler directly.)
	api := httpapi.New(b.k, httpapi.Options{DevAuth: true})
	req := httptest.NewRequest("GET", "/v1/keys/x", nil)
	req.RemoteAddr = "192.0.2.7:40000"
	req.Header.Set(httpapi.HeaderDevOwner, "carol")
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, req)
	require.Equal(t, http.StatusUnauthorized, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "loopback")
}

func TestBodiesAreCapped(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	huge := `{"title":"t","payload":{"blob":"` + strings.Repeat("x", 4*maxBody) + `"}}`
	// With a Content-Length: refused before reading.
	r := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", huge)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status, r.raw)
	require.Equal(t, "PAYLOAD_TOO_LARGE", r.code())
	// Chunked, without a length: cut off while reading.
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte(huge))
		_ = pw.Close()
	}()
	r = b.do(t, "POST", "/v1/modules/NOTE/records", pr, "Authorization", "Bearer "+aliceToken)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status, r.raw)
	// Just under the cap is read (and then judged by the kernel's own 64 KiB rule, not ours).
	ok := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", `{"title":"t","payload":{"blob":"`+strings.Repeat("x", maxBody-100)+`"}}`)
	require.Equal(t, http.StatusCreated, ok.status, ok.raw)
}

func TestConcurrentHTTPStormExecutesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	spec := stormtypes.Spec{Op: stormtypes.OpCreate, Create: model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "http-storm", Title: "t"},
		N: 300, Concurrency: 30, Share: true, Via: stormtypes.ViaHTTP, URL: b.url, Token: aliceToken}
	sum, err := storm.Run(context.Background(), storm.Env{Kernel: b.k}, spec, nil)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Outcomes["EXECUTED"], "%v", sum.Outcomes)
	require.Equal(t, 300, sum.Successes(), "%v", sum.Outcomes)
	require.True(t, sum.Verified.Agrees, "%v", sum.Verified.Problems)
	require.Equal(t, 1, sum.Verified.Revisions)

	// The same without in-flight sharing: every request reaches PostgreSQL; still one.
	spec.Create.Key, spec.Share = "http-storm-noshare", false
	sum, err = storm.Run(context.Background(), storm.Env{Kernel: b.k}, spec, nil)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Outcomes["EXECUTED"], "%v", sum.Outcomes)
	require.Zero(t, sum.Outcomes["JOINED"])
	require.True(t, sum.Verified.Agrees, "%v", sum.Verified.Problems)
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM record WHERE owner_id = 'alice'`).Scan(&n))
	require.Equal(t, 2, n)
}

func TestGracefulShutdownFinishesInFlightRequests(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 1)
	b := setupWrapped(t, false, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			arrived <- struct{}{}
			h.ServeHTTP(w, r)
		})
	})
	// A request whose body arrives slowly is in flight when the shutdown starts.
	pr, pw := io.Pipe()
	result := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", b.url+"/v1/modules/NOTE/records", pr)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		resp, err := b.c.Do(req)
		if err != nil {
			result <- -1
			return
		}
		_ = resp.Body.Close()
		result <- resp.StatusCode
	}()
	_, _ = pw.Write([]byte(`{"title":`))
	<-arrived // the server has the headers and is reading the body
	stopped := make(chan error, 1)
	go func() { stopped <- b.stop() }()
	// Shutdown closes the listener first: once nothing answers there, it is under way.
	addr := strings.TrimPrefix(b.url, "http://")
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err != nil
	}, 10*time.Second, 5*time.Millisecond)
	_, _ = pw.Write([]byte(`"late"}`))
	_ = pw.Close()
	require.Equal(t, http.StatusCreated, <-result)
	require.NoError(t, <-stopped)
	_, err := net.DialTimeout("tcp", strings.TrimPrefix(b.url, "http://"), time.Second)
	require.Error(t, err, "the listener is closed after shutdown")
}

func TestLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"127.0.0.1:8787", "[::1]:8787", "localhost:0"} {
		require.NoError(t, httpapi.CheckLoopbackAddr(addr), addr)
	}
	for _, addr := range []string{"0.0.0.0:8787", ":8787", "192.0.2.1:80", "example.com:80", "nonsense"} {
		require.Error(t, httpapi.CheckLoopbackAddr(addr), addr)
	}
	_, err := httpapi.Listen("0.0.0.0:0", false)
	require.Error(t, err)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
