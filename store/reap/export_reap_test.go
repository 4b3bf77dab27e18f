package reap

// The reaper's statements, for plan tests.
const (
	ReapAllSQL   = reapAll
	ReapOwnerSQL = reapOwner
)
