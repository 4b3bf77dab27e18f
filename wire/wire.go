package wire

import (
	"net/http"
	"net/url"
	"strings"

	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// Exit codes of SPEC §10.2.
const (
	ExitOK       = 0
	ExitUsage    = 2
	ExitRejected = 3
	ExitInternal = 4
)

// JSON is a response whose body is v as JSON (HTML characters unescaped, one trailing newline).
func JSON(status int, v any) model.Response {
	// A strings.Builder, not a bytes.Buffer: the encoder writes the body once, and String hands
	// those bytes over as the body instead of copying them again (a record's answer is 100 KB
	// and more).
	//
	// The encoder is encoding/json's v1 semantics on the json v2 engine (go-json-experiment,
	// which the toolchain's encoding/json becomes under GOEXPERIMENT=jsonv2): a json.RawMessage
	// (a record's payload, a revision's snapshot, an execution's input) is checked and compacted
	// by jsontext instead of encoding/json's byte-at-a-time scanner, 3-5 times faster on a 120 KB
	// answer of a record (BenchmarkServeALargeAnswer). The bytes are encoding/json's but for one
	// thing: U+2028 and U+2029 inside a raw value are written as \u2028 and \u2029, as both
	// engines write them in every other string (encoding/json left them raw there), the same JSON.
	var b strings.Builder
	enc := jsonv1.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Every body is built from this program's own types; one that does not encode is a bug,
		// answered as one rather than with half a body.
		return Error(apperr.Wrap(apperr.Internal, err, "internal error: encode the response body"))
	}
	return model.Response{Status: status, Body: b.String(), ExitCode: ExitCode("", status), Headers: map[string]string{
		"Content-Type":           "application/json; charset=utf-8",
		"X-Content-Type-Options": "nosniff",
		"Cache-Control":          "no-store",
	}}
}

// Write is the response of a successful write: v with the outcome headers — Idempotency-Outcome
// always, Idempotent-Replayed for REPLAYED and JOINED, Idempotency-Waited after a wait on the
// unique index. A first call and each of its replays differ in these headers and in the body's
// outcome and waited only.
func Write(status int, outcome idemtype.Outcome, waited bool, v any) model.Response {
	r := JSON(status, v)
	if r.Status != status {
		return r
	}
	r.Headers[idemtype.HeaderOutcome] = string(outcome)
	if outcome == idemtype.Replayed || outcome == idemtype.Joined {
		r.Headers[idemtype.HeaderReplayed] = "true"
	}
	if waited {
		r.Headers[idemtype.HeaderWaited] = "true"
	}
	return r
}

// Created is the answer a client receives for a create's result (SPEC §10.3): 201 with the
// record's Location, the outcome headers (Write) and the result as the body. The HTTP adapter
// serves it, the CLI prints its body, and the key view shows the one a replay returns.
func Created(w model.WriteResult) model.Response {
	r := Write(http.StatusCreated, w.Outcome, w.Waited, w)
	if w.Record != nil && r.Status == http.StatusCreated {
		r.Headers["Location"] = RecordPath(w.Record.ModuleCode, w.Record.ID)
	}
	return r
}

// Written is the answer a client receives for a patch's or a feature run's result: 200 with the
// outcome headers (Write) and the result as the body.
func Written(w model.WriteResult) model.Response {
	return Write(http.StatusOK, w.Outcome, w.Waited, w)
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
func Error(err error) model.Response {
	ae := Coded(err)
	msg := ae.Message
	if msg == "" {
		msg = string(ae.Code)
	}
	r := ErrorStatus(ae.Status(), ae.Code, msg)
	switch ae.Code {
	case apperr.CommitUnknown:
		// Neither EXECUTED nor failed: the client must retry with the same key to find out.
		r.Headers[idemtype.HeaderOutcome] = idemtype.OutcomeUnknown
	case apperr.Overloaded, apperr.DatabaseUnavailable:
		r.Headers[model.HeaderRetryAfter] = "1"
	case apperr.ReplicationUnsafe:
		// Cured when the synchronous standby attaches: seconds to minutes, not the next moment.
		r.Headers[model.HeaderRetryAfter] = "5"
	}
	if idem.WaitedOnIndex(err) {
		r.Headers[idemtype.HeaderWaited] = "true"
	}
	return r
}

// ErrorStatus is an error response with an explicit status (an adapter's own: 405, 499).
func ErrorStatus(status int, code apperr.Code, msg string) model.Response {
	r := JSON(status, ErrorBody{Error: ErrorDetail{Code: code, Status: status, Message: msg}})
	r.ExitCode = ExitCode(code, status)
	if status == http.StatusRequestEntityTooLarge {
		// The rest of an oversized body is never read; the connection cannot be reused.
		r.Headers["Connection"] = "close"
	}
	return r
}

// ExitCode is the CLI's exit code for an answer: 0 below 400, 2 for a usage error, 3 for another
// rejection (4xx, and DATABASE_NOT_FOUND and REPLICATION_UNSAFE, which retrying does not cure),
// 4 for an internal or fail-closed one (5xx).
func ExitCode(code apperr.Code, status int) int {
	switch {
	case code == apperr.Usage:
		return ExitUsage
	case code == apperr.DatabaseNotFound || code == apperr.ReplicationUnsafe:
		// 503s a retry does not cure: the URL or the replication setup must change (SPEC §9).
		return ExitRejected
	case status < 400:
		return ExitOK
	case status < 500:
		return ExitRejected
	}
	return ExitInternal
}
