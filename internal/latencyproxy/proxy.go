package latencyproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// chunkSize is the most one read takes from a connection; inFlight bounds the chunks one
// direction holds, so a slow reader pushes back on its writer instead of growing memory. Like a
// TCP window, the two bound a direction's throughput to inFlight × chunkSize per half round trip
// (4 MB per 250 µs, far above anything a database session sends).
const (
	chunkSize = 16 << 10
	inFlight  = 256
)

// Proxy forwards connections accepted on a loopback port to one upstream address.
type Proxy struct {
	ln              net.Listener
	network, target string
	rtt             time.Duration
	bufs            sync.Pool

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on 127.0.0.1 at a free port and forwards every connection to network/address
// ("tcp" host:port, or "unix" and a socket path), dialled once per accepted connection, with
// rtt/2 added in each direction. It dials the upstream once first, so an address that cannot be
// reached fails here rather than as a dropped connection later.
func Start(network, address string, rtt time.Duration) (*Proxy, error) {
	if rtt < 0 {
		return nil, fmt.Errorf("latencyproxy: a round trip cannot be negative (%s)", rtt)
	}
	probe, err := net.DialTimeout(network, address, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("latencyproxy: reach the upstream %s %s: %w", network, address, err)
	}
	_ = probe.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("latencyproxy: listen on loopback: %w", err)
	}
	p := &Proxy{ln: ln, network: network, target: address, rtt: rtt, conns: map[net.Conn]struct{}{}}
	p.bufs.New = func() any { b := make([]byte, chunkSize); return &b }
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is where clients connect: 127.0.0.1 and the port Start chose.
func (p *Proxy) Addr() *net.TCPAddr { return p.ln.Addr().(*net.TCPAddr) }

// RTT is the round trip the proxy adds.
func (p *Proxy) RTT() time.Duration { return p.rtt }

// Upstream names where the proxy forwards to.
func (p *Proxy) Upstream() (network, address string) { return p.network, p.target }

// Close stops accepting, closes every connection in both directions and waits until all of the
// proxy's goroutines have ended.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	err := p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// track registers c so Close can end it; it reports false (and closes c) once the proxy closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient accept error (out of descriptors): back off briefly, as net/http does.
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if !p.track(c) {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve dials the upstream for client and runs the two delay lines until both directions end.
func (p *Proxy) serve(client net.Conn) {
	defer p.untrack(client)
	up, err := net.DialTimeout(p.network, p.target, 10*time.Second)
	if err != nil {
		return // the client sees its connection closed, as it would from a server that is gone
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	var wg sync.WaitGroup
	wg.Go(func() { p.line(up, client) })
	wg.Go(func() { p.line(client, up) })
	wg.Wait()
}

// chunk is bytes read from one side, due on the other side at due.
type chunk struct {
	buf *[]byte
	n   int
	due time.Time
}

// line copies src to dst, each chunk written rtt/2 after it was read. The reader keeps reading
// while earlier chunks wait, so chunks overlap in flight: the delay is latency, not throughput.
// When src ends, dst is half-closed after the last chunk; when either side fails, both close.
func (p *Proxy) line(dst, src net.Conn) {
	oneWay := p.rtt / 2
	ch := make(chan chunk, inFlight)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(ch)
		for {
			buf := p.bufs.Get().(*[]byte)
			n, err := src.Read(*buf)
			if n > 0 {
				ch <- chunk{buf: buf, n: n, due: time.Now().Add(oneWay)}
			} else {
				p.bufs.Put(buf)
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					_ = dst.Close() // a reset or a closed proxy: nothing more goes either way
				}
				return
			}
		}
	})
	w := newWaiter()
	defer w.close()
	failed := false
	for c := range ch {
		if !failed {
			w.waitUntil(c.due)
			if _, err := dst.Write((*c.buf)[:c.n]); err != nil {
				failed = true
				_ = src.Close() // unblocks the reader; the rest of ch is drained unsent
			}
		}
		p.bufs.Put(c.buf)
	}
	if !failed {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}
	wg.Wait()
}
