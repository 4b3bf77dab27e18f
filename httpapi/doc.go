// Package httpapi is the HTTP adapter of `idemwork serve` (SPEC §10.3): it maps routes, the
// Idempotency-Key header and the bearer token of a request onto kernel calls, and kernel results
// and coded errors back onto status codes and the JSON bodies of SPEC §10.2. No rule lives here:
// validation, idempotency and integrity are the kernel's; this package only authenticates the
// owner (a token from config, never a body field), caps and strictly decodes bodies, and writes
// one access log line per request.
package httpapi
