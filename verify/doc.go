// Package verify is `idemwork verify` and the TUI's Verify view: every invariant of the stored
// rows (SPEC §4, §6, §7; issue 22) checked over one snapshot, page by page, each violation with
// examples. What a replay or a read would fail closed with it asks the kernel (kernel.Check…),
// so verify and a replay never disagree; a key's lives are judged here (KeyLives), for verify
// and for the key view (package inspect) alike. It only reads.
package verify
