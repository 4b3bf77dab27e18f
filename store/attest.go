package store

// The digests of package attest, as the kernel's INSERTs compute them on the server, in the
// statement that writes the row (no extra statement, no round trip, no trigger): the revision's
// over its predecessor's digest, read by primary key in the same statement, and the execution's
// over its revision's, which an internal feature's run wrote earlier in the same transaction.
// pg_current_xact_id() is the top-level transaction: the one whose reservation holds the key
// (idempotency_record.reserved_xid). Package attest computes the same bytes in Go; a test pins
// the two together on every kind of row.

// microsSQL is a timestamptz in microseconds since 1970, as attest.Head.At renders it (null
// when it is not finite).
func microsSQL(ts string) string {
	return `CASE WHEN isfinite(` + ts + `) THEN (extract(epoch FROM ` + ts + `) * 1000000)::bigint END`
}

// RevisionDigestSQL is attest.Revision as an SQL expression over the values of a revision being
// written, each given as an SQL expression (owner, record and revision find its predecessor's
// digest). The kernel's INSERT is built with it; so is any bulk load that writes revisions as
// the kernel would (the bench's seeds, test fixtures), with xid "pg_current_xact_id()::text".
func RevisionDigestSQL(owner, record, revision, at, key, xid, snapshot string) string {
	return revisionDigestSQL(owner, record, revision, at, key, xid, snapshot)
}

// ExecutionDigestSQL is attest.OfExecution as an SQL expression over the values of an execution
// being written (see RevisionDigestSQL).
func ExecutionDigestSQL(id, owner, module, record, feature, mode, status, revision, input, output, key, at, xid string) string {
	return executionDigestSQL(executionExprs{id: id, owner: owner, module: module, record: record, feature: feature, mode: mode,
		status: status, revision: revision, input: input, output: output, key: key, at: at, xid: xid})
}

// revisionDigestSQL is attest.Revision over the revision (owner, record, revision) being written.
func revisionDigestSQL(owner, record, revision, at, key, xid, snapshot string) string {
	return `sha256(coalesce((SELECT p.digest FROM record_revision p WHERE p.owner_id = ` + owner + ` AND p.record_id = ` + record +
		` AND p.revision = ` + revision + ` - 1), ''::bytea) || convert_to(jsonb_build_object('at', ` + microsSQL(at) +
		`, 'key', ` + key + `, 'xid', ` + xid + `, 'snapshot', ` + snapshot + `)::text, 'UTF8'))`
}

// executionDigestSQL is attest.OfExecution over the execution being written; e names its
// columns' values.
func executionDigestSQL(e executionExprs) string {
	return `sha256(coalesce((SELECT v.digest FROM record_revision v WHERE v.owner_id = ` + e.owner + ` AND v.record_id = ` + e.record +
		` AND v.revision = ` + e.revision + `), ''::bytea) || convert_to(jsonb_build_object('at', ` + microsSQL(e.at) +
		`, 'key', ` + e.key + `, 'xid', ` + e.xid + `, 'execution', jsonb_build_object('id', ` + e.id + `, 'ownerId', ` + e.owner +
		`, 'moduleCode', ` + e.module + `, 'recordId', ` + e.record + `, 'featureId', ` + e.feature + `, 'mode', ` + e.mode +
		`, 'status', CASE WHEN ` + e.mode + ` = 'outbox' THEN 'PENDING' ELSE ` + e.status + ` END, 'recordRevision', ` + e.revision +
		`, 'input', ` + e.input + `, 'output', ` + e.output + `))::text, 'UTF8'))`
}

type executionExprs struct {
	id, owner, module, record, feature, mode, status, revision, input, output, key, at, xid string
}

// The kernel's INSERTs of the rows a keyed request writes: each names its transaction
// (written_xid); a revision and an execution carry their digest. An audit event keeps the key's
// expiry as its transaction saw it (key_expires_at: what tells a later life of the key, after it
// expired, from a second run). An outbox message names its execution's key.
var (
	insertRevisionSQL = `INSERT INTO record_revision (owner_id, record_id, revision, snapshot, idempotency_key, created_at, written_xid, digest)
		VALUES ($1, $2, $3, $4, $5, $6, pg_current_xact_id(), ` +
		revisionDigestSQL("$1", "$2", "$3", "$6::timestamptz", "$5::text", "pg_current_xact_id()::text", "$4::jsonb") + `)`
	insertExecutionSQL = `INSERT INTO feature_execution (owner_id, id, module_code, record_id, feature_id, mode, status,
			record_revision, input, output, idempotency_key, created_at, updated_at, written_xid, digest)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, pg_current_xact_id(), ` +
		executionDigestSQL(executionExprs{id: "$2::text", owner: "$1::text", module: "$3::text", record: "$4::text", feature: "$5::text",
			mode: "$6::text", status: "$7::text", revision: "$8::integer", input: "$9::jsonb", output: "$10::jsonb", key: "$11::text",
			at: "$12::timestamptz", xid: "pg_current_xact_id()::text"}) + `)`
	insertAuditSQL = `INSERT INTO audit_event (owner_id, id, module_code, record_id, action, revision, execution_id, idempotency_key, detail, at,
			written_xid, key_expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, pg_current_xact_id(),
			(SELECT k.expires_at FROM idempotency_record k WHERE k.owner_id = $1 AND k.idempotency_key = $8))`
	insertReviewSQL = `INSERT INTO commitment_review (owner_id, id, module_code, record_id, record_revision, verdict, comment, idempotency_key, created_at,
			written_xid)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, pg_current_xact_id())`
	insertOutboxSQL = `INSERT INTO outbox_message (owner_id, id, execution_id, provider, payload_ref, idempotency_id, status,
			attempts, next_attempt_at, created_at, updated_at, idempotency_key, written_xid)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, $9, $9, $10, pg_current_xact_id())`
)
