package stormtypes

import (
	"fmt"
	"strings"
	"time"
)

// SampleEvery is how often a storm samples its own sessions' locks: a storm is over in about a
// hundred milliseconds, so a display polling every few hundred would see no queue at all.
const SampleEvery = 15 * time.Millisecond

// LockSample is one look at the storm's own sessions (those whose application_name starts with
// AppNamePrefix of the storm's id) in pg_stat_activity and pg_locks.
type LockSample struct {
	At time.Time `json:"at"`
	// Waiting is how many of them wait on a lock (on the unique index: the transactionid of
	// the request that holds the key); InXact how many have a transaction open; Sessions how
	// many are connected.
	Waiting  int `json:"waiting"`
	InXact   int `json:"inXact"`
	Sessions int `json:"sessions"`
	// The storm's peak so far.
	PeakWaiting int       `json:"peakWaiting"`
	PeakAt      time.Time `json:"peakAt"`
	// Blockers are the sessions the waiters wait on, most waiters first (at most 3; read every
	// blockersEvery while some wait, else empty). A blocker may be anyone's session, e.g. a
	// psql transaction holding the key.
	Blockers []Blocker `json:"blockers,omitempty"`
}

// Blocker is a session others of the storm wait on.
type Blocker struct {
	PID         int     `json:"pid"`
	Application string  `json:"application"`
	State       string  `json:"state"`
	XactMs      float64 `json:"xactMs"`
	Query       string  `json:"query"`
	// LockType is what the waiters wait for (wait_event: transactionid, tuple, relation…).
	LockType string `json:"lockType"`
	Waiters  int    `json:"waiters"`
	// Storm: the blocker is one of the storm's own sessions.
	Storm bool `json:"storm"`
}

// LockStats is what the sampler saw over the whole storm.
type LockStats struct {
	PeakWaiting int        `json:"peakWaiting"`
	PeakAt      *time.Time `json:"peakAt,omitempty"`
	Samples     int        `json:"samples"`
	EveryMs     float64    `json:"everyMs"`
}

// WaitsOn says what the storm's waiting sessions wait on, in one line ("" when none waits):
// how many wait, for which lock, held by which session, and that session's state and
// transaction age. Application names and queries are quoted as Go strings (they can hold
// anything).
func (s LockSample) WaitsOn() string {
	if s.Waiting == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of the storm's sessions wait on a lock", s.Waiting)
	for i, bl := range s.Blockers {
		if i > 0 {
			b.WriteString(";")
		}
		who := "one of the storm's own sessions"
		if !bl.Storm {
			who = fmt.Sprintf("application %q", bl.Application)
		}
		fmt.Fprintf(&b, " %s: %d held by pid %d (%s, %s", bl.LockType, bl.Waiters, bl.PID, who, bl.State)
		if bl.XactMs > 0 {
			fmt.Fprintf(&b, ", transaction open %.1f s", bl.XactMs/1000)
		}
		b.WriteString(")")
		if bl.Query != "" && !bl.Storm {
			fmt.Fprintf(&b, " last statement %q", bl.Query)
		}
	}
	return b.String()
}
