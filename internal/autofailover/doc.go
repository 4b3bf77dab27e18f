// Package autofailover runs and watches pg_auto_failover, the high-availability engine idemwork
// is tested on (SPEC §13): a monitor and two PostgreSQL nodes under pg_autoctl, synchronous
// replication between the nodes, and automatic failover decided by the monitor.
//
// Monitor reads a formation's state from its monitor (which node is primary, each node's
// replication state, health and WAL position) and asks it for a planned failover; it works on
// any formation whose monitor URL it is given. Formation starts a formation of its own on
// loopback — every server as the unprivileged server user, every file in one directory, free
// ports — and injects the faults a failover test needs: a planned failover, the primary's
// postmaster killed (its keeper restarts it: crash recovery, no failover), the primary's whole
// node killed (the monitor promotes the secondary), a killed node started again (it rejoins as
// the secondary). internal/testdb wraps it for tests; `idemwork soak --failover` starts one
// when it is given no formation.
package autofailover
