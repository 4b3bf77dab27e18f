// Package replay is the store's one-round-trip replay read: the key row of (owner, key) and the
// rows its stored result references, read by one statement the result policy (package kernel)
// builds once for where the envelope keeps the references (store.ReplayRefs, handed in: the
// store never knows the envelope's layout). It only reads; every check of what it returns stays
// with the policy. Its row scanners (RevisionRow, ExecutionRow) are shared with verifyrows,
// which reads key rows as a replay does.
package replay
