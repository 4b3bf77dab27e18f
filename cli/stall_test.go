package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/storm/stormtypes"
)

// A storm with --hold stalls on purpose while its winner keeps the key: the stall line says so
// when only the storm's own sessions hold what the others wait on, and never puts another
// application's lock on the hold.
func TestAStallLineNamesTheStormsOwnHoldOnlyWhenTheStormHoldsTheKey(t *testing.T) {
	own := stormtypes.LockSample{Waiting: 29, Blockers: []stormtypes.Blocker{{PID: 7, State: "idle in transaction", LockType: "transactionid", Waiters: 29, Storm: true}}}
	psql := stormtypes.LockSample{Waiting: 29, Blockers: []stormtypes.Blocker{{PID: 8, Application: "psql", State: "idle in transaction", LockType: "transactionid", Waiters: 29}}}

	line := stallLine(0, 30, 2100*time.Millisecond, 2*time.Second, own, 5*time.Second)
	require.Equal(t, "idemwork storm: 0 of 30 answered after 2.1 s, none for 2.0 s; 29 of the storm's sessions wait on a lock transactionid: 29 held by pid 7 "+
		"(one of the storm's own sessions, idle in transaction) — the executing request holds its transaction 5s after its work (--hold), as asked", line)

	require.NotContains(t, stallLine(0, 30, 3*time.Second, 3*time.Second, psql, 5*time.Second), "--hold",
		"a psql session holding the key is not the storm's hold")
	require.NotContains(t, stallLine(0, 30, 3*time.Second, 3*time.Second, own, 0), "--hold")
	require.Equal(t, "idemwork storm: 1 of 30 answered after 3.0 s, none for 2.5 s; none of its sessions waits on a lock — the executing request holds its transaction 1s after its work (--hold), as asked",
		stallLine(1, 30, 3*time.Second, 2500*time.Millisecond, stormtypes.LockSample{}, time.Second), "followers of an in-process flight wait on no lock")
}
