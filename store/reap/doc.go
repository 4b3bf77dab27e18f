// Package reap deletes idempotency rows past their expiry, in bounded batches (ReapExpired),
// and runs that on an interval for a host (Reaper). It is the only job of the store that
// deletes key rows on its own.
package reap
