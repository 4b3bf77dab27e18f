package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/model"
)

// Identical concurrent writes of one kernel share one call before any of them builds its
// request. The runner shares in-process flights itself (SPEC §4.3), by the canonical body; but to
// reach that point each follower would first encode its body and build its prepare and work —
// for a storm's thousand followers at once, most of the storm's cost (their allocations and the
// stack each grows to). A kernel follower whose request is byte for byte the leader's (raw: the
// fields as given, before any encoding) parks here instead, on a short stack, and shares the
// leader's result (JOINED). The rules are the runner's: never inside an ambient transaction or
// with sharing off, and a leader's failure is never handed on — each follower then runs the
// database path itself, sharing nothing.
type sharing struct {
	mu    sync.Mutex
	calls map[sharedKey]*sharedCall
	// waiting counts the followers parked here now.
	waiting atomic.Int64
}

type sharedKey struct{ owner, key, operation string }

type sharedCall struct {
	raw []byte // the leader's, unchanged while it runs
	// done is made by the first follower, under sharing.mu (a leader nobody follows — every
	// fresh key of a busy service — makes none), and closed by finish.
	done chan struct{}
	// Set before done is closed; read only after.
	res model.WriteResult
	err error
}

// share runs write once for concurrent identical requests (see sharing): write is called with
// shareOff true when the request must not share anything (it follows a leader that failed).
func (k *Kernel) share(ctx context.Context, owner, key, operation string, shareInFlight *bool, raw rawRequest,
	write func(shareOff bool) (model.WriteResult, error)) (model.WriteResult, error) {
	if key == "" || shareInFlight != nil && !*shareInFlight {
		return write(false)
	}
	if _, ambient := k.db.AmbientTx(ctx); ambient {
		return write(false)
	}
	s := k.sharing
	sk := sharedKey{owner, key, operation}
	s.mu.Lock()
	if c, ok := s.calls[sk]; ok {
		if !bytes.Equal(c.raw, raw) {
			s.mu.Unlock()
			return write(false) // another request on the key: the runner decides
		}
		if c.done == nil {
			c.done = make(chan struct{})
		}
		done := c.done
		s.mu.Unlock()
		return k.follow(ctx, c, done, write)
	}
	if s.calls == nil {
		s.calls = map[sharedKey]*sharedCall{}
	}
	// raw is the caller's own buffer, built for this call and not changed after: kept, not copied.
	c := &sharedCall{raw: raw}
	s.calls[sk] = c
	s.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			c.err = errLeaderPanicked
			s.finish(sk, c)
			panic(p)
		}
		s.finish(sk, c)
	}()
	c.res, c.err = write(false)
	return c.res, c.err
}

// follow parks on the leader's call c, then shares its result, or runs its own write with
// sharing off when the leader failed.
//
//go:noinline
func (k *Kernel) follow(ctx context.Context, c *sharedCall, done <-chan struct{}, write func(shareOff bool) (model.WriteResult, error)) (model.WriteResult, error) {
	s := k.sharing
	s.waiting.Add(1)
	select {
	case <-done:
		s.waiting.Add(-1)
	case <-ctx.Done():
		s.waiting.Add(-1)
		return model.WriteResult{}, ctx.Err()
	}
	if c.err != nil {
		return write(true)
	}
	return joined(c.res), nil
}

// finish retires c (later requests run their own write) and wakes its followers, if any: c's
// result is set before, and they read it after.
func (s *sharing) finish(sk sharedKey, c *sharedCall) {
	s.mu.Lock()
	delete(s.calls, sk)
	done := c.done
	s.mu.Unlock()
	if done != nil {
		close(done)
	}
}

var errLeaderPanicked = errorString("the leader of a shared write panicked")

type errorString string

func (e errorString) Error() string { return string(e) }

// joined is a leader's result as a follower gets it: outcome JOINED, no wait of its own, and
// what it points to copied (one allocation), so that no two callers share a record.
func joined(res model.WriteResult) model.WriteResult {
	w := &struct {
		rec  model.Record
		exec model.Execution
		key  string
	}{}
	out := res
	out.Outcome, out.Waited = idemtype.Joined, false
	if res.Record != nil {
		w.rec = *res.Record
		out.Record = &w.rec
	}
	if res.Execution != nil {
		w.exec = *res.Execution
		out.Execution = &w.exec
	}
	if res.Key != nil {
		w.key = *res.Key
		out.Key = &w.key
	}
	return out
}

// Followers is the number of writes parked on an in-process leader now: here, or in the
// runner's own flights.
func (k *Kernel) Followers() int { return int(k.sharing.waiting.Load()) + k.runner.Stats().Followers }

// rawRequest is a request's fields as the caller gave them, before any encoding, in one byte
// string where equal strings mean equal fields: each field marked absent or prefixed with its
// length.
type rawRequest []byte

func (r rawRequest) text(s string) rawRequest {
	r = strconv.AppendInt(append(r, 1), int64(len(s)), 10)
	return append(append(r, ':'), s...)
}

func (r rawRequest) optText(s *string) rawRequest {
	if s == nil {
		return append(r, 0)
	}
	return r.text(*s)
}

func (r rawRequest) json(b json.RawMessage) rawRequest {
	if b == nil {
		return append(r, 0)
	}
	r = strconv.AppendInt(append(r, 1), int64(len(b)), 10)
	return append(append(r, ':'), b...)
}

func (r rawRequest) number(n int) rawRequest { return strconv.AppendInt(append(r, 2), int64(n), 10) }

// shareIf is a request's ShareInFlight: off when it follows a leader that failed.
func shareIf(asked *bool, off bool) *bool {
	if off {
		no := false
		return &no
	}
	return asked
}
