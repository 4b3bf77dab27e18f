// Package demorows holds the reads the guided demos (package demo) check their claims with —
// the seed's state, a key's executions, outbox messages and every row a key wrote — so each
// claim a demo makes is a fact of the rows, never of the demo's own bookkeeping.
package demorows
