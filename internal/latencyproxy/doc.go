// Package latencyproxy is a loopback TCP proxy that puts a network's round trip between a client
// and a server on one machine: every chunk of bytes read from one side is written to the other
// half the round trip after it was read, in each direction. It adds latency, not a bandwidth
// limit (chunks in flight overlap, as packets on a wire do), and each connection has its own
// delay lines, so concurrent connections each see one round trip per exchange, never a queue
// behind each other.
//
// The delay is waited on a timerfd per direction (Linux), read through Go's network poller: Go's
// own timers wake on the poller's millisecond timeout when nothing else is running, which turns
// a 250 µs delay into about 1.1 ms. Elsewhere it falls back to time.Timer.
//
// `idemwork bench --rtt` measures every side of every workload through one Proxy.
package latencyproxy
