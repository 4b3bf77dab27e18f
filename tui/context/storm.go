package context

import (
	gocontext "context"
)

// StormSpec is what the Storm view asks for.
type StormSpec struct {
	Owner       string
	Op          string // create | patch | action
	Module      string
	RecordID    string
	Revision    int
	FeatureID   string
	Key         string
	N           int
	Concurrency int
	Processes   int
	Share       bool
	FailFirst   bool
	Title       string
}

// StormEvent is one finished request of a storm.
type StormEvent struct {
	Index     int
	PID       int
	Outcome   string // EXECUTED | REPLAYED | JOINED | an error code
	Waited    bool
	LatencyMs float64
	RecordID  string
	Revision  int
}

// StormSummary is the end of a storm, as the database verified it.
type StormSummary struct {
	Requests  int
	Outcomes  map[string]int
	Distinct  map[string]int
	LatencyMs map[string]float64
	WallMs    float64
	Verified  map[string]any
	Agrees    bool
	JSON      []byte // the full summary as `idemwork storm --json` prints it
}

// StormRunner fires a storm, sending events while it runs; it returns when all are sent.
type StormRunner func(ctx gocontext.Context, spec StormSpec, events chan<- StormEvent) (StormSummary, error)
