package idem

// ReserveSQL is r's reservation statement, for the tests of what it writes.
func ReserveSQL(r *Runner) string { return r.sql.reserve }
