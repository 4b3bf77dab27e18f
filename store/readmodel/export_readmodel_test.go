package readmodel

import "github.com/idemwork/idemwork/model"

// The query builders, for the plan tests.
var (
	HistorySQL    = historySQL
	TimelineSQL   = timelineSQL
	AuditSQL      = auditSQL
	KeysSQL       = keysSQL
	RecordsSQL    = recordsSQL
	ExecutionsSQL = executionsSQL
)

// AuditPageSQL is the action-prefix audit page the first plan test pinned.
func AuditPageSQL(owner, actionPrefix string, limit int, c *Cursor) (string, []any) {
	q, args, _ := auditSQL(model.AuditQuery{Owner: owner, ActionPrefix: actionPrefix}, limit, c)
	return q, args
}
