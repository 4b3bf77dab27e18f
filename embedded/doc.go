// Package embedded runs idemwork's private PostgreSQL cluster: it finds the machine's server
// binaries, creates a cluster with initdb on first use, starts postgres directly (as the
// unprivileged postgres user when running as root), waits for readiness through
// postmaster.pid, reuses a server already running on the same data dir, recovers from a stale
// postmaster.pid left by a killed run, and stops only what it started.
package embedded
