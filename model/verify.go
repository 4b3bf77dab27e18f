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
	// Secrets are strings that must appear nowhere (the configured bearer tokens).
	Secrets []string
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
