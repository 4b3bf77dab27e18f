package stormtypes

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/model"
)

// Op names the operation a storm fires.
type Op string

// The operations a storm can fire.
const (
	OpCreate Op = "create"
	OpPatch  Op = "patch"
	OpAction Op = "action"
	// OpService is a request to any HTTP service built on the runner library (RunService).
	OpService Op = "service"
)

// How requests reach the kernel.
const (
	ViaInproc = "inproc"
	ViaHTTP   = "http"
)

// Limits and defaults of a storm.
const (
	MaxRequests        = 100_000
	MaxProcesses       = 64
	MaxConcurrency     = 256 // per process
	DefaultConcurrency = 32  // per process, when Spec.Concurrency is 0
	MaxServers         = 16
	MaxHold            = time.Minute
)

// Codes a storm reports besides the kernel's.
const (
	// CodeInjectedFault is the outcome of the one request whose work FailFirst broke.
	CodeInjectedFault apperr.Code = "INJECTED_FAULT"
	// CodeNoResponse counts requests that produced no result (cancelled, or their process died).
	CodeNoResponse apperr.Code = "NO_RESPONSE"
	// CodeCancelled is a request cut short by the storm's context.
	CodeCancelled apperr.Code = "CANCELLED"
	// CodeHTTPError is a request that got no HTTP response (connection refused, reset...).
	CodeHTTPError apperr.Code = "HTTP_ERROR"
	// CodeDisagrees is the error of a storm whose responses the database contradicts.
	CodeDisagrees apperr.Code = "STORM_VERIFICATION_FAILED"
)

// Spec is one storm: N requests of one operation on one owner and key.
type Spec struct {
	Op Op
	// The request of Op (only that one is read). Its Key is the storm's key: empty gets a
	// generated one (reported in the summary). ShareInFlight is ignored: Share decides.
	Create model.CreateInput
	Patch  model.PatchInput
	Action model.FeatureInput
	// N requests in all; Concurrency workers in each process (0: min(requests per process,
	// DefaultConcurrency)); Processes child processes (0 or 1: this process only).
	N           int
	Concurrency int
	Processes   int
	// Share is in-process flight sharing: true lets followers JOIN a leader; false sends every
	// request to the database, where losers wait on the unique index.
	Share bool
	// Via is ViaInproc (default) or ViaHTTP.
	Via string
	// URL and URLs are running `idemwork serve` processes for ViaHTTP, sent requests
	// round-robin (URL, when set, comes first); none starts the storm's own servers.
	URL  string
	URLs []string
	// Token is the bearer token for the URLs (the storm's own servers make their own). It must
	// act as the storm's owner: Run asks each server (GET /v1/whoami) before it fires.
	Token string
	// Servers is how many servers the storm starts for ViaHTTP without URLs: 0 or 1 serves from
	// this process; N > 1 starts N child processes serving the same API on loopback over the
	// one database, and the requests go to them round-robin.
	Servers int
	// FailFirst injects a failure into the first attempt's work (after its audit step), once
	// across the whole storm: the transaction rolls back and another request must execute.
	FailFirst bool
	// Hold keeps the executing request's transaction open this long after its work, before
	// SUCCEEDED and COMMIT, so the queue on the unique index stays there to see (at most
	// MaxHold). Like FailFirst it goes through the kernel's checkpoints (kernel.WithFaults), so
	// it needs the storm's own kernels (no URLs).
	Hold time.Duration
	// ID names the storm's own database sessions (application_name "idemwork storm <ID> p0",
	// p1…pP for worker processes, s1…sN for servers); empty gets a generated one. 1-16 of
	// [a-z0-9].
	ID string
}

// Event is one finished request.
type Event struct {
	Index int `json:"index"`
	PID   int `json:"pid"`
	// Outcome is EXECUTED, REPLAYED, JOINED, or the error code.
	Outcome     string  `json:"outcome"`
	Waited      bool    `json:"waited"`
	LatencyMs   float64 `json:"latencyMs"`
	RecordID    string  `json:"recordId,omitempty"`
	Revision    int     `json:"revision,omitempty"`
	ExecutionID string  `json:"executionId,omitempty"`
	Err         string  `json:"err,omitempty"`
	// Status is the HTTP status of the response (or of the error's code in process).
	Status int `json:"status,omitempty"`
	// Server is which of the storm's HTTP servers answered (1-based; 0 in process).
	Server int `json:"server,omitempty"`
	// ExecutionStatus is the status of the returned feature execution (SUCCEEDED, BLOCKED,
	// PENDING…), empty without one.
	ExecutionStatus string `json:"executionStatus,omitempty"`
	// BodySHA256 is the SHA-256 of a successful answer's body (a service storm: every answer
	// must carry the same bytes).
	BodySHA256 string `json:"bodySha256,omitempty"`
}

// Succeeded reports whether the request got a result (EXECUTED, REPLAYED or JOINED).
func (e Event) Succeeded() bool {
	switch idemtype.Outcome(e.Outcome) {
	case idemtype.Executed, idemtype.Replayed, idemtype.Joined:
		return true
	}
	return false
}

// Key is the storm's Idempotency-Key.
func (s Spec) Key() string {
	switch s.Op {
	case OpPatch:
		return s.Patch.Key
	case OpAction:
		return s.Action.Key
	}
	return s.Create.Key
}

