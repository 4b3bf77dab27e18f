// Package apperr defines the coded errors of SPEC §9. Every layer (store, idem, kernel) returns
// them so the CLI can pick an exit code and the HTTP adapter a status without string matching;
// they work with errors.As and errors.Is on the code.
package apperr

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
)

// Code is a stable machine-readable error code.
type Code string

// The codes of SPEC §9, plus INTERNAL for anything unexpected (never shown with raw details).
const (
	ScopeConflict      Code = "IDEMPOTENCY_SCOPE_CONFLICT"
	InProgress         Code = "IDEMPOTENCY_IN_PROGRESS"
	KeyReused          Code = "IDEMPOTENCY_KEY_REUSED"
	PolicyMismatch     Code = "IDEMPOTENCY_POLICY_MISMATCH"
	RevisionConflict   Code = "REVISION_CONFLICT"
	RecordNotFound     Code = "RECORD_NOT_FOUND"
	ValidationFailed   Code = "VALIDATION_FAILED"
	LegacyWriteDisable Code = "LEGACY_WRITE_DISABLED"
	SnapshotIntegrity  Code = "SNAPSHOT_INTEGRITY_VIOLATION"
	ReadOnly           Code = "READ_ONLY"
	// Overloaded: no database connection within the acquire timeout, or the owner's share of
	// the pool is in use; the client retries after Retry-After.
	Overloaded     Code = "OVERLOADED"
	SchemaNotReady Code = "SCHEMA_NOT_READY"
	// CommitUnknown: the connection was lost during or after COMMIT, so whether the write
	// committed is unknown; a retry with the same key learns the outcome.
	CommitUnknown Code = "COMMIT_UNKNOWN"
	// DatabaseUnavailable: the database could not be reached, ended the session (a terminated
	// backend, a shutdown, a lost connection before COMMIT) or cancelled the statement
	// (statement_timeout, lock_timeout, a cancel request): nothing was committed, and the client
	// retries after Retry-After. /readyz answers it too.
	DatabaseUnavailable Code = "DATABASE_UNAVAILABLE"
	// PoolerMisconfigured: a pooler the configuration does not declare (or does not fit) is in
	// the way — the server mixed up or lost this session's prepared statements, a pooler refused
	// a startup parameter, or dropped the schema's search_path; the message says what to set
	// ([database] pooler = "transaction") or remove.
	PoolerMisconfigured Code = "POOLER_MISCONFIGURED"
	// Internal: anything unexpected. Its message names the step that failed and the SQLSTATE
	// (when the database answered with one), never the driver's text; the cause is kept in Err
	// for the server log and IDEMWORK_DEBUG.
	Internal Code = "INTERNAL"
	// Adapter-level codes (HTTP and CLI input), not part of the kernel's vocabulary.
	BadRequest      Code = "BAD_REQUEST"
	Unauthorized    Code = "UNAUTHORIZED"
	PayloadTooLarge Code = "PAYLOAD_TOO_LARGE"
	NotFound        Code = "NOT_FOUND"
	Usage           Code = "USAGE"
	NotRunning      Code = "CLUSTER_NOT_RUNNING"
	// PermissionDenied: the database role lacks a privilege; the message names the privilege,
	// the object and the GRANT (or the schema of its own) that fixes it.
	PermissionDenied Code = "PERMISSION_DENIED"
	// AuthFailed: the database (or a pooler in front of it) refused the user or the password
	// (28P01, 28000); the message says what to check and never shows the secret.
	AuthFailed Code = "AUTH_FAILED"
	// DatabaseNotFound: the URL names a database the server does not have (3D000).
	DatabaseNotFound Code = "DATABASE_NOT_FOUND"
	// ReplicationUnsafe: require_synchronous_replication is set and no synchronous standby
	// confirms commits; writes are refused until one does.
	ReplicationUnsafe Code = "REPLICATION_UNSAFE"
	// The refusals of the HTTP server itself, before any route runs (net/http answers some of
	// them; the listener rewrites those into the JSON error object), and the status logged for a
	// client that left before its answer.
	MethodNotAllowed        Code = "METHOD_NOT_ALLOWED"
	ExpectationFailed       Code = "EXPECTATION_FAILED"
	HeadersTooLarge         Code = "HEADERS_TOO_LARGE"
	NotImplemented          Code = "NOT_IMPLEMENTED"
	HTTPVersionNotSupported Code = "HTTP_VERSION_NOT_SUPPORTED"
	ClientClosedRequest     Code = "CLIENT_CLOSED_REQUEST"
)

// StatusClientClosedRequest is the status logged and counted for ClientClosedRequest (nginx's
// 499): nobody reads it.
const StatusClientClosedRequest = 499

