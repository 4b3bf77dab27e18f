package wire

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"idemwork/apperr"
	"idemwork/idem"
	"idemwork/store"
)

// Headers of a write's response (SPEC §10.3).
const (
	// HeaderReplayed is "true" on a response restored from the first result (REPLAYED) or shared
	// from an in-process leader (JOINED).
	HeaderReplayed = "Idempotent-Replayed"
	// HeaderOutcome names the outcome of a write: EXECUTED, REPLAYED or JOINED, or
	// OutcomeUnknown with a 503 COMMIT_UNKNOWN.
	HeaderOutcome = "Idempotency-Outcome"
	// OutcomeUnknown is HeaderOutcome's value when the commit's outcome is unknown.
	OutcomeUnknown = "unknown"
	// HeaderWaited is "true" when the request first waited on the unique index for the
	// transaction that held its key (a replay, or a rejection after the wait).
	HeaderWaited = "Idempotency-Waited"
	// HeaderRetryAfter is set on a 503 that a retry may cure (OVERLOADED, DATABASE_UNAVAILABLE).
	HeaderRetryAfter = "Retry-After"
)

// Exit codes of SPEC §10.2.
const (
	ExitOK       = 0
	ExitUsage    = 2
	ExitRejected = 3
	ExitInternal = 4
)

// Response is one answer as a client receives it: the status, the headers the answer itself
// sets (the transport adds Date, Content-Length and X-Request-Id) and the exact body bytes.
type Response struct {
	Status int `json:"status"`
	// Headers holds one value per header name.
	Headers map[string]string `json:"headers"`
	// Body is the body's bytes as sent (JSON followed by a newline).
	Body string `json:"body"`
	// ExitCode is the exit code of the CLI command that prints this answer (SPEC §10.2).
	ExitCode int `json:"exitCode"`
}

// JSON is a response whose body is v as JSON (HTML characters unescaped, one trailing newline).
func JSON(status int, v any) Response {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Every body is built from this program's own types; one that does not encode is a bug,
		// answered as one rather than with half a body.
		return Error(apperr.Wrap(apperr.Internal, err, "internal error: encode the response body"))
	}
	return Response{Status: status, Body: b.String(), ExitCode: ExitCode("", status), Headers: map[string]string{
		"Content-Type":           "application/json; charset=utf-8",
		"X-Content-Type-Options": "nosniff",
		"Cache-Control":          "no-store",
	}}
}

// Write is the response of a successful write: v with the outcome headers — Idempotency-Outcome
// always, Idempotent-Replayed for REPLAYED and JOINED, Idempotency-Waited after a wait on the
// unique index. A first call and each of its replays differ in these headers and in the body's
// outcome and waited only.
func Write(status int, outcome idem.Outcome, waited bool, v any) Response {
	r := JSON(status, v)
	if r.Status != status {
		return r
	}
	r.Headers[HeaderOutcome] = string(outcome)
	if outcome == idem.Replayed || outcome == idem.Joined {
		r.Headers[HeaderReplayed] = "true"
	}
	if waited {
		r.Headers[HeaderWaited] = "true"
	}
	return r
}

// RecordPath is the path of a record (a create's Location).
func RecordPath(module, id string) string {
	return "/v1/modules/" + url.PathEscape(module) + "/records/" + url.PathEscape(id)
}

// ErrorBody is the JSON of every error: {"error": {"code", "status", "message"}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    apperr.Code `json:"code"`
	Status  int         `json:"status"`
	Message string      `json:"message"`
}

// Coded is the coded error a user is shown for err: a database failure with a known cause
// (store.TranslateError) carries its code and a message that says what to do; anything else
// uncoded is INTERNAL, its message naming the step that failed and the SQLSTATE, never the
// driver's text (apperr.As).
func Coded(err error) *apperr.Error { return apperr.As(store.TranslateError(err)) }

// Error is the response of a failed request: the coded error (Coded) with its status, and the
// headers it calls for — Retry-After where a retry may cure it, Idempotency-Outcome: unknown
// with COMMIT_UNKNOWN, Idempotency-Waited when the rejection came after a wait on the unique
// index (a committed leftover PROCESSING row met after the wait, for one).
func Error(err error) Response {
	ae := Coded(err)
	msg := ae.Message
	if msg == "" {
		msg = string(ae.Code)
	}
	r := ErrorStatus(ae.Status(), ae.Code, msg)
	switch ae.Code {
	case apperr.CommitUnknown:
		// Neither EXECUTED nor failed: the client must retry with the same key to find out.
		r.Headers[HeaderOutcome] = OutcomeUnknown
	case apperr.Overloaded, apperr.DatabaseUnavailable:
		r.Headers[HeaderRetryAfter] = "1"
	}
	if idem.WaitedOnIndex(err) {
		r.Headers[HeaderWaited] = "true"
	}
	return r
}

// ErrorStatus is an error response with an explicit status (an adapter's own: 405, 499).
func ErrorStatus(status int, code apperr.Code, msg string) Response {
	r := JSON(status, ErrorBody{Error: ErrorDetail{Code: code, Status: status, Message: msg}})
	r.ExitCode = ExitCode(code, status)
	if status == http.StatusRequestEntityTooLarge {
		// The rest of an oversized body is never read; the connection cannot be reused.
		r.Headers["Connection"] = "close"
	}
	return r
}

// ExitCode is the CLI's exit code for an answer: 0 below 400, 2 for a usage error, 3 for another
// rejection (4xx), 4 for an internal or fail-closed one (5xx).
func ExitCode(code apperr.Code, status int) int {
	switch {
	case code == apperr.Usage:
		return ExitUsage
	case status < 400:
		return ExitOK
	case status < 500:
		return ExitRejected
	}
	return ExitInternal
}

// Serve writes the response.
func (r Response) Serve(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.Headers {
		h.Set(k, v)
	}
	w.WriteHeader(r.Status)
	_, _ = w.Write([]byte(r.Body))
}

// Text is the response as a person reads it off the wire: the status line, the headers
// (HeaderNames' order), a blank line and the body.
func (r Response) Text() string {
	var b strings.Builder
	b.WriteString(r.StatusLine())
	b.WriteByte('\n')
	for _, name := range r.HeaderNames() {
		b.WriteString(name + ": " + r.Headers[name] + "\n")
	}
	b.WriteByte('\n')
	b.WriteString(r.Body)
	return b.String()
}

// StatusLine is "HTTP 201 Created".
func (r Response) StatusLine() string {
	return "HTTP " + strconv.Itoa(r.Status) + " " + http.StatusText(r.Status)
}

// headerRank orders what a reader of a write's answer looks for first: the outcome headers,
// Location and Retry-After; every other header ranks last.
func headerRank(name string) int {
	switch name {
	case HeaderOutcome:
		return 0
	case HeaderReplayed:
		return 1
	case HeaderWaited:
		return 2
	case "Location":
		return 3
	case HeaderRetryAfter:
		return 4
	}
	return 5
}

// HeaderNames are the response's header names: the outcome headers, Location and Retry-After
// first, then the rest in name order.
func (r Response) HeaderNames() []string {
	names := make([]string, 0, len(r.Headers))
	for k := range r.Headers {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if ri, rj := headerRank(names[i]), headerRank(names[j]); ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	return names
}
