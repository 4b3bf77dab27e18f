// Package demo is the guided walk-throughs of SPEC §7 and the demo seed: a blocked_external
// feature failing closed, an outbox feature delivered, retried, redelivered and given up on,
// the two set side by side — each step written through the kernel's public API and every claim
// it makes checked against the rows. The kernel knows nothing of it.
package demo
