package model

import (
	"fmt"
	"strings"
	"time"
)

// VerifyOptions selects what VerifyInvariants reads.
type VerifyOptions struct {
	// Owner limits the check to one owner ("" checks every owner).
	Owner string
	// Batch is the page size of the keyset reads (default DefaultVerifyBatch).
	Batch int
	// Now is the clock keys expire by (default: the runner's clock).
	Now time.Time
	// Secrets are strings that must appear nowhere idemwork itself writes (the configured bearer
	// tokens).
	Secrets []string
	// Since, when set, checks only the rows written (or changed) since then; a key's other rows
	// are still read to judge its lives.
	Since time.Time
	// Progress, when set, hears how far the check is after every page it reads. It is called on
	// the checking goroutine: it must return quickly.
	Progress func(VerifyProgress)
}

// VerifyProgress is how far a verify run is: rows read of an estimate of all it will read.
type VerifyProgress struct {
	// Table is the table being read ("keys", "records", "revisions", "executions",
	// "outboxMessages", "auditEvents", "keyLives").
	Table string `json:"table"`
	// Checked counts the rows read so far, over every table.
	Checked int64 `json:"checked"`
	// Estimate is about how many rows the whole run reads (0 while unknown); Checked may pass it.
	Estimate int64 `json:"estimate"`
}

// Percent is Checked as a share of Estimate, at most 99 while the run goes on (-1: unknown).
func (p VerifyProgress) Percent() int {
	if p.Estimate <= 0 {
		return -1
	}
	return int(min(99, 100*p.Checked/p.Estimate))
}

// Violation is one example of a broken invariant.
type Violation struct {
	Owner     string `json:"owner"`
	Key       string `json:"key,omitempty"`
	Record    string `json:"record,omitempty"`
	Revision  int    `json:"revision,omitempty"`
	Execution string `json:"execution,omitempty"`
	Message   string `json:"message,omitempty"`
	Audit     string `json:"audit,omitempty"`
	Detail    string `json:"detail"`
}

// String names what the example points at, then what is wrong with it (stored text as it is:
// escape it before it reaches a terminal).
func (v Violation) String() string {
	parts := []string{"owner " + v.Owner}
	for _, f := range []struct{ name, val string }{{"key", v.Key}, {"record", v.Record}, {"execution", v.Execution},
		{"message", v.Message}, {"audit", v.Audit}} {
		if f.val != "" {
			parts = append(parts, f.name+" "+f.val)
		}
	}
	if v.Revision > 0 {
		parts = append(parts, fmt.Sprintf("rev %d", v.Revision))
	}
	return strings.Join(parts, " ") + ": " + v.Detail
}

// Invariant is one invariant's result.
type Invariant struct {
	Name        string      `json:"name"`
	Description string      `json:"description"`
	Count       int64       `json:"count"`
	Examples    []Violation `json:"examples"`
}

// InvariantReport is what VerifyInvariants found.
type InvariantReport struct {
	// Owner is the owner checked, or "" for every owner.
	Owner string `json:"owner"`
	OK    bool   `json:"ok"`
	// Violations is the sum of the invariants' counts.
	Violations int64       `json:"violations"`
	Invariants []Invariant `json:"invariants"`
	// Checked counts the rows read per table, Batches the pages read.
	Checked map[string]int64 `json:"checked"`
	Batches int              `json:"batches"`
	TookMs  float64          `json:"tookMs"`
	// Since is the --since the run was limited to (absent: every row).
	Since *time.Time `json:"since,omitempty"`
	// PassMs is how long each pass took (the table it read, as in Checked), in milliseconds.
	PassMs map[string]float64 `json:"passMs"`
	// Unattributed counts, per table, the rows a key's request wrote that do not record the
	// transaction that wrote them: rows written before migration 0004, which cannot tell. They
	// are judged by their key alone and are not violations.
	Unattributed map[string]int64 `json:"unattributed"`
}

// Failed returns the report's invariants with violations.
func (r InvariantReport) Failed() []Invariant {
	var out []Invariant
	for _, inv := range r.Invariants {
		if inv.Count > 0 {
			out = append(out, inv)
		}
	}
	return out
}
