package model

import "github.com/idemwork/idemwork/idem/idemtype"

// DemoCheck is one claim of a demo and what the database shows about it: OK only when the rows
// bear the claim out.
type DemoCheck struct {
	OK bool `json:"ok"`
	// Claim is what SPEC §7 says should hold.
	Claim string `json:"claim"`
	// Text is what the database (or the provider) showed.
	Text string `json:"text"`
}

// DemoStep is one step of a guided demo.
type DemoStep struct {
	Step    string           `json:"step"`
	Outcome idemtype.Outcome `json:"outcome,omitempty"`
	// Result is the outcome as a person reads it: "BLOCKED (outcome EXECUTED)" (OutcomeText).
	Result    string         `json:"result,omitempty"`
	Record    *Record        `json:"record,omitempty"`
	Execution *Execution     `json:"execution,omitempty"`
	Message   *OutboxMessage `json:"outboxMessage,omitempty"`
	// Reused says what this step found from an earlier run instead of writing it anew.
	Reused string      `json:"reused,omitempty"`
	Notes  []string    `json:"notes"`
	Checks []DemoCheck `json:"checks"`
}

// Failed counts the step's checks the database did not bear out.
func (s DemoStep) Failed() int {
	n := 0
	for _, c := range s.Checks {
		if !c.OK {
			n++
		}
	}
	return n
}

// BlockedExternalSteps names the steps of the demo, in order.
var BlockedExternalSteps = []string{
	"Create a MEM-001 record (internal write: record, revision 1, audit, key)",
	"Run F02 publish: a direct_external feature, which must fail closed",
	"Replay F02 with the same Idempotency-Key",
}

// OutboxSteps names the steps of the outbox walk-through, in order.
var OutboxSteps = []string{
	"Create a COMMITMENT record to notify about (a later run reuses it)",
	"Run F02 notify (mode outbox): a PENDING execution and its outbox message, committed with the audit event",
	"Replay F02 with the same Idempotency-Key",
	"Deliver: the worker claims the message outside any business transaction and calls the provider",
	"A second notification while the provider fails: a retry after a backoff",
	"The worker crashes between the provider call and the settle",
	"Redeliver once the lease runs out: the provider deduplicates by the idempotency id",
	"A third notification while the provider fails every call: FAILED after the last attempt",
	"Every notification settled",
}

// ModeComparison sets the two modes of a provider-bound feature side by side (SPEC §7), one
// request of each, read from the rows the two requests left: what committed, what the client
// got, what a replay returns now and what reached a provider.
type ModeComparison struct {
	Blocked ModeSide `json:"blocked"`
	Outbox  ModeSide `json:"outbox"`
}

// ModeSide is what one feature request of one mode left in the database.
type ModeSide struct {
	Key       string `json:"key"`
	Operation string `json:"operation"`
	// Mode is the execution's mode: blocked_external or outbox.
	Mode string `json:"mode"`
	// Committed lists the rows the request's transaction wrote, as they were written.
	Committed []string `json:"committed"`
	// Client is what the first answer carried.
	Client string `json:"client"`
	// Replay is what a replay with the key returns now (restored read-only, as a replay would).
	Replay string `json:"replay"`
	// Provider is what reached a provider, or ever can.
	Provider string `json:"provider"`
}
