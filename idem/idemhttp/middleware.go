package idemhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/jsonb"
)

// DefaultMaxBodyBytes caps a request body when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 256 << 10

// Options configures the middleware.
type Options struct {
	// Owner names whose keys a request uses: the authenticated user, account or tenant — the
	// service's authentication, never a body field. Its error is answered 401 UNAUTHORIZED (a
	// coded error keeps its code). Required.
	Owner func(r *http.Request) (string, error)
	// Operation names the scope a request's key binds to (SPEC §4.1): the same key sent to
	// another operation is 409 IDEMPOTENCY_SCOPE_CONFLICT. nil: the method and the path
	// ("POST /orders", "POST /orders/42/refunds"), so a record boundary in the path is part of it.
	Operation func(r *http.Request) string
	// Module is what a policy's Restore reads inside (idem.Request.Module); "" is allowed.
	Module string
	// MaxBodyBytes caps a request body: above it, 413 PAYLOAD_TOO_LARGE. 0: DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// RequireKey answers a request without an Idempotency-Key 400 BAD_REQUEST, as the draft
	// recommends for endpoints that need one; otherwise such a request runs once, unkeyed.
	RequireKey bool
}

// Middleware returns the net/http middleware of draft-ietf-httpapi-idempotency-key-header over
// runner, for the standard mux or any router that takes func(http.Handler) http.Handler. For
// each request it names the owner, parses the Idempotency-Key header (an RFC 8941 sf-string or
// the key bare; empty, repeated or unparsable: 400), reads the body within the cap (413 above
// it) and hands the handler behind it a Call: the handler runs its write with Run (or
// RunPrepared) and answers with Respond or Error. The first answer and every replay differ only
// in the outcome headers (Idempotency-Outcome, Idempotent-Replayed, Idempotency-Waited): the
// replay's body is rendered from the result the policy restored from the service's own rows,
// never from a cached response.
func Middleware(runner *idem.Runner, opts Options) func(http.Handler) http.Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := newCall(w, r, runner, &opts)
			if err != nil {
				Error(w, err)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(c.Body))
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callKey{}, c)))
		})
	}
}

// Call is one request as the middleware read it: what its write runs under.
type Call struct {
	runner *idem.Runner
	// Owner, Key (empty: none sent), Operation and Module of the request.
	Owner, Key, Operation, Module string
	// Body is the request body as received (the handler's r.Body reads the same bytes).
	Body []byte
	// canonical is what the fingerprint covers: the body in jsonb's canonical text when it is
	// JSON (two spellings of one document are one request), else its bytes.
	canonical []byte
}

type callKey struct{}

// CallOf is the call the middleware made of r; false when r did not pass through it.
func CallOf(r *http.Request) (*Call, bool) {
	c, ok := r.Context().Value(callKey{}).(*Call)
	return c, ok
}

func newCall(w http.ResponseWriter, r *http.Request, runner *idem.Runner, opts *Options) (*Call, error) {
	if opts.Owner == nil {
		return nil, apperr.New(apperr.Internal, "idemhttp: Options.Owner is not set: the service must say whose keys a request uses")
	}
	owner, err := opts.Owner(r)
	if err != nil {
		var ae *apperr.Error
		if errors.As(err, &ae) {
			return nil, err
		}
		return nil, apperr.Wrap(apperr.Unauthorized, err, "%s", err.Error())
	}
	key, present, err := ParseKey(r.Header)
	if err != nil {
		return nil, err
	}
	if !present && opts.RequireKey {
		return nil, apperr.New(apperr.BadRequest, "this endpoint requires an %s header (a UUID, say)", idemtype.HeaderIdempotencyKey)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, opts.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, apperr.New(apperr.PayloadTooLarge, "the request body is larger than %d bytes", opts.MaxBodyBytes)
		}
		return nil, apperr.Wrap(apperr.BadRequest, err, "the request body could not be read")
	}
	op := r.Method + " " + r.URL.EscapedPath()
	if opts.Operation != nil {
		op = opts.Operation(r)
	}
	c := &Call{runner: runner, Owner: owner, Key: key, Operation: op, Module: opts.Module, Body: body, canonical: body}
	if len(bytes.TrimSpace(body)) > 0 {
		if canon, err := jsonb.Canonical(body, jsonb.Limits{}); err == nil {
			c.canonical = canon
		}
	}
	return c, nil
}