var statuses = map[Code]int{
	ScopeConflict:       http.StatusConflict,
	InProgress:          http.StatusConflict,
	KeyReused:           http.StatusUnprocessableEntity,
	PolicyMismatch:      http.StatusInternalServerError,
	RevisionConflict:    http.StatusConflict,
	RecordNotFound:      http.StatusNotFound,
	ValidationFailed:    http.StatusUnprocessableEntity,
	LegacyWriteDisable:  http.StatusGone,
	SnapshotIntegrity:   http.StatusInternalServerError,
	ReadOnly:            http.StatusForbidden,
	Overloaded:          http.StatusServiceUnavailable,
	SchemaNotReady:      http.StatusServiceUnavailable,
	CommitUnknown:       http.StatusServiceUnavailable,
	DatabaseUnavailable: http.StatusServiceUnavailable,
	PoolerMisconfigured: http.StatusInternalServerError,
	Internal:            http.StatusInternalServerError,
	BadRequest:          http.StatusBadRequest,
	Unauthorized:        http.StatusUnauthorized,
	PayloadTooLarge:     http.StatusRequestEntityTooLarge,
	NotFound:            http.StatusNotFound,
	Usage:               http.StatusBadRequest,
	NotRunning:          http.StatusConflict,
	PermissionDenied:    http.StatusForbidden,
	AuthFailed:          http.StatusUnauthorized,
	DatabaseNotFound:    http.StatusServiceUnavailable,
	ReplicationUnsafe:   http.StatusServiceUnavailable,

	MethodNotAllowed:        http.StatusMethodNotAllowed,
	ExpectationFailed:       http.StatusExpectationFailed,
	HeadersTooLarge:         http.StatusRequestHeaderFieldsTooLarge,
	NotImplemented:          http.StatusNotImplemented,
	HTTPVersionNotSupported: http.StatusHTTPVersionNotSupported,
	ClientClosedRequest:     StatusClientClosedRequest,
}

// Codes lists every code of this package, in a stable order (by name): the catalog a client
// can meet, which docs/errors.md documents and a test keeps in step with.
func Codes() []Code {
	out := make([]Code, 0, len(statuses))
	for c := range statuses {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// Status is the HTTP status of a code (500 for an unknown one).
func (c Code) Status() int {
	if s, ok := statuses[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Error is a coded error. Message is safe to show a user; Err (optional) is the cause kept for
// logs and errors.Is, never printed to users for internal errors.
type Error struct {
	Code    Code
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Message != "" {
		return string(e.Code) + ": " + e.Message
	}
	return string(e.Code)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, apperr.New(code, "")) match on the code alone.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code
	}
	return false
}

// Status is the HTTP status of the error's code.
func (e *Error) Status() int { return e.Code.Status() }

// New returns a coded error with a user-facing message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns a coded error that keeps cause for errors.Is/As.
func Wrap(code Code, cause error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: cause}
}

// CodeOf returns the code of err, or Internal when err carries none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// As returns err as a coded error; an uncoded error becomes INTERNAL with the message of
// InternalMessage, so a raw SQL or Go error never reaches a user.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: Internal, Message: InternalMessage(err), Err: err}
}

// InternalMessage is what a user is shown for an uncoded error: the steps this program named
// while the error travelled up ("restore record-snapshot-reference-v2: read key"), the SQLSTATE
// when the database answered with one, and where the whole cause is — never the driver's own
// text, which may hold SQL, values or a connection string.
//
// A step is the text a wrapper of this program (fmt.Errorf("step: %w", err), or an error type of
// an idemwork package) put before the error it wraps; the walk stops at the first error of
// another package (the driver's), whose text is left out.
func InternalMessage(err error) string {
	var steps []string
	for e := err; e != nil; {
		inner := errors.Unwrap(e)
		if inner == nil || !ownWrapper(e) {
			break
		}
		outer, in := e.Error(), inner.Error()
		step, ok := strings.CutSuffix(outer, ": "+in)
		if !ok {
			break
		}
		if step != "" {
			steps = append(steps, step)
		}
		e = inner
	}
	msg := "internal error"
	if len(steps) > 0 {
		msg += " in " + strings.Join(steps, ": ")
	}
	var st interface{ SQLState() string }
	if errors.As(err, &st) {
		msg += " (SQLSTATE " + st.SQLState() + ")"
	}
	return msg + "; the cause is in the server log (IDEMWORK_DEBUG=1 prints it for a CLI command)"
}

// ownWrapper reports whether e is a wrapping error of this program: fmt's %w wrapper, or a type
// declared in an idemwork package.
func ownWrapper(e error) bool {
	t := reflect.TypeOf(e)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	pkg := t.PkgPath()
	return pkg == "fmt" || pkg == modulePath || strings.HasPrefix(pkg, modulePath+"/")
}

// modulePath is this module's import path: a type declared under it is one of this program's.
const modulePath = "github.com/idemwork/idemwork"

// Is reports whether err carries code.
func Is(err error, code Code) bool { return CodeOf(err) == code }
