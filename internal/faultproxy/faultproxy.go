// Package faultproxy is a test helper: a loopback TCP proxy in front of a PostgreSQL server that
// reads the wire protocol passing through it and can cut a connection at an exact moment of a
// transaction — just before a COMMIT reaches the server, or just after the server acknowledged
// one and before the client hears of it. Tests use it to lose a connection during or after
// COMMIT for real, as a network failure or a crash of the server's host would.
package faultproxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Mode says where an armed proxy cuts the next COMMIT.
type Mode int

// Where to cut.
const (
	// Off forwards everything.
	Off Mode = iota
	// BeforeCommit drops the connection instead of forwarding the client message that executes
	// the COMMIT of a transaction that wrote: the transaction never commits, but the client
	// cannot know that. (Every statement of idemwork's runs in a transaction that ends with
	// COMMIT, reads too: only a writing transaction's COMMIT is cut.)
	BeforeCommit
	// AfterCommit forwards the COMMIT of a transaction that wrote and drops the connection
	// instead of forwarding the server's acknowledgement: the transaction committed, but the
	// client never hears of it.
	AfterCommit
	// BeforeStatement drops the connection instead of forwarding the next statement whose SQL
	// holds the text given to ArmStatement: a connection lost in the middle of a request, with
	// no COMMIT in flight.
	BeforeStatement
	// FatalAfterCommit forwards the COMMIT of a transaction that wrote and, instead of the
	// server's acknowledgement, sends the client what a backend terminated in that instant sends
	// (FATAL 57P01 "terminating connection due to administrator command"), then drops the
	// connection: the transaction committed, and the client was told the session ended.
	FatalAfterCommit
	// CutAfterCommitTag forwards the acknowledgement of a writing transaction's COMMIT and drops
	// the connection before the ReadyForQuery behind it: the client read the COMMIT tag, and
	// draining the rest of its batch fails.
	CutAfterCommitTag
)

// Proxy forwards loopback TCP connections to a PostgreSQL server.
type Proxy struct {
	ln      net.Listener
	network string
	address string
	dsn     string

	mu    sync.Mutex
	mode  Mode
	match string // BeforeStatement's text
	fired chan struct{}
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Start proxies to the server dsn names (a Unix socket directory or a TCP host) and returns a
// proxy whose DSN reaches the same database through it. It stops when t ends.
func Start(t testing.TB, dsn string) *Proxy {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	network, address := "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	if strings.HasPrefix(cfg.Host, "/") {
		network, address = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", cfg.Host, cfg.Port)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faultproxy: listen: %v", err)
	}
	p := &Proxy{ln: ln, network: network, address: address, conns: map[net.Conn]struct{}{}, fired: make(chan struct{})}
	port := ln.Addr().(*net.TCPAddr).Port
	q := url.Values{}
	q.Set("sslmode", "disable")
	if cfg.Password != "" {
		q.Set("password", cfg.Password)
	}
	p.dsn = fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?%s", url.PathEscape(cfg.User), port, url.PathEscape(cfg.Database), q.Encode())
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// DSN reaches the database through the proxy.
func (p *Proxy) DSN() string { return p.dsn }

// Arm makes the proxy cut the next COMMIT as mode says; Fired is closed when it has.
func (p *Proxy) Arm(mode Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
	p.fired = make(chan struct{})
}

// ArmStatement makes the proxy cut the connection that sends the next statement whose SQL
// contains text (BeforeStatement); Fired is closed when it has.
func (p *Proxy) ArmStatement(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.match = BeforeStatement, text
	p.fired = make(chan struct{})
}

// fireStatement reports whether the proxy is armed to cut before sql, disarming it if so.
func (p *Proxy) fireStatement(sql string) bool {
	p.mu.Lock()
	match := p.mode == BeforeStatement && strings.Contains(sql, p.match)
	p.mu.Unlock()
	return match && p.fire(BeforeStatement)
}

// Fired is closed once the armed cut happened.
func (p *Proxy) Fired() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fired
}

// fire reports whether the armed mode is m, disarming it if so.
func (p *Proxy) fire(m Mode) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mode != m {
		return false
	}
	p.mode = Off
	close(p.fired)
	return true
}

// Close stops accepting and closes every connection.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial(p.network, p.address)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.track(client, true)
		p.track(server, true)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.pipe(client, server)
		}()
	}
}

// pipe runs one proxied connection until either side closes or a cut fires.
func (p *Proxy) pipe(client, server net.Conn) {
	ctx, cancel := context.WithCancel(context.Background())
	cut := func() {
		cancel()
		_ = client.Close()
		_ = server.Close()
	}
	defer func() {
		cut()
		p.track(client, false)
		p.track(server, false)
	}()
	done := make(chan struct{}, 2)
	go func() {
		p.frontend(ctx, client, server, cut)
		done <- struct{}{}
	}()
	go func() {
		p.backend(ctx, server, client, cut)
		done <- struct{}{}
	}()
	<-done
}

