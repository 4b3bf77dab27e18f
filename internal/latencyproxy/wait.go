package latencyproxy

import "time"

// timerWaiter waits with a Go timer: portable, but on Linux a wait shorter than a millisecond
// can last about one (see the package doc), which is why Linux uses a timerfd.
type timerWaiter struct{ t *time.Timer }

func newTimerWaiter() *timerWaiter {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &timerWaiter{t: t}
}

func (w *timerWaiter) waitUntil(due time.Time) {
	d := time.Until(due)
	if d <= 0 {
		return
	}
	w.t.Reset(d)
	<-w.t.C
}
