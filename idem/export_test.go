package idem

// ReserveSQL is r's reservation statement, for the tests of what it writes.
func ReserveSQL(r *Runner) string { return r.sql.reserve }

// Unbatched makes r send each statement of its plans in a round trip of its own (plan.go's
// switch): the flow without its round-trip optimisations.
func Unbatched(r *Runner) *Runner {
	r.batch.oneByOne = true
	return r
}
