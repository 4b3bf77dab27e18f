// Package wire builds what a client receives: the status, headers and exact body bytes of a
// write's answer (a first call, a replay, or a coded error such as 409 IDEMPOTENCY_IN_PROGRESS
// or a 500 that fails closed) and the CLI's exit code for it. The HTTP adapter serves these
// responses, the CLI prints their bodies, and key inspection shows the one a replay of a key
// returns — one builder, so what support staff read is what the client got. It knows nothing of
// routes or views; it sits below them, above the runner and the store.
package wire
