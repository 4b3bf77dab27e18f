// Package verifyrows holds the reads of `idemwork verify` and the service key check: every
// table in keyset pages by its primary key (Page) or streamed whole for a scope (Scope), inside
// the read-only snapshot the caller opens with store.DB.ReadSnapshot, plus the estimates and
// tallies verify and soak report. Key rows are read with the rows their results reference, at
// the paths the caller hands in (kernel.ResultRefs): the store never parses an envelope.
//
// It imports store/replay (and no other job package) on purpose: verify judges a key's
// referenced rows as a replay would, so it reads them with the replay's columns and scanners.
package verifyrows
