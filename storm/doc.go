// Package storm fires N requests of one operation (create, patch or a feature action) on one
// owner and Idempotency-Key with concurrency C, and reports what happened: per request the
// outcome (EXECUTED, REPLAYED, JOINED or an error code), whether it waited on the unique index,
// its latency and process; in summary the outcome counts, distinct results, latency
// percentiles, and a verdict read back from the database (how many executions, revisions and
// audit events the key really wrote), so the verdict is checked, never assumed.
//
// A storm runs in this process through one shared kernel (in-flight sharing on: followers
// JOIN; off: every request goes to PostgreSQL and losers wait on the unique index), across P
// child processes of the same binary that connect to the same database and are released
// together through a pipe barrier so they collide on the index at the same moment, or over HTTP
// against a URL or a loopback server the storm starts itself. Run streams one Event per request
// on an optional bounded channel for live displays.
package storm