func (s *Spec) setKey(k string) {
	switch s.Op {
	case OpPatch:
		s.Patch.Key = k
	case OpAction:
		s.Action.Key = k
	default:
		s.Create.Key = k
	}
}

// Owner is the owner the storm writes as.
func (s Spec) Owner() string {
	switch s.Op {
	case OpPatch:
		return s.Patch.Owner
	case OpAction:
		return s.Action.Owner
	}
	return s.Create.Owner
}

// Module is the route's module.
func (s Spec) Module() string {
	switch s.Op {
	case OpPatch:
		return s.Patch.Module
	case OpAction:
		return s.Action.Module
	}
	return s.Create.Module
}

// Operation is the operation string the key binds to (SPEC §4.1).
func (s Spec) Operation() string {
	switch s.Op {
	case OpPatch:
		return model.OpPatch(s.Patch.Module, s.Patch.RecordID)
	case OpAction:
		return model.OpFeature(s.Action.Module, s.Action.RecordID, s.Action.FeatureID)
	}
	return model.OpCreate(s.Create.Module)
}

// PerProcess is how many requests process i (of Processes) fires.
func (s Spec) PerProcess(i int) int {
	n := s.N / s.Processes
	if i < s.N%s.Processes {
		n++
	}
	return n
}

// Normalized fills the defaults of s (Processes, Concurrency, Via, a generated key) and checks
// it; errors are coded USAGE (flags) or VALIDATION_FAILED (owner, key).
func (s Spec) Normalized() (Spec, error) {
	switch s.Op {
	case OpCreate, OpPatch, OpAction:
	default:
		return s, usage("storm operation %q: want create, patch or action", s.Op)
	}
	if s.N < 1 || s.N > MaxRequests {
		return s, usage("--n: want 1-%d requests, got %d", MaxRequests, s.N)
	}
	if s.Processes < 0 {
		return s, usage("--processes: want 1-%d, got %d", MaxProcesses, s.Processes)
	}
	if s.Processes == 0 {
		s.Processes = 1
	}
	if s.Processes > MaxProcesses {
		return s, usage("--processes: at most %d, got %d", MaxProcesses, s.Processes)
	}
	if s.Processes > s.N {
		s.Processes = s.N
	}
	per := s.PerProcess(0)
	if s.Concurrency < 0 || s.Concurrency > MaxConcurrency {
		return s, usage("--concurrency: want 1-%d per process, got %d", MaxConcurrency, s.Concurrency)
	}
	if s.Concurrency == 0 {
		s.Concurrency = min(per, DefaultConcurrency)
	}
	s.Concurrency = min(s.Concurrency, per)
	switch s.Via {
	case "":
		s.Via = ViaInproc
	case ViaInproc, ViaHTTP:
	default:
		return s, usage("--via %q: want inproc or http", s.Via)
	}
	if s.URL != "" && (len(s.URLs) == 0 || s.URLs[0] != s.URL) {
		s.URLs = append([]string{s.URL}, s.URLs...)
	}
	if len(s.URLs) > 0 {
		s.URL = s.URLs[0]
		if s.Via != ViaHTTP {
			return s, usage("--url needs --via http")
		}
		for _, raw := range s.URLs {
			u, err := url.Parse(raw)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return s, usage("--url %q: want http://host:port", raw)
			}
		}
		if s.FailFirst {
			return s, usage("--fail-first injects the failure into the storm's own kernels: it needs the storm's own servers (drop --url)")
		}
		if s.Hold > 0 {
			return s, usage("--hold holds a transaction in the storm's own kernels: it needs the storm's own servers (drop --url)")
		}
		if s.Servers > 0 {
			return s, usage("--servers starts the storm's own servers; --url names running ones: give one or the other")
		}
		if s.Token == "" {
			return s, usage("--url needs a bearer token (IDEMWORK_TOKEN, --token, or a config http.tokens entry for owner %s)", s.Owner())
		}
	}
	if s.Servers < 0 || s.Servers > MaxServers {
		return s, usage("--servers: want 1-%d, got %d", MaxServers, s.Servers)
	}
	if s.Servers > 0 && s.Via != ViaHTTP {
		return s, usage("--servers starts HTTP servers: it needs --via http")
	}
	if s.Hold < 0 || s.Hold > MaxHold {
		return s, usage("--hold: want 0-%s, got %s", MaxHold, s.Hold)
	}
	if s.ID == "" {
		s.ID = RandomHex(3)
	}
	if err := checkID(s.ID); err != nil {
		return s, err
	}
	if err := idemtype.ValidateOwner(s.Owner()); err != nil {
		return s, err
	}
	if s.Key() == "" {
		s.setKey("storm-" + RandomHex(8))
	}
	if err := idemtype.ValidateKey(s.Key()); err != nil {
		return s, err
	}
	return s, nil
}

// checkID accepts what can sit in an application_name unquoted and unescaped.
func checkID(id string) error {
	if len(id) < 1 || len(id) > 16 {
		return usage("storm id %q: want 1-16 of [a-z0-9]", id)
	}
	for _, c := range id {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return usage("storm id %q: want 1-16 of [a-z0-9]", id)
		}
	}
	return nil
}

// AppNamePrefix is how every database session of storm id starts its application_name.
func AppNamePrefix(id string) string { return "idemwork storm " + id + " " }

// RandomHex is n random bytes in hex: generated storm ids and keys.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func usage(format string, args ...any) error { return apperr.New(apperr.Usage, format, args...) }
