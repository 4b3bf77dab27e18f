// Package outboxrows holds the outbox worker's statements (package outbox): a claim of due
// messages under a lease, the fenced settle of a claimed message, the settle of its execution,
// and the count of settle audit events the demos and soak check.
package outboxrows
