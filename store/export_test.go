package store

// The query builders, for the plan tests in store_test.
var (
	HistorySQL    = historySQL
	TimelineSQL   = timelineSQL
	AuditSQL      = auditSQL
	KeysSQL       = keysSQL
	RecordsSQL    = recordsSQL
	ExecutionsSQL = executionsSQL

	RevisionReplaySQL  = revisionReplaySQL
	ExecutionReplaySQL = executionReplaySQL
	RecordHeldSQL      = recordHeldSQL
)

// PolicyOf is resolvePolicy's outcome, for the policy tests.
func PolicyOf(dsn string, opts Options) (pooler Pooler, mode, searchPath string, err error) {
	p, err := resolvePolicy(dsn, opts)
	return p.pooler, execModeName(p.mode), p.searchPath, err
}

// AuditPageSQL is the action-prefix audit page the first plan test pinned.
func AuditPageSQL(owner, actionPrefix string, limit int, c *Cursor) (string, []any) {
	q, args, _ := auditSQL(AuditQuery{Owner: owner, ActionPrefix: actionPrefix}, limit, c)
	return q, args
}

// The reaper's statements, for plan tests.
const (
	ReapAllSQL   = reapAll
	ReapOwnerSQL = reapOwner
)
