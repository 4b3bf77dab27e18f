package stormtypes

import (
	"fmt"
	"math"
	"sort"

	"github.com/idemwork/idemwork/idem/idemtype"
)

// Summary is a storm's result: SPEC §10.2's {"requests", "outcomes", "distinct", "latencyMs",
// "wallMs", "verified"}, plus one sample message per error code, the verdict, the count of
// waited requests, what the lock sampler saw, the storm's setup and a breakdown per process
// (and per server over HTTP).
type Summary struct {
	Requests int `json:"requests"`
	// Outcomes counts requests by outcome or error code; the counts add up to Requests.
	Outcomes map[string]int `json:"outcomes"`
	// Errors has one entry per error code of Outcomes: its count and one request's message.
	Errors    map[string]ErrorSample `json:"errors"`
	Distinct  Distinct               `json:"distinct"`
	LatencyMs Latency                `json:"latencyMs"`
	// WallMs runs from the release of the barrier to the last response.
	WallMs   float64  `json:"wallMs"`
	Verified Verified `json:"verified"`
	Verdict  Verdict  `json:"verdict"`
	// Waited counts requests that first waited on the unique index for the transaction that
	// held the key (the runner's own fact, for REPLAYED and rejections such as
	// IDEMPOTENCY_IN_PROGRESS alike).
	Waited    int              `json:"waited"`
	Locks     LockStats        `json:"locks"`
	Storm     Setup            `json:"storm"`
	ByProcess []ProcessSummary `json:"byProcess"`
	ByServer  []ServerSummary  `json:"byServer,omitempty"`
}

// ErrorSample is one error code's count and the message of its first request.
type ErrorSample struct {
	Count  int    `json:"count"`
	Sample string `json:"sample"`
	// Status is the HTTP status of the code (0 when the request got no answer).
	Status int `json:"status,omitempty"`
}

// Distinct counts the different results successful requests returned (1 each when every
// replay returned the first result; executionIds is 0 for create and patch).
type Distinct struct {
	RecordIDs    int `json:"recordIds"`
	Revisions    int `json:"revisions"`
	ExecutionIDs int `json:"executionIds"`
	// Bodies counts the different bodies of successful answers (a service storm: 1 when every
	// replay answered the first answer's bytes).
	Bodies int `json:"bodies,omitempty"`
}

// Latency summarises request latencies in milliseconds (nearest-rank percentiles).
type Latency struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// Setup echoes what the storm did.
type Setup struct {
	Op          Op       `json:"op"`
	Owner       string   `json:"owner"`
	Key         string   `json:"key"`
	Operation   string   `json:"operation"`
	N           int      `json:"n"`
	Concurrency int      `json:"concurrency"`
	Processes   int      `json:"processes"`
	Share       bool     `json:"share"`
	Via         string   `json:"via"`
	URL         string   `json:"url,omitempty"`
	URLs        []string `json:"urls,omitempty"`
	Servers     int      `json:"servers,omitempty"`
	FailFirst   bool     `json:"failFirst"`
	HoldMs      float64  `json:"holdMs,omitempty"`
	// Method and CountSQL are a service storm's (OpService).
	Method   string `json:"method,omitempty"`
	CountSQL string `json:"countSql,omitempty"`
	// ID names the storm's database sessions: application_name "idemwork storm <id> …".
	ID string `json:"id"`
}

// ProcessSummary is one process's share of the storm.
type ProcessSummary struct {
	PID      int            `json:"pid"`
	Requests int            `json:"requests"`
	Outcomes map[string]int `json:"outcomes"`
}

// ServerSummary is one HTTP server's share of the storm.
type ServerSummary struct {
	URL      string         `json:"url"`
	Requests int            `json:"requests"`
	Outcomes map[string]int `json:"outcomes"`
}

// OrderedOutcomes lists the keys of counts (Summary.Outcomes and its per-process and
// per-server shares) for display: EXECUTED, REPLAYED, JOINED, then error codes by name.
func OrderedOutcomes(counts map[string]int) []string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	rank := map[string]int{string(idemtype.Executed): 0, string(idemtype.Replayed): 1, string(idemtype.Joined): 2}
	sort.Slice(keys, func(i, j int) bool {
		ri, oki := rank[keys[i]]
		rj, okj := rank[keys[j]]
		switch {
		case oki && okj:
			return ri < rj
		case oki != okj:
			return oki
		}
		return keys[i] < keys[j]
	})
	return keys
}

