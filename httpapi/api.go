package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemhttp"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/wire"
)

// Header names of the API.
const (
	// HeaderShare set to "off" asks the server not to share an in-process flight for this
	// request (the CLI's --no-share): it only bypasses an optimisation, never a rule.
	HeaderShare = "X-Idemwork-Share"
	// HeaderDevOwner names the owner in --dev-auth mode (loopback clients only).
	HeaderDevOwner = "X-Owner-Id"
)

// DefaultMaxBodyBytes caps request bodies when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 256 << 10

// Adapter-level codes (catalogued in apperr and docs/errors.md like every other refusal).
const (
	codeMethodNotAllowed = apperr.MethodNotAllowed
	// codeClientClosed is logged (status 499, nginx's convention) for a request whose client went
	// away before the answer: not a server error, and nobody reads the body.
	codeClientClosed = apperr.ClientClosedRequest
	// statusClientClosed is the status logged and counted for codeClientClosed.
	statusClientClosed = apperr.StatusClientClosedRequest
)

// Options configures the handler.
type Options struct {
	// Tokens maps a bearer token to the owner it acts as (config http.tokens).
	Tokens map[string]string
	// MaxBodyBytes caps a request body (413 PAYLOAD_TOO_LARGE above it); 0 = DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// DevAuth accepts X-Owner-Id as the owner, and only from a loopback remote address.
	DevAuth bool
	// AccessLog receives one line per request; nil logs nothing.
	AccessLog io.Writer
	// RequireKey makes a write without an Idempotency-Key 400 BAD_REQUEST (config
	// http.require_key), as the IETF draft recommends for endpoints that need one.
	RequireKey bool
	// Collectors are more metrics served on /metrics (serve's reaper counters).
	Collectors []prometheus.Collector
	// OwnerMaxReads bounds the reads one owner runs at once (config http.owner_max_reads; 0:
	// DefaultOwnerMaxReads); a read beyond it waits up to ReadWait, then is 503 OVERLOADED.
	OwnerMaxReads int
	// ReadWait bounds that wait (0: idem.DefaultAcquireTimeout, as idempotency.acquire_timeout).
	ReadWait time.Duration
}

// API is the HTTP handler over a kernel.
type API struct {
	k       *kernel.Kernel
	opts    Options
	tokens  []tokenEntry
	log     *slog.Logger
	mux     *http.ServeMux
	methods []string
	metrics *metrics
	reads   *readGate
}

type tokenEntry struct {
	sum   [32]byte
	owner string
}

// New returns the handler serving SPEC §10.3 over k.
func New(k *kernel.Kernel, opts Options) *API {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.ReadWait <= 0 {
		opts.ReadWait = idem.DefaultAcquireTimeout
	}
	a := &API{k: k, opts: opts, mux: http.NewServeMux(), metrics: newMetrics(k, opts.Collectors...), reads: newReadGate(opts.OwnerMaxReads, opts.ReadWait),
		methods: []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete}}
	for tok, owner := range opts.Tokens {
		a.tokens = append(a.tokens, tokenEntry{sum: sha256.Sum256([]byte(tok)), owner: owner})
	}
	if opts.AccessLog != nil {
		a.log = slog.New(slog.NewTextHandler(opts.AccessLog, nil))
	}
	m := a.mux
	m.HandleFunc("POST /v1/modules/{module}/records", a.endpoint(a.write(a.createRecord)))
	m.HandleFunc("PATCH /v1/modules/{module}/records/{id}", a.endpoint(a.write(a.patchRecord)))
	m.HandleFunc("POST /v1/modules/{module}/records/{id}/features/{featureId}", a.endpoint(a.write(a.runFeature)))
	m.HandleFunc("POST /v1/modules/{module}/records/{id}/reviews", a.endpoint(a.write(a.createReview)))
	m.HandleFunc("GET /v1/modules/{module}/records/{id}", a.endpoint(a.read(a.getRecord)))
	m.HandleFunc("GET /v1/modules/{module}/records/{id}/{part}", a.endpoint(a.read(a.getRecordPart)))
	m.HandleFunc("GET /v1/keys/{key...}", a.endpoint(a.read(a.getKey)))
	m.HandleFunc("GET /v1/whoami", a.endpoint(whoami))
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		wire.JSON(http.StatusOK, map[string]bool{"ok": true}).Serve(w)
	})
	m.HandleFunc("GET /readyz", a.readyz)
	m.Handle("GET /metrics", a.metrics.handler)
	m.HandleFunc("/", a.fallback)
	return a
}

