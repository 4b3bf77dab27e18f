//go:build !linux

package latencyproxy

import "time"

type waiter struct{ t *timerWaiter }

func newWaiter() *waiter { return &waiter{t: newTimerWaiter()} }

func (w *waiter) waitUntil(due time.Time) { w.t.waitUntil(due) }

func (w *waiter) close() {}