// frontend copies client messages to the server, remembering prepared statements' text so that
// a Bind of a prepared COMMIT is recognised, and cuts before it when armed so.
func (p *Proxy) frontend(ctx context.Context, from, to net.Conn, cut func()) {
	// The startup message has no type byte.
	var lenBuf [4]byte
	if _, err := io.ReadFull(from, lenBuf[:]); err != nil {
		return
	}
	n := int(binary.BigEndian.Uint32(lenBuf[:]))
	if n < 4 || n > 1<<20 {
		return
	}
	startup := make([]byte, n)
	copy(startup, lenBuf[:])
	if _, err := io.ReadFull(from, startup[4:]); err != nil {
		return
	}
	if _, err := to.Write(startup); err != nil {
		return
	}
	statements := map[string]string{}
	wrote := false // the transaction under way sent a statement that writes
	for ctx.Err() == nil {
		typ, msg, err := readMessage(from)
		if err != nil {
			return
		}
		body := msg[5:]
		var sql string // the statement this message executes or prepares, if any
		switch typ {
		case 'Q':
			sql = cstring(body)
		case 'P':
			name := cstring(body)
			sql = cstring(body[len(name)+1:])
			statements[name] = sql
		case 'B':
			portal := cstring(body)
			sql = statements[cstring(body[len(portal)+1:])]
		}
		if typ != 'P' && writes(sql) {
			wrote = true
		}
		if typ != 'P' && isCommit(sql) {
			if wrote && p.fire(BeforeCommit) {
				cut()
				return
			}
			wrote = false
		}
		if sql != "" && p.fireStatement(sql) {
			cut()
			return
		}
		if _, err := to.Write(msg); err != nil {
			return
		}
	}
}

// backend copies server messages to the client and, when armed so, cuts instead of forwarding
// the acknowledgement of a COMMIT.
func (p *Proxy) backend(ctx context.Context, from, to net.Conn, cut func()) {
	wrote := false // the transaction under way reported a row written
	for ctx.Err() == nil {
		typ, msg, err := readMessage(from)
		if err != nil {
			return
		}
		switch {
		case typ == 'C':
			tag := cstring(msg[5:])
			if strings.HasPrefix(tag, "INSERT ") || strings.HasPrefix(tag, "UPDATE ") || strings.HasPrefix(tag, "DELETE ") || strings.HasPrefix(tag, "MERGE ") {
				wrote = true
			}
			if tag == "COMMIT" && wrote && p.fire(AfterCommit) {
				cut()
				return
			}
			if tag == "COMMIT" && wrote && p.fire(FatalAfterCommit) {
				_, _ = to.Write(fatalTerminated)
				cut()
				return
			}
			if tag == "COMMIT" && wrote && p.fire(CutAfterCommitTag) {
				_, _ = to.Write(msg)
				cut()
				return
			}
			if tag == "COMMIT" || tag == "ROLLBACK" {
				wrote = false
			}
		case typ == 'Z' && len(msg) > 5 && msg[5] == 'I':
			wrote = false // idle: no transaction under way
		}
		if _, err := to.Write(msg); err != nil {
			return
		}
	}
}

// fatalTerminated is the ErrorResponse a backend sends when pg_terminate_backend ends it.
var fatalTerminated = func() []byte {
	var body bytes.Buffer
	for _, f := range []struct {
		code byte
		v    string
	}{{'S', "FATAL"}, {'V', "FATAL"}, {'C', "57P01"}, {'M', "terminating connection due to administrator command"}} {
		body.WriteByte(f.code)
		body.WriteString(f.v)
		body.WriteByte(0)
	}
	body.WriteByte(0)
	msg := []byte{'E', 0, 0, 0, 0}
	binary.BigEndian.PutUint32(msg[1:], uint32(4+body.Len()))
	return append(msg, body.Bytes()...)
}()

// readMessage reads one typed protocol message (type, int32 length, body) whole.
func readMessage(r io.Reader) (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(head[1:]))
	if n < 4 || n > 1<<30 {
		return 0, nil, errors.New("faultproxy: bad message length")
	}
	msg := make([]byte, 1+n)
	copy(msg, head[:])
	if _, err := io.ReadFull(r, msg[5:]); err != nil {
		return 0, nil, err
	}
	return head[0], msg, nil
}

func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}

// writes reports whether sql writes (or may: a WITH can hold an INSERT).
func writes(sql string) bool {
	s := strings.ToLower(strings.TrimLeft(sql, " \t\r\n("))
	for _, w := range []string{"insert", "update", "delete", "with", "merge"} {
		if strings.HasPrefix(s, w) {
			return true
		}
	}
	return false
}

func isCommit(sql string) bool {
	s := strings.ToLower(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(sql), ";")))
	return s == "commit" || s == "end" || s == "commit transaction" || s == "commit work"
}
