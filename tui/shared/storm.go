package shared

import (
	"context"
	"time"
)

// StormSpec is what the Storm view asks for.
type StormSpec struct {
	// ID names the storm's database sessions (application_name "idemwork storm <ID> …"), so
	// the Locks view can tell them apart.
	ID        string
	Owner     string
	Op        string // create | patch | action
	Module    string
	RecordID  string
	Revision  int // the patch's expectRevision
	FeatureID string
	Key       string
	// The request body: Title (create; for a patch "" leaves it unchanged), Payload (a JSON
	// object; "" sends none) and, for an action, Input.
	Title   string
	Payload string
	Input   string

	N           int
	Concurrency int
	Processes   int
	Via         string // inproc | http
	Servers     int    // with http: server processes (0 or 1: one in this process)
	Share       bool
	FailFirst   bool
	Hold        time.Duration
}

// StormEvent is one finished request of a storm.
type StormEvent struct {
	Index           int
	PID             int
	Outcome         string // EXECUTED | REPLAYED | JOINED | an error code
	Waited          bool
	LatencyMs       float64
	RecordID        string
	Revision        int
	ExecutionStatus string
	Err             string
}

// StormLocks is one sample of the storm's own sessions' locks.
type StormLocks struct {
	At          time.Time
	Waiting     int
	InXact      int
	PeakWaiting int
	PeakAt      time.Time
	// WaitsOn says what the waiters wait on, when some do ("" otherwise).
	WaitsOn string
}

// StormPart is one part of a storm's verdict.
type StormPart struct {
	OK   bool
	Text string
}

// StormVerdict is a storm's verdict in three parts, worded by the storm engine.
type StormVerdict struct {
	Answers  StormPart
	Database StormPart
	Verdict  string // agrees | rejected | failed | disagrees | stopped
	Code     string
	Text     string
}

// StormError is one error code's count and a sample message.
type StormError struct {
	Count  int
	Sample string
}

// StormSummary is the end of a storm, as the database verified it.
type StormSummary struct {
	ID        string
	Key       string
	Requests  int
	Outcomes  map[string]int
	Errors    map[string]StormError
	Distinct  map[string]int
	LatencyMs map[string]float64
	WallMs    float64
	Waited    int
	Verdict   StormVerdict
	// Locks is what the sampler saw: the peak of the storm's sessions waiting on a lock, when,
	// out of how many samples.
	PeakWaiting int
	PeakAt      time.Time
	Samples     int
	// The result the key holds: its record, revision and (an action) execution status.
	RecordID        string
	Revision        int
	ExecutionStatus string
	Servers         int
	JSON            []byte // the full summary as `idemwork storm --json` prints it
}

// StormRunner fires a storm, sending request events and lock samples while it runs (lock
// samples may be dropped when the view lags: each carries the peak so far); it returns when
// every event was sent.
type StormRunner func(ctx context.Context, spec StormSpec, events chan<- StormEvent, locks chan<- StormLocks) (StormSummary, error)
