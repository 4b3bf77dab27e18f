// Package storm fires N requests of one operation (create, patch or a feature action) on one
// owner and Idempotency-Key with concurrency C, and reports what happened: per request the
// outcome (EXECUTED, REPLAYED, JOINED or an error code), whether it waited on the unique index,
// its latency, process and server; in summary the outcome counts with one sample message per
// error code, distinct results, latency percentiles, what a lock sampler saw of the storm's own
// sessions, and a verdict in three parts: the answers (every request accounted for), what the
// database holds for the key (read back with queries once every transaction of the storm has
// ended, never inferred), and the verdict itself — agrees only when both are right.
//
// A storm runs in this process through a kernel of its own (in-process sharing on: followers
// JOIN; off: every request goes to PostgreSQL and losers wait on the unique index), across P
// child processes of the same binary that connect to the same database and are released
// together through a pipe barrier so they collide on the index at the same moment, or over HTTP
// against running servers, a loopback server in this process, or N server processes of its own
// on the one database (round-robin). Every session it opens is named "idemwork storm <id> …" in
// pg_stat_activity, which is how the sampler (every SampleEvery) and the final settle find
// them. Each process fires at a Target: the kernel in this process, or an HTTP client of the
// API's public contract. The storm has no HTTP server of its own: the host wires one in
// (Env.Serve, WorkerSession.Serve), so the engine depends on the kernel, never on the HTTP
// adapter or the configuration. Run streams one Event per request on an optional bounded
// channel for live displays, and Env.OnLocks receives the lock samples.
package storm
