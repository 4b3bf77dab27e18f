package storm

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/idemwork/idemwork/storm/stormtypes"
)

// Samples of requests that got no answer.
const (
	errNotSent    = "not sent: the storm was stopped first"
	errNoResponse = "no answer: its worker process ended without reporting it"
)

// summarize counts what the storm's requests got. A request with no result is CANCELLED when
// the storm was stopped (it was never sent, or cut short), else NO_RESPONSE.
func (c *collector) summarize(spec stormtypes.Spec, release time.Time, stopped bool, urls []string) stormtypes.Summary {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := stormtypes.Summary{Requests: spec.N, Outcomes: map[string]int{}, Errors: map[string]stormtypes.ErrorSample{}, ByProcess: []stormtypes.ProcessSummary{},
		Storm: stormtypes.Setup{Op: spec.Op, Owner: spec.Owner(), Key: spec.Key(), Operation: spec.Operation(), N: spec.N,
			Concurrency: spec.Concurrency, Processes: spec.Processes, Share: spec.Share, Via: spec.Via, URL: spec.URL,
			Servers: spec.Servers, FailFirst: spec.FailFirst, HoldMs: float64(spec.Hold.Microseconds()) / 1000, ID: spec.ID}}
	if len(urls) > 1 || len(spec.URLs) > 0 {
		s.Storm.URLs = urls
	}
	records, revisions, executions := map[string]bool{}, map[string]bool{}, map[string]bool{}
	byPID := map[int]*stormtypes.ProcessSummary{}
	byServer := make([]stormtypes.ServerSummary, len(urls))
	for i, u := range urls {
		byServer[i] = stormtypes.ServerSummary{URL: u, Outcomes: map[string]int{}}
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
				s.Outcomes[string(stormtypes.CodeCancelled)]++
				noteError(string(stormtypes.CodeCancelled), errNotSent, 0)
			} else {
				s.Outcomes[string(stormtypes.CodeNoResponse)]++
				noteError(string(stormtypes.CodeNoResponse), errNoResponse, 0)
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
			p = &stormtypes.ProcessSummary{PID: ev.PID, Outcomes: map[string]int{}}
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
	s.Distinct = stormtypes.Distinct{RecordIDs: len(records), Revisions: len(revisions), ExecutionIDs: len(executions)}
	s.LatencyMs = latencyOf(lat)
	if !release.IsZero() && !c.last.IsZero() {
		s.WallMs = round3(float64(c.last.Sub(release).Microseconds()) / 1000)
	}
	for _, p := range byPID {
		s.ByProcess = append(s.ByProcess, *p)
	}
	sort.Slice(s.ByProcess, func(i, j int) bool { return s.ByProcess[i].PID < s.ByProcess[j].PID })
	if spec.Via == stormtypes.ViaHTTP {
		s.ByServer = byServer
	}
	return s
}

func latencyOf(ms []float64) stormtypes.Latency {
	if len(ms) == 0 {
		return stormtypes.Latency{}
	}
	slices.Sort(ms)
	sum := 0.0
	for _, v := range ms {
		sum += v
	}
	return stormtypes.Latency{Min: round3(ms[0]), Mean: round3(sum / float64(len(ms))), P50: round3(stormtypes.Percentile(ms, 50)),
		P95: round3(stormtypes.Percentile(ms, 95)), P99: round3(stormtypes.Percentile(ms, 99)), Max: round3(ms[len(ms)-1])}
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
