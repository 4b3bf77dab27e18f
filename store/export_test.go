package store

// The query builders, for the plan tests in store_test.
var (
	AuditPageSQL = auditPageSQL
	HistorySQL   = historySQL
)

// PolicyOf is resolvePolicy's outcome, for the policy tests.
func PolicyOf(dsn string, opts Options) (pooler Pooler, mode, searchPath string, err error) {
	p, err := resolvePolicy(dsn, opts)
	return p.pooler, execModeName(p.mode), p.searchPath, err
}

// The reaper's statements, for plan tests.
const (
	ReapAllSQL   = reapAll
	ReapOwnerSQL = reapOwner
)
