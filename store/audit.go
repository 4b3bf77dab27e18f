package store

// The audit action of a feature run is named in one place: the kernel audits a run with it and
// the outbox worker the settle of a queued one, and the read models, idemwork verify and the
// demos find those events by it.

// Outcomes a feature run's audit action names (FeatureAction). The kernel audits a run as
// EXECUTED (internal), BLOCKED (direct_external, failed closed) or QUEUED (outbox); the outbox
// worker audits the settle of a QUEUED run as DELIVERED or FAILED.
const (
	FeatureExecuted  = "EXECUTED"
	FeatureBlocked   = "BLOCKED"
	FeatureQueued    = "QUEUED"
	FeatureDelivered = "DELIVERED"
	FeatureFailed    = "FAILED"
)

const featureActionPrefix = "FEATURE_"

// The audit actions of the other writes of a request.
const (
	ActionRecordCreated = "RECORD_CREATED"
	ActionRecordPatched = "RECORD_PATCHED"
	ActionReviewCreated = "REVIEW_CREATED"
)

// RevisionWriteActionSQL matches the audit action of a write that wrote a revision (a create,
// a patch, an internal feature's run), over the column act.
func RevisionWriteActionSQL(act string) string {
	return `(` + act + ` IN ('` + ActionRecordCreated + `', '` + ActionRecordPatched + `') OR ` + act + ` ~ '^` + featureActionPrefix + `.+_` + FeatureExecuted + `$')`
}

// FeatureAction is the audit action of feature featureID's outcome: FEATURE_<id>_<outcome>
// (FEATURE_F02_QUEUED, FEATURE_F02_DELIVERED).
func FeatureAction(featureID, outcome string) string {
	return featureActionPrefix + featureID + "_" + outcome
}

// FeatureActionSQL is FeatureAction as an SQL expression over a column holding the feature id.
func FeatureActionSQL(featureColumn, outcome string) string {
	return "'" + featureActionPrefix + "' || " + featureColumn + " || '_" + outcome + "'"
}

// SettleActionPattern matches the settle events of any feature (a POSIX regular expression).
const SettleActionPattern = "^" + featureActionPrefix + ".+_(" + FeatureDelivered + "|" + FeatureFailed + ")$"
