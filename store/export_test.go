package store

// The query builders, for the plan tests in store_test.
var (
	AuditPageSQL = auditPageSQL
	HistorySQL   = historySQL
)