// accessEntry is what a handler tells the access log about its request.
type accessEntry struct {
	outcome string
	owner   string
	err     error
	waited  bool
	stack   []byte // a recovered panic's, for the operator's log
}

type entryKey struct{}

func entryOf(r *http.Request) *accessEntry {
	if e, ok := r.Context().Value(entryKey{}).(*accessEntry); ok {
		return e
	}
	return &accessEntry{}
}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// ServeHTTP logs the request, recovers a panicking handler into a 500, and routes.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	entry := &accessEntry{}
	id := requestID(r)
	w.Header().Set(HeaderRequestID, id)
	ctx := context.WithValue(r.Context(), entryKey{}, entry)
	r = r.WithContext(ctx)
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			entry.err = fmt.Errorf("panic: %v", p)
			entry.stack = debug.Stack() // the operator's log gets where; the client, only INTERNAL
			if sw.status == 0 {
				wire.Error(apperr.New(apperr.Internal, "internal error (see the server log)")).Serve(sw)
			}
		}
		took := time.Since(start)
		a.metrics.observe(r, sw.status, entry, took)
		if a.log == nil {
			return
		}
		attrs := []any{"method", clip(r.Method, maxLoggedMethod), "path", clip(r.URL.Path, maxLoggedPath), "status", sw.status,
			"outcome", entry.outcome, "duration", took.Round(time.Microsecond).String(), "request_id", id}
		if entry.owner != "" {
			attrs = append(attrs, "owner", entry.owner)
		}
		if entry.err != nil && (sw.status >= 500 || sw.status == statusClientClosed) {
			attrs = append(attrs, "error", entry.err.Error())
			// The driver's own words stay here, in the operator's log, never in a response.
			var ae *apperr.Error
			if errors.As(entry.err, &ae) && ae.Err != nil {
				attrs = append(attrs, "cause", ae.Err.Error())
			}
			if entry.stack != nil {
				attrs = append(attrs, "stack", string(entry.stack))
			}
		}
		a.log.Info("request", attrs...)
	}()
	a.mux.ServeHTTP(sw, r)
}

// WhoAmI is the body of GET /v1/whoami: the owner the request's credentials act as (a storm
// checks its token against --owner before it fires).
type WhoAmI struct {
	Owner string `json:"owner"`
}

func whoami(_ *http.Request, owner string) (model.Response, error) {
	return wire.JSON(http.StatusOK, WhoAmI{Owner: owner}), nil
}

// fallback answers what no route matched: 405 with Allow when the path exists under another
// method, else 404, both as coded JSON.
func (a *API) fallback(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range a.methods {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := a.mux.Handler(probe); pattern != "" && pattern != "/" {
			allowed = append(allowed, m)
		}
	}
	e := entryOf(r)
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		e.outcome = string(codeMethodNotAllowed)
		wire.ErrorStatus(http.StatusMethodNotAllowed, codeMethodNotAllowed,
			fmt.Sprintf("%s is not allowed on %s (allowed: %s)", clip(r.Method, maxLoggedMethod), clip(r.URL.Path, maxLoggedPath), strings.Join(allowed, ", "))).Serve(w)
		return
	}
	e.outcome = string(apperr.NotFound)
	wire.Error(apperr.New(apperr.NotFound, "no route %s %s (see SPEC §10.3: /v1/modules/{module}/records...)", clip(r.Method, maxLoggedMethod), clip(r.URL.Path, maxLoggedPath))).Serve(w)
}

// A client chooses the method and the path, up to the header limit (64 KiB): the access log and
// the refusals echo at most this much of them, so one request cannot write a 60 KB log line.
const (
	maxLoggedMethod = 32
	maxLoggedPath   = 1024
)

// clip cuts s to at most n bytes (on a rune boundary), marking the cut with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

type endpointFunc func(r *http.Request, owner string) (model.Response, error)

// writeFunc is a write route's handler, given the request's Idempotency-Key ("" for none).
type writeFunc func(r *http.Request, owner, key string) (model.Response, error)

// write guards a write route: on a read-only session every write is refused with READ_ONLY
// before the runner starts — a replay included, though it would only read; the Idempotency-Key
// header is parsed (400 BAD_REQUEST when it is empty, repeated or unparsable, or absent where
// http.require_key asks for one).
func (a *API) write(fn writeFunc) endpointFunc {
	return func(r *http.Request, owner string) (model.Response, error) {
		if err := a.k.RequireWritable(); err != nil {
			return model.Response{}, err
		}
		key, present, err := idemhttp.ParseKey(r.Header)
		if err != nil {
			return model.Response{}, err
		}
		if !present && a.opts.RequireKey {
			return model.Response{}, apperr.New(apperr.BadRequest, "this server requires an %s header on every write (http.require_key = true)", idemtype.HeaderIdempotencyKey)
		}
		rep, err := fn(r, owner, key)
		return rep, wire.LostCommit(err, key, lookAfter(r))
	}
}

