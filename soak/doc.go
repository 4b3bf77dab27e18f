// Package soak proves the runner's exactly-once property on demand: it fires many short storms
// (storm.Run: in process with and without in-flight sharing, over HTTP against an `idemwork
// serve` child, and from child processes), injects faults at random moments while they run —
// SIGKILL of a storm's child process, pg_terminate_backend of the sessions of the database,
// an immediate restart of the embedded PostgreSQL, SIGKILL of the serve process — and after
// each round retries the round's key until it gets an answer, as a client would. The retry
// tells the truth; the database is then asked how many times the key's work committed (the
// storm's verdict, read from rows). At the end every invariant of the stored rows is checked
// (verify.Invariants). A soak passes only with no duplicate execution and no violation.
//
// An outbox worker delivers the rounds' outbox messages meanwhile, under the same faults, so its
// fenced settle is exercised too.
package soak
