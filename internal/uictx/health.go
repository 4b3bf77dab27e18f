package uictx

import "sync"

// Health is what the session last heard from its database: whether the last answer said it
// cannot be reached. The views' readers and writers note every call's end (from the commands'
// goroutines); the shell reads it as messages arrive, says so in the status line while the
// database is down, and reads every view again when it answers again.
type Health struct {
	mu   sync.Mutex
	down bool
}

// Note records one call's end: unreachable when the database could not be reached or went
// away, answered when it answered (an error of its own, such as a refused write, still counts
// as answered — it was reached). A call that neither reached it nor failed to is not noted.
func (h *Health) Note(unreachable, answered bool) {
	if h == nil || (!unreachable && !answered) {
		return
	}
	h.mu.Lock()
	h.down = unreachable
	h.mu.Unlock()
}

// Down reports whether the last call noted could not reach the database.
func (h *Health) Down() bool {
	if h == nil {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down
}
