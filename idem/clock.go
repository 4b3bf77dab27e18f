package idem

import (
	"sync/atomic"
	"time"
)

// Clock is the runner's notion of now: reservations, expiry and validity all use it, so tests
// and the TUI can move time to watch keys expire.
type Clock interface {
	Now() time.Time
}

// OffsetClock is the system clock shifted by an adjustable offset; the zero value is the
// system clock. It is safe for concurrent use.
type OffsetClock struct{ offset atomic.Int64 }

// Now returns the shifted time, in UTC and truncated to PostgreSQL's microseconds so values
// round-trip through timestamptz unchanged.
func (c *OffsetClock) Now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load())).UTC().Truncate(time.Microsecond)
}

// Advance moves the clock forward (or back, for a negative d).
func (c *OffsetClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// Offset is how far the clock is from the system clock.
func (c *OffsetClock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// Reset returns to the system clock.
func (c *OffsetClock) Reset() { c.offset.Store(0) }
