// Package idem is the idempotency runner (SPEC §4–§5): RunPrepared reads the success cache,
// reserves (owner_id, idempotency_key) with an INSERT that waits on the unique index, runs
// prepare and work in the same transaction, and stores a minimal, whitelisted envelope that a
// ResultPolicy restores into the exact first result. work queues its writes in the
// transaction's store.Batch, which the runner sends with the SUCCEEDED update and the COMMIT in
// one round trip. In-process callers of the same request share one flight (follow is the one
// way to join it). A policy may own the whole replay statement (Replayer). idem knows nothing of
// records: the kernel plugs its policies in.
package idem
