package store

import "strings"

// ReplayRefs says where a key row's stored result keeps the references a replay follows: each
// is a JSON path into the row's response. The store only follows the paths; which document they
// walk is the envelope format's business (package idem, idem.ResultPath) and which members the
// result has is the policy's (package kernel), who hand them in here.
type ReplayRefs struct {
	RecordID, Revision []string
	// ExecutionID is needed by an execution replay only, ReviewID by verify's read of keys.
	ExecutionID, ReviewID []string
}

// RefText is the text at path in the key row's response (NULL where there is none). A path is
// code, not input; its steps are plain names, so a literal needs no escaping rules.
func RefText(path []string) string {
	if len(path) == 0 {
		panic("store: a replay reference needs a path")
	}
	for _, step := range path {
		if step == "" || strings.IndexFunc(step, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_')
		}) >= 0 {
			panic("store: a replay reference path step must be a plain name: " + step)
		}
	}
	return `(k.response #>> '{` + strings.Join(path, ",") + `}')`
}

// RefInt is the integer at path, safe on any stored result: a value that is not a small
// non-negative integer joins nothing instead of failing the cast.
func RefInt(path []string) string {
	t := RefText(path)
	return `(CASE WHEN ` + t + ` ~ '^[0-9]{1,9}$' THEN ` + t + `::int END)`
}
