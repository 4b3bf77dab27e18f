package records

// RecordHeldSQL is the statement of a record read ahead, for the plan tests.
const RecordHeldSQL = recordHeldSQL
