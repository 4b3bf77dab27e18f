package kernel

import (
	"idemwork/idem"
	"idemwork/store"
)

// Label names a feature with its mode and what a run of it commits, for pickers and help:
// "F02 publish · direct_external → blocked".
func (f Feature) Label() string {
	s := f.ID + " " + f.Name + " · " + string(f.Mode)
	switch f.Mode {
	case ModeDirectExternal:
		s += " → blocked"
	case ModeOutbox:
		s += " → queued for the worker"
	}
	return s
}

// OutcomeText is a write's outcome as a person should read it. A run whose execution did not
// simply succeed leads with the execution's status — "BLOCKED (outcome EXECUTED)" — so a run
// that failed closed, or is only queued, never reads as a success of the real action.
func OutcomeText(o idem.Outcome, e *store.Execution) string {
	if e == nil || e.Status == "SUCCEEDED" || e.Status == "" {
		return string(o)
	}
	return e.Status + " (outcome " + string(o) + ")"
}
