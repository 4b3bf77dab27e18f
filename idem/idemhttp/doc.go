// Package idemhttp is the net/http side of the idempotency runner (package idem): a middleware
// implementing draft-ietf-httpapi-idempotency-key-header the way idemwork serve does — the
// Idempotency-Key header as an RFC 8941 sf-string or bare, 400 for an empty, repeated or
// unparsable one, 409 for a key bound to another operation or still in progress, 422 for a key
// reused with another body, 503 with Retry-After past the per-owner cap — and the helpers a
// handler behind it writes with (Run, Respond, Error). The owner comes from a function the
// service supplies; the result of a replay is restored from the service's own rows by its
// idem.ResultPolicy, never from a cached response.
package idemhttp
