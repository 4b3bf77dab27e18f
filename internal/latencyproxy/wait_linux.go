package latencyproxy

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// waiter sleeps on a timerfd read through the network poller: it wakes when the kernel's timer
// fires, with the poller's millisecond timeout out of the way.
type waiter struct {
	fd   int
	f    *os.File
	buf  [8]byte
	fall *timerWaiter // when no timerfd could be made
}

func newWaiter() *waiter {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return &waiter{fd: -1, fall: newTimerWaiter()}
	}
	return &waiter{fd: fd, f: os.NewFile(uintptr(fd), "latencyproxy-timerfd")}
}

func (w *waiter) waitUntil(due time.Time) {
	d := time.Until(due)
	if d <= 0 {
		return
	}
	if w.fall != nil {
		w.fall.waitUntil(due)
		return
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(w.fd, 0, &spec, nil); err != nil {
		newTimerWaiter().waitUntil(due)
		return
	}
	if _, err := w.f.Read(w.buf[:]); err != nil {
		newTimerWaiter().waitUntil(due)
	}
}

func (w *waiter) close() {
	if w.f != nil {
		_ = w.f.Close()
	}
}