// Successes counts requests that got a result.
func (s Summary) Successes() int {
	return s.Outcomes["EXECUTED"] + s.Outcomes["REPLAYED"] + s.Outcomes["JOINED"]
}

// TopError is the most frequent error code and how often it occurred ("" when none).
func (s Summary) TopError() (string, int) {
	best, n := "", 0
	for code, c := range s.Outcomes {
		switch code {
		case "EXECUTED", "REPLAYED", "JOINED":
			continue
		}
		if c > n || (c == n && code < best) {
			best, n = code, c
		}
	}
	return best, n
}

// Percentile is the nearest-rank percentile p (0-100) of sorted values (0 for none). The storm
// summary, the Storm view and the bench all use it, so their numbers agree.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

// Verified is what the database holds for the storm's owner and key after the storm, read back
// with queries (never inferred from the responses), and whether it agrees with the responses.
type Verified struct {
	// KeyStatus is the idempotency row's status: SUCCEEDED, PROCESSING, or ABSENT.
	KeyStatus string `json:"keyStatus"`
	// Operation is the operation the key is bound to in the database.
	Operation string `json:"operation,omitempty"`
	// Rows carrying the key: feature executions, record revisions and the audit events of the
	// storm's operation (not the outbox worker's delivery events, which carry the key too).
	Executions  int `json:"executions"`
	Revisions   int `json:"revisions"`
	AuditEvents int `json:"auditEvents"`
	// EarlierRows counts rows carrying the key that an earlier lifetime of it wrote: the key
	// expired and was executed again, and those rows are its past, not this storm's doing. Only
	// rows written since the current idempotency row was reserved are checked above.
	EarlierRows int `json:"earlierRows,omitempty"`
	// Envelope is the stored result reference every replay restores.
	Envelope *Reference `json:"envelope"`
	// ExecutionStatus and ExecutionMode are the key's feature execution's (an action storm):
	// SUCCEEDED/internal, BLOCKED/blocked_external (failed closed), PENDING/outbox.
	ExecutionStatus string `json:"executionStatus,omitempty"`
	ExecutionMode   string `json:"executionMode,omitempty"`
	// KeyStatusBefore is the key's status before the storm (ABSENT, SUCCEEDED, PROCESSING).
	KeyStatusBefore string `json:"keyStatusBefore"`
	// ServiceRows counts the service's own rows of the key after the storm (a service storm's
	// --count-sql: one row = executed once), ServiceRowsBefore before it; nil without a count.
	ServiceRows       *int64 `json:"serviceRows,omitempty"`
	ServiceRowsBefore *int64 `json:"serviceRowsBefore,omitempty"`
	// Unsettled counts the storm's sessions that still had a transaction open when the
	// database was read (after waiting for them, bounded).
	Unsettled int `json:"unsettled,omitempty"`
	// Agrees: when some request succeeded, the key succeeded with the storm's operation,
	// exactly one execution/revision (as the operation writes) and one audit event carry the
	// key, the envelope points at them, at most one request reports EXECUTED, and every
	// successful response points at the same result; when none succeeded, the storm wrote
	// nothing: the key and its rows are as they were before it. Either way every session of
	// the storm had ended when this was read.
	Agrees   bool     `json:"agrees"`
	Problems []string `json:"problems,omitempty"`
	// Unread is set when the database could not be read to check the answers (it went down,
	// ended the session, timed out): the storm is then neither agreeing nor disagreeing but not
	// verified, and its verdict is failed with this code.
	Unread *Unread `json:"unread,omitempty"`
}

// Unread is why the database could not be read: a code of docs/errors.md and its message.
type Unread struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Reference is an envelope's result reference.
type Reference struct {
	RecordID    string `json:"recordId"`
	Revision    int    `json:"revision"`
	ExecutionID string `json:"executionId,omitempty"`
}

// AddProblem records a way the database disagrees with the answers (or could not be read).
func (v *Verified) AddProblem(format string, args ...any) {
	v.Problems = append(v.Problems, fmt.Sprintf(format, args...))
}
