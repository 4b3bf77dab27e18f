// Package idem is the idempotency runner (SPEC §4–§5): RunPrepared reads the success cache,
// reserves (owner_id, idempotency_key) with an INSERT that waits on the unique index, runs
// prepare and work in the same transaction, and stores a minimal, whitelisted envelope that a
// ResultPolicy restores into the exact first result. In-process callers of the same key share
// one flight. idem knows nothing of records: the kernel plugs its policies in.
package idem
