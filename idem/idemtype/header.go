package idemtype

// Header names of the HTTP contract (draft-ietf-httpapi-idempotency-key-header, SPEC §10.3), as
// idemwork serve and the library's middleware send and read them.
const (
	// HeaderIdempotencyKey carries the key: an RFC 8941 sf-string ("k") or the key bare.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderReplayed is "true" on a response restored from the first result (REPLAYED) or
	// shared from an in-process leader (JOINED).
	HeaderReplayed = "Idempotent-Replayed"
	// HeaderOutcome names the outcome of a write: EXECUTED, REPLAYED or JOINED, or OutcomeUnknown
	// with a 503 COMMIT_UNKNOWN.
	HeaderOutcome = "Idempotency-Outcome"
	// OutcomeUnknown is HeaderOutcome's value when whether the write committed is unknown.
	OutcomeUnknown = "unknown"
	// HeaderWaited is "true" when the request first waited on the unique index for the
	// transaction that held its key (a replay, or a refusal after the wait).
	HeaderWaited = "Idempotency-Waited"
)
