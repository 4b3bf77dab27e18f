package idem

import (
	"context"
	"fmt"

	"github.com/idemwork/idemwork/idem/idemtype"
)

// throughFlight is a keyed call of a request that may share (SPEC §4.3): it leads a flight of
// its (owner, key) — runs keyed and publishes the result — or joins the running flight of the
// same request and shares its leader's result (JOINED). A flight with another operation or body,
// or a leader that failed, sends it to the database path, sharing nothing.
func (c *call[T, P]) throughFlight(ctx context.Context) (Result[T], error) {
	r, req := c.r, &c.req
	k := flightKey{req.Owner, req.Key}
	f, leader := r.flights.leadOrJoin(k, req.Operation, req.Body)
	if !leader {
		if f != nil {
			if res, ok, err := follow[T](ctx, r, f); ok || err != nil {
				return res, err
			}
		}
		return c.keyed(ctx)
	}
	// The result is published only for followers that met the flight: a leader nobody joined
	// (every fresh key of a busy service) boxes nothing.
	res, err := func() (Result[T], error) {
		defer func() {
			if p := recover(); p != nil {
				r.flights.retire(k, f)
				f.publish(nil, nil, "", fmt.Errorf("leader panicked: %v", p))
				f.end()
				panic(p)
			}
		}()
		return c.keyed(ctx)
	}()
	if r.flights.retire(k, f) {
		f.publish(res.Value, res.Envelope, c.fp, err)
	}
	f.end()
	return res, err
}

// HoldOwner takes one of owner's shares of the pool for work outside the runner — a read of
// the owner's records over HTTP — as the runner's writes take theirs: an owner's reads and
// writes together hold at most Limits.OwnerMaxConns connections, so one owner's flood of reads
// cannot hold the pool either. It waits at most the acquire timeout, then fails OVERLOADED;
// release gives the share back (once).
func (r *Runner) HoldOwner(ctx context.Context, owner string) (release func(), err error) {
	s, err := r.admission.enterOwner(ctx, owner)
	if err != nil {
		return nil, err
	}
	return func() { r.admission.leaveOwner(owner, s) }, nil
}

// OwnerMaxConns is how many connections one owner's work may hold at once (Limits.OwnerMaxConns
// as the runner applied it).
func (r *Runner) OwnerMaxConns() int { return r.admission.ownerMax }

// follow joins the flight f it met (SPEC §4.3): it parks until the leader finishes and shares
// its value (JOINED). ok is false when the leader failed: its error is never handed on, and the
// caller takes the database path itself.
func follow[T any](ctx context.Context, r *Runner, f *flight) (Result[T], bool, error) {
	if err := r.flights.wait(ctx, f); err != nil {
		return Result[T]{}, false, err
	}
	if f.err != nil {
		return Result[T]{}, false, nil
	}
	return Result[T]{Value: f.value.(T), Outcome: idemtype.Joined, Envelope: f.envelope, Fingerprint: f.fingerprint}, true, nil
}
