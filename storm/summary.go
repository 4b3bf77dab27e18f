package storm

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	"idemwork/idem"
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
	rank := map[string]int{string(idem.Executed): 0, string(idem.Replayed): 1, string(idem.Joined): 2}
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

// Samples of requests that got no answer.
const (
	errNotSent    = "not sent: the storm was stopped first"
	errNoResponse = "no answer: its worker process ended without reporting it"
)

// summarize counts what the storm's requests got. A request with no result is CANCELLED when
// the storm was stopped (it was never sent, or cut short), else NO_RESPONSE.
func (c *collector) summarize(spec Spec, release time.Time, stopped bool, urls []string) Summary {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Summary{Requests: spec.N, Outcomes: map[string]int{}, Errors: map[string]ErrorSample{}, ByProcess: []ProcessSummary{},
		Storm: Setup{Op: spec.Op, Owner: spec.Owner(), Key: spec.Key(), Operation: spec.Operation(), N: spec.N,
			Concurrency: spec.Concurrency, Processes: spec.Processes, Share: spec.Share, Via: spec.Via, URL: spec.URL,
			Servers: spec.Servers, FailFirst: spec.FailFirst, HoldMs: float64(spec.Hold.Microseconds()) / 1000, ID: spec.ID}}
	if len(urls) > 1 || len(spec.URLs) > 0 {
		s.Storm.URLs = urls
	}
	records, revisions, executions := map[string]bool{}, map[string]bool{}, map[string]bool{}
	byPID := map[int]*ProcessSummary{}
	byServer := make([]ServerSummary, len(urls))
	for i, u := range urls {
		byServer[i] = ServerSummary{URL: u, Outcomes: map[string]int{}}
	}
	lat := make([]float64, 0, len(c.results))
	noteError := func(code, msg string, status int) {
		e := s.Errors[code]
		if e.Count == 0 {
			e.Sample, e.Status = msg, status
		}
		e.Count++
		s.Errors[code] = e
	}
	for i, ev := range c.results {
		if !c.got[i] {
			if stopped {
				s.Outcomes[string(CodeCancelled)]++
				noteError(string(CodeCancelled), errNotSent, 0)
			} else {
				s.Outcomes[string(CodeNoResponse)]++
				noteError(string(CodeNoResponse), errNoResponse, 0)
			}
			continue
		}
		s.Outcomes[ev.Outcome]++
		if !ev.Succeeded() {
			noteError(ev.Outcome, ev.Err, ev.Status)
		}
		if ev.Server > 0 && ev.Server <= len(byServer) {
			byServer[ev.Server-1].Requests++
			byServer[ev.Server-1].Outcomes[ev.Outcome]++
		}
		lat = append(lat, ev.LatencyMs)
		if ev.Waited {
			s.Waited++
		}
		p := byPID[ev.PID]
		if p == nil {
			p = &ProcessSummary{PID: ev.PID, Outcomes: map[string]int{}}
			byPID[ev.PID] = p
		}
		p.Requests++
		p.Outcomes[ev.Outcome]++
		if !ev.Succeeded() {
			continue
		}
		if ev.RecordID != "" {
			records[ev.RecordID] = true
			revisions[ev.RecordID+"@"+strconv.Itoa(ev.Revision)] = true
		}
		if ev.ExecutionID != "" {
			executions[ev.ExecutionID] = true
		}
	}
	s.Distinct = Distinct{RecordIDs: len(records), Revisions: len(revisions), ExecutionIDs: len(executions)}
	s.LatencyMs = latencyOf(lat)
	if !release.IsZero() && !c.last.IsZero() {
		s.WallMs = round3(float64(c.last.Sub(release).Microseconds()) / 1000)
	}
	for _, p := range byPID {
		s.ByProcess = append(s.ByProcess, *p)
	}
	sort.Slice(s.ByProcess, func(i, j int) bool { return s.ByProcess[i].PID < s.ByProcess[j].PID })
	if spec.Via == ViaHTTP {
		s.ByServer = byServer
	}
	return s
}

func latencyOf(ms []float64) Latency {
	if len(ms) == 0 {
		return Latency{}
	}
	slices.Sort(ms)
	sum := 0.0
	for _, v := range ms {
		sum += v
	}
	return Latency{Min: round3(ms[0]), Mean: round3(sum / float64(len(ms))), P50: round3(Percentile(ms, 50)),
		P95: round3(Percentile(ms, 95)), P99: round3(Percentile(ms, 99)), Max: round3(ms[len(ms)-1])}
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

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