// Request is the call as an idem.Request (ShareInFlight and Prefetch unset).
func (c *Call) Request() idem.Request {
	return idem.Request{Owner: c.Owner, Key: c.Key, Operation: c.Operation, Module: c.Module, Body: c.canonical}
}

var errNoMiddleware = apperr.New(apperr.Internal, "idemhttp: the handler runs a write the idempotency middleware did not see (wrap the route with idemhttp.Middleware)")

// Run runs work as r's write (idem.Run under the call the middleware made of r): at most once per
// owner and key, its result restored for every retry.
func Run[T any](r *http.Request, policy idem.ResultPolicy[T], work func(ctx context.Context, tx *idem.Tx) (T, error)) (idem.Result[T], error) {
	c, ok := CallOf(r)
	if !ok {
		return idem.Result[T]{}, errNoMiddleware
	}
	return idem.Run(r.Context(), c.runner, c.Request(), policy, work)
}

// RunPrepared is Run with a prepare step (idem.RunPrepared): prepare reads and validates after
// the key is reserved, and never runs for a replay.
func RunPrepared[T, P any](r *http.Request, policy idem.ResultPolicy[T], prepare func(ctx context.Context, q idem.Querier) (P, error),
	work func(ctx context.Context, tx *idem.Tx, p P) (T, error)) (idem.Result[T], error) {
	c, ok := CallOf(r)
	if !ok {
		return idem.Result[T]{}, errNoMiddleware
	}
	return idem.RunPrepared(r.Context(), c.runner, c.Request(), policy, prepare, work)
}

// Respond writes a write's answer: status, body as JSON (HTML characters unescaped, one trailing
// newline) and the outcome headers — Idempotency-Outcome always, Idempotent-Replayed: true for
// REPLAYED and JOINED, Idempotency-Waited: true after a wait on the unique index. Render body
// from res.Value only (the restored result), so that a replay's bytes are the first answer's.
func Respond[T any](w http.ResponseWriter, status int, res idem.Result[T], body any) {
	h := w.Header()
	h.Set(idemtype.HeaderOutcome, string(res.Outcome))
	if res.Outcome == idemtype.Replayed || res.Outcome == idemtype.Joined {
		h.Set(idemtype.HeaderReplayed, "true")
	}
	if res.Waited {
		h.Set(idemtype.HeaderWaited, "true")
	}
	writeJSON(w, status, body)
}

// ErrorBody is the JSON of every error answer: {"error": {"code", "status", "message"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    apperr.Code `json:"code"`
	Status  int         `json:"status"`
	Message string      `json:"message"`
}

// Error writes err as a coded JSON answer with the status of its code (SPEC §9): 409
// IDEMPOTENCY_SCOPE_CONFLICT and IDEMPOTENCY_IN_PROGRESS, 422 IDEMPOTENCY_KEY_REUSED and
// VALIDATION_FAILED, 500 IDEMPOTENCY_POLICY_MISMATCH and SNAPSHOT_INTEGRITY_VIOLATION (a replay
// that fails closed), 503 OVERLOADED and DATABASE_UNAVAILABLE with Retry-After: 1, 503
// COMMIT_UNKNOWN with Idempotency-Outcome: unknown; Idempotency-Waited: true when the refusal
// came after a wait on the unique index. An uncoded error is 500 INTERNAL, its message naming
// the steps that failed, never the driver's text.
func Error(w http.ResponseWriter, err error) {
	ae := apperr.As(err)
	status := ae.Status()
	h := w.Header()
	switch ae.Code {
	case apperr.CommitUnknown:
		h.Set(idemtype.HeaderOutcome, idemtype.OutcomeUnknown)
	case apperr.Overloaded, apperr.DatabaseUnavailable:
		h.Set("Retry-After", "1")
	case apperr.PayloadTooLarge:
		// The rest of an oversized body is never read; the connection cannot be reused.
		h.Set("Connection", "close")
	}
	if idem.WaitedOnIndex(err) {
		h.Set(idemtype.HeaderWaited, "true")
	}
	msg := ae.Message
	if msg == "" {
		msg = string(ae.Code)
	}
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: ae.Code, Status: status, Message: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		b.Reset()
		_ = json.NewEncoder(&b).Encode(ErrorBody{Error: ErrorDetail{Code: apperr.Internal, Status: status,
			Message: "internal error: the response body could not be encoded"}})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}
