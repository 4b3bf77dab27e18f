package stormtypes

// The verdicts of a storm.
const (
	// VerdictAgrees: every request got an outcome of SPEC §4.4 or an expected rejection, at
	// least one succeeded, and the database holds exactly what the answers say.
	VerdictAgrees = "agrees"
	// VerdictRejected: every request was rejected (4xx) and the storm wrote nothing.
	VerdictRejected = "rejected"
	// VerdictFailed: some requests failed (INTERNAL, NO_RESPONSE, a transport error, a 5xx
	// such as OVERLOADED), whatever the database holds.
	VerdictFailed = "failed"
	// VerdictDisagrees: the database contradicts the answers.
	VerdictDisagrees = "disagrees"
	// VerdictStopped: the storm was stopped before every request was answered.
	VerdictStopped = "stopped"
)

// Verdict is a storm's judgement in three parts, worded once here for every display (the CLI's
// table and JSON, the TUI).
type Verdict struct {
	// Answers: every request accounted for by outcome or error code.
	Answers Part `json:"answers"`
	// Database: what the key holds, read after every transaction of the storm ended.
	Database Part `json:"database"`
	// Verdict is one of the Verdict… constants.
	Verdict string `json:"verdict"`
	// Code is the error code behind any verdict but agrees: the rejection's, the failure's,
	// STORM_VERIFICATION_FAILED or CANCELLED.
	Code string `json:"code,omitempty"`
	// Text is the verdict in one sentence.
	Text string `json:"text"`
}

// Part is one part of a verdict.
type Part struct {
	OK   bool   `json:"ok"`
	Text string `json:"text"`
}
