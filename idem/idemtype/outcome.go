package idemtype

// Outcome is what one successful call did (SPEC §4.4). A call that fails reports an error with
// a code instead.
type Outcome string

// The outcomes of a successful call.
const (
	// Executed: this call ran the work and committed it.
	Executed Outcome = "EXECUTED"
	// Replayed: restored from the key's committed SUCCEEDED row (after a wait on the unique index
	// when Result.Waited says so).
	Replayed Outcome = "REPLAYED"
	// Joined: shared the value of an in-process call already running for the same request.
	Joined Outcome = "JOINED"
)
