package model

import (
	"encoding/json"
	"time"

	"github.com/idemwork/idemwork/apperr"
)

// Key states, as the next request with the key would meet them (KeyView.State).
const (
	// KeySucceeded: a replay restores the exact first result.
	KeySucceeded = "SUCCEEDED"
	// KeyFailsClosed: the row is SUCCEEDED but a replay is refused (tampered envelope, policy
	// mismatch, a referenced row that fails its integrity check): RestoreError says how.
	KeyFailsClosed = "FAILS_CLOSED"
	// KeyProcessing: a reservation committed without its result, the abnormal leftover of SPEC
	// §4.2: never treated as success, never re-executed; 409 IDEMPOTENCY_IN_PROGRESS until it
	// expires.
	KeyProcessing = "PROCESSING"
	// KeyExpired: past expires_at; the next request deletes the row and executes again.
	KeyExpired = "EXPIRED"
	// KeyLegacy: a raw-json-v1 receipt: readable for display, never replayed.
	KeyLegacy = "LEGACY"
)

// What a key's rows say happened (KeyView.VerdictKind), read from the rows: their key, the
// transaction that wrote each, their times and digests.
const (
	// VerdictExecutedOnce: one transaction ran under the key, and its rows are as written.
	VerdictExecutedOnce = "EXECUTED_ONCE"
	// VerdictRanAgainAfterExpiry: the key expired (by the expiry its earlier transaction
	// recorded) and a later request ran anew — each run proved to come after the expiry before.
	VerdictRanAgainAfterExpiry = "EXPIRED_AND_RAN_AGAIN"
	// VerdictRanTwice: two transactions ran under the key with nothing showing it expired
	// between them.
	VerdictRanTwice = "RAN_TWICE"
	// VerdictTampered: a row the key's result references was changed, moved or copied after it
	// was written (a digest, key or transaction that does not match), or the key's rows are not
	// what one request writes.
	VerdictTampered = "TAMPERED"
	// VerdictProcessing: committed PROCESSING without a result: nothing ran.
	VerdictProcessing = "PROCESSING"
	// VerdictExpired: the key expired; a retry executes anew.
	VerdictExpired = "EXPIRED"
	// VerdictFailsClosed: a replay is refused for another reason (a policy that changed).
	VerdictFailsClosed = "FAILS_CLOSED"
	// VerdictLegacy: a raw-json-v1 receipt.
	VerdictLegacy = "LEGACY"
	// VerdictUnchecked: a service's key whose policy is not registered with this workbench: the
	// rows its result references cannot be read here, so whether a replay returns the first
	// result or fails closed (a row edited since) is not known.
	VerdictUnchecked = "UNCHECKED"
)

// KeyView is one idempotency key seen side by side (SPEC §10.2 `key`): the raw envelope, the
// exact result a replay restores, and the latest record, so drift is visible; what the next
// request with the key meets (state and verdict); and the key's rows grouped by life.
type KeyView struct {
	Key         string          `json:"key"`
	Operation   string          `json:"operation"`
	Status      string          `json:"status"`
	Fingerprint string          `json:"fingerprint"`
	CreatedAt   time.Time       `json:"createdAt"`
	ExpiresAt   time.Time       `json:"expiresAt"`
	Envelope    json.RawMessage `json:"envelope"`
	Legacy      bool            `json:"legacy"`
	Restored    RestoredView    `json:"restored"`
	Latest      LatestView      `json:"latest"`
	// RestoreError says why a replay of this key would fail closed (absent when it restores).
	RestoreError *ErrorView `json:"restoreError,omitempty"`
	// State is one of the Key* states: what the next request with this key meets now.
	State string `json:"state"`
	// Expired is true once expires_at has passed (by the runner's clock).
	Expired bool `json:"expired"`
	// Verdict is what the key's rows say happened, in one sentence for people, and what a retry
	// gets now: "executed once at … (transaction …); a retry gets 201 with record …, revision 1",
	// "tampered: …", "ran twice: …", "expired at … and ran again at …" (only when the expiry the
	// earlier transaction recorded proves it). It is the first line the key view shows.
	Verdict string `json:"verdict"`
	// VerdictKind is Verdict as one of the Verdict* constants.
	VerdictKind string `json:"verdictKind"`
	// Next says State in a sentence: what the next request with the key meets.
	Next string `json:"next"`
	// Problems are what is wrong with the key's rows, each in a sentence (the verify invariants
	// envelope_own_rows, key_rows_once and key_runs_once judge the same).
	Problems []string `json:"problems"`
	// Replay is what a client gets back now for a retry of the key's first request, over HTTP
	// and from the CLI: the status, the headers and the exact body bytes, built by the code that
	// serves a write (and the CLI's exit code for it) — a 200/201 restoring the first result, 409
	// IDEMPOTENCY_IN_PROGRESS for a PROCESSING row, the 500 a tampered envelope fails closed
	// with, 410 for a legacy operation. Null when the key expired: the next request executes
	// anew.
	Replay *Response `json:"replay"`
	// Lives groups the key's rows (audit events, executions, revisions, the key row) by the
	// reservation that wrote them: the current life first, then earlier ones, newest first. A key
	// lives again after it expired and a request executed with it anew.
	Lives []KeyLife `json:"lives"`
}

// KeyLife is the rows one reservation of a key wrote: one transaction.
type KeyLife struct {
	Current bool   `json:"current"`
	Label   string `json:"label"`
	// XID is the transaction that wrote the life's rows ("" when they do not record one).
	XID string `json:"xid,omitempty"`
	// Kind is "current", "earlier" (it expired before the next ran, as it recorded), "twice"
	// (it ran while the key was still valid: ran twice) or "unattributed" (rows written before
	// migration 0004).
	Kind   string  `json:"kind"`
	Events []Event `json:"events"`
}

// RestoredView is what a replay returns.
type RestoredView struct {
	Record    *Record    `json:"record"`
	Execution *Execution `json:"execution"`
	Review    *Review    `json:"review,omitempty"`
	// Result is a service's result (a key of a database the runner library wrote, not
	// idemwork's kernel): restored by the service's policy (Via "policy"), or its stored
	// reference (Via "reference") where the workbench has no plugin for Policy.
	Result json.RawMessage `json:"result,omitempty"`
	Via    string          `json:"via,omitempty"`
	Policy string          `json:"policy,omitempty"`
}

// LatestView is the record as it is now.
type LatestView struct {
	Record *Record `json:"record"`
}

// ErrorView is a coded error as JSON.
type ErrorView struct {
	Code    apperr.Code `json:"code"`
	Status  int         `json:"status"`
	Message string      `json:"message"`
}
