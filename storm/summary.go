package storm

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"time"
)

// Summary is a storm's result: SPEC §10.2's {"requests", "outcomes", "distinct", "latencyMs",
// "wallMs", "verified"}, plus the count of waited requests, the storm's setup and a breakdown
// per process.
type Summary struct {
	Requests int `json:"requests"`
	// Outcomes counts requests by outcome or error code; the counts add up to Requests.
	Outcomes  map[string]int `json:"outcomes"`
	Distinct  Distinct       `json:"distinct"`
	LatencyMs Latency        `json:"latencyMs"`
	// WallMs runs from the release of the barrier to the last response.
	WallMs   float64  `json:"wallMs"`
	Verified Verified `json:"verified"`
	// Waited counts replays that first waited on the unique index for the winner.
	Waited    int              `json:"waited"`
	Storm     Setup            `json:"storm"`
	ByProcess []ProcessSummary `json:"byProcess"`
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
	Op          Op     `json:"op"`
	Owner       string `json:"owner"`
	Key         string `json:"key"`
	Operation   string `json:"operation"`
	N           int    `json:"n"`
	Concurrency int    `json:"concurrency"`
	Processes   int    `json:"processes"`
	Share       bool   `json:"share"`
	Via         string `json:"via"`
	URL         string `json:"url,omitempty"`
	FailFirst   bool   `json:"failFirst"`
}

// ProcessSummary is one process's share of the storm.
type ProcessSummary struct {
	PID      int            `json:"pid"`
	Requests int            `json:"requests"`
	Outcomes map[string]int `json:"outcomes"`
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

func (c *collector) summarize(spec Spec, release time.Time) Summary {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Summary{Requests: spec.N, Outcomes: map[string]int{}, ByProcess: []ProcessSummary{},
		Storm: Setup{Op: spec.Op, Owner: spec.Owner(), Key: spec.Key(), Operation: spec.Operation(), N: spec.N,
			Concurrency: spec.Concurrency, Processes: spec.Processes, Share: spec.Share, Via: spec.Via, URL: spec.URL,
			FailFirst: spec.FailFirst}}
	records, revisions, executions := map[string]bool{}, map[string]bool{}, map[string]bool{}
	byPID := map[int]*ProcessSummary{}
	lat := make([]float64, 0, len(c.results))
	for i, ev := range c.results {
		if !c.got[i] {
			s.Outcomes[string(CodeNoResponse)]++
			continue
		}
		s.Outcomes[ev.Outcome]++
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
