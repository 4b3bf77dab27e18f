package model

import "strings"

// ReuseReport says how a request refused with IDEMPOTENCY_KEY_REUSED differs from its key's
// first request. The stored fingerprint is a hash: the first request is rebuilt from what the
// key's rows say (the revision or execution its envelope names), checked against that
// fingerprint, and compared with the request field by field — naming fields, never showing a
// stored body the envelope does not keep.
type ReuseReport struct {
	Key, Operation string
	// Rebuilt is true when a request rebuilt from the rows has the stored fingerprint.
	Rebuilt bool
	// Fields are the body's fields that differ, in body order (Rebuilt only).
	Fields []FieldDiff
	// Unknown is why the first request could not be rebuilt ("" when it was).
	Unknown string
}

// FieldDiff is one field of a body that differs from the key's first request.
type FieldDiff struct {
	// Name is the body's member: expectRevision, title, summary, payload, input.
	Name string
	// Detail says how, without the first request's values: "the first request left it out",
	// "first 1, now 2", the payload members that differ.
	Detail string
}

// Names is the differing fields' names ("title, payload").
func (r ReuseReport) Names() string {
	names := make([]string, len(r.Fields))
	for i, f := range r.Fields {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// Text is the report in one sentence, for an error message and the workbench.
func (r ReuseReport) Text() string {
	switch {
	case !r.Rebuilt:
		return "its first request cannot be rebuilt to compare: " + r.Unknown
	case len(r.Fields) == 0:
		return "its first request had these fields but spelled a default differently (a summary \"\" or a payload {} sent before idemwork treated them as not given)"
	}
	parts := make([]string, len(r.Fields))
	for i, f := range r.Fields {
		parts[i] = f.Name
		if f.Detail != "" {
			parts[i] += " (" + f.Detail + ")"
		}
	}
	return "this request differs from the key's first request in " + strings.Join(parts, ", ")
}
