package idem

import "context"

// HoldOwner takes one of owner's shares of the pool for work outside the runner — a read of
// the owner's records over HTTP — as the runner's writes take theirs: an owner's reads and
// writes together hold at most OwnerMaxConns connections, so one owner's flood of reads cannot
// hold the pool either. It waits at most the acquire timeout, then fails OVERLOADED; release
// gives the share back (once).
func (a *Admission) HoldOwner(ctx context.Context, owner string) (release func(), err error) {
	s, err := a.enterOwner(ctx, owner)
	if err != nil {
		return nil, err
	}
	return func() { a.leaveOwner(owner, s) }, nil
}