// lookAfter says where a client sees whether a write it sent without a key committed.
func lookAfter(r *http.Request) string {
	module, id := r.PathValue("module"), r.PathValue("id")
	switch {
	case id == "":
		return "look for a record created just now among the owner's records (idemwork history --owner <owner>, or the workbench's Records view)"
	case r.PathValue("featureId") != "":
		return fmt.Sprintf("read the record's executions (GET /v1/modules/%s/records/%s/executions)", module, id)
	case strings.HasSuffix(r.URL.Path, "/reviews"):
		return fmt.Sprintf("read the record's audit (GET /v1/modules/%s/records/%s/audit) for the review", module, id)
	}
	return fmt.Sprintf("read the record (GET /v1/modules/%s/records/%s): its revision says whether the patch applied", module, id)
}

// endpoint authenticates the owner, runs fn and serves its response or coded error (both built
// by package wire, which the CLI and key inspection use too).
func (a *API) endpoint(fn endpointFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		e := entryOf(r)
		owner, err := a.authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="idemwork"`)
			e.outcome = string(apperr.CodeOf(err))
			wire.Error(err).Serve(w)
			return
		}
		e.owner = owner
		rep, err := fn(r, owner)
		if err != nil {
			e.err = err
			if r.Context().Err() != nil && wire.Coded(err).Status() >= 500 {
				// The client went away and the work was cancelled with it: not a server error.
				e.outcome = string(codeClientClosed)
				wire.ErrorStatus(statusClientClosed, codeClientClosed, "the client closed the request before the answer").Serve(w)
				return
			}
			rep = wire.Error(err)
			e.outcome = string(wire.Coded(err).Code)
			rep.Serve(w)
			return
		}
		e.waited = rep.Headers[idemtype.HeaderWaited] == "true"
		e.outcome = rep.Headers[idemtype.HeaderOutcome]
		rep.Serve(w)
	}
}

// authenticate names the owner of a request: the owner its bearer token maps to, or (with
// --dev-auth, from loopback only) X-Owner-Id. Never a body field.
func (a *API) authenticate(r *http.Request) (string, error) {
	var tokenOwner string
	if n := len(r.Header.Values("Authorization")); n > 1 {
		return "", apperr.New(apperr.BadRequest, "Authorization appears %d times; send one 'Bearer <token>'", n)
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		tok = strings.TrimSpace(tok)
		if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return "", apperr.New(apperr.Unauthorized, "Authorization must be 'Bearer <token>'")
		}
		owner, found := a.lookupToken(tok)
		if !found {
			return "", apperr.New(apperr.Unauthorized, "the bearer token is not one of http.tokens")
		}
		tokenOwner = owner
	}
	if values, present := r.Header[http.CanonicalHeaderKey(HeaderDevOwner)]; present {
		if !a.opts.DevAuth {
			return "", apperr.New(apperr.Unauthorized, "%s is accepted only when the server runs with --dev-auth; authenticate with Authorization: Bearer <token>", HeaderDevOwner)
		}
		if !isLoopbackRemote(r.RemoteAddr) {
			return "", apperr.New(apperr.Unauthorized, "%s is accepted only from a loopback address", HeaderDevOwner)
		}
		if len(values) != 1 {
			return "", apperr.New(apperr.Unauthorized, "%s must appear once", HeaderDevOwner)
		}
		dev := values[0]
		if err := idemtype.ValidateOwner(dev); err != nil {
			return "", apperr.New(apperr.Unauthorized, "%s: %s", HeaderDevOwner, apperr.As(err).Message)
		}
		if tokenOwner != "" && tokenOwner != dev {
			return "", apperr.New(apperr.Unauthorized, "the bearer token cannot act as another owner than its own")
		}
		return dev, nil
	}
	if tokenOwner == "" {
		return "", apperr.New(apperr.Unauthorized, "missing Authorization: Bearer <token> (tokens are mapped to owners in config http.tokens)")
	}
	return tokenOwner, nil
}

// lookupToken compares against every configured token in constant time, so response timing
// does not reveal how much of a guess was right.
func (a *API) lookupToken(tok string) (string, bool) {
	sum := sha256.Sum256([]byte(tok))
	owner, found := "", false
	for _, t := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			owner, found = t.owner, true
		}
	}
	return owner, found
}

func isLoopbackRemote(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
