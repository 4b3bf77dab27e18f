package idem

import "context"

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
