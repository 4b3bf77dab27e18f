package store

// PolicyOf is resolvePolicy's outcome and the exec mode it picks once the session knows whether
// a pooler answers (detected), for the policy tests.
func PolicyOf(dsn string, opts Options, detected bool) (pooler Pooler, mode, schemaPath string, err error) {
	p, err := resolvePolicy(dsn, opts)
	if err != nil {
		return p.pooler, "", p.schemaPath, err
	}
	m, _, err := p.modeFor(detected, p.schemaPath == "", "127.0.0.1:6432")
	return p.pooler, execModeName(m), p.schemaPath, err
}

// TxSettingsSQL is the statement every transaction of db begins with, and its arguments.
func TxSettingsSQL(db *DB) (string, []any) { return db.settings.sql, db.settings.args }

// CommitOutcome is commitOutcome, for its table test.
var CommitOutcome = commitOutcome
