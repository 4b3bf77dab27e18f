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

// RevisionExprs are the values of a revision being written, each given as an SQL expression
// (Owner, Record and Revision find its predecessor's digest). Named fields, not seven positional
// strings of SQL a caller could swap without the compiler noticing.
type RevisionExprs struct {
	Owner, Record, Revision, At, Key, XID, Snapshot string
}

// RevisionDigestSQL is attest.Revision as an SQL expression over the values r names. The
// kernel's INSERT is built with it; so is any bulk load that writes revisions as the kernel would
// (the bench's seeds, test fixtures), with XID "pg_current_xact_id()::text".
func RevisionDigestSQL(r RevisionExprs) string {
	return `sha256(coalesce((SELECT p.digest FROM record_revision p WHERE p.owner_id = ` + r.Owner + ` AND p.record_id = ` + r.Record +
		` AND p.revision = ` + r.Revision + ` - 1), ''::bytea) || convert_to(jsonb_build_object('at', ` + microsSQL(r.At) +
		`, 'key', ` + r.Key + `, 'xid', ` + r.XID + `, 'snapshot', ` + r.Snapshot + `)::text, 'UTF8'))`
}

// ExecutionExprs are the values of an execution being written, each given as an SQL expression
// (see RevisionExprs).
type ExecutionExprs struct {
	ID, Owner, Module, Record, Feature, Mode, Status, Revision, Input, Output, Key, At, XID string
}

// ExecutionDigestSQL is attest.OfExecution as an SQL expression over the values e names (see
// RevisionDigestSQL).
func ExecutionDigestSQL(e ExecutionExprs) string {
	return `sha256(coalesce((SELECT v.digest FROM record_revision v WHERE v.owner_id = ` + e.Owner + ` AND v.record_id = ` + e.Record +
		` AND v.revision = ` + e.Revision + `), ''::bytea) || convert_to(jsonb_build_object('at', ` + microsSQL(e.At) +
		`, 'key', ` + e.Key + `, 'xid', ` + e.XID + `, 'execution', jsonb_build_object('id', ` + e.ID + `, 'ownerId', ` + e.Owner +
		`, 'moduleCode', ` + e.Module + `, 'recordId', ` + e.Record + `, 'featureId', ` + e.Feature + `, 'mode', ` + e.Mode +
		`, 'status', CASE WHEN ` + e.Mode + ` = 'outbox' THEN 'PENDING' ELSE ` + e.Status + ` END, 'recordRevision', ` + e.Revision +
		`, 'input', ` + e.Input + `, 'output', ` + e.Output + `))::text, 'UTF8'))`
}

// The kernel's INSERTs of the rows a keyed request writes: each names its transaction
// (written_xid); a revision and an execution carry their digest. An audit event keeps the key's
// expiry as its transaction saw it (key_expires_at: what tells a later life of the key, after it
// expired, from a second run). An outbox message names its execution's key.
var (
	insertRevisionSQL = `INSERT INTO record_revision (owner_id, record_id, revision, snapshot, idempotency_key, created_at, written_xid, digest)
		VALUES ($1, $2, $3, $4, $5, $6, pg_current_xact_id(), ` +
		RevisionDigestSQL(RevisionExprs{Owner: "$1", Record: "$2", Revision: "$3", At: "$6::timestamptz", Key: "$5::text",
			XID: "pg_current_xact_id()::text", Snapshot: "$4::jsonb"}) + `)`
	insertExecutionSQL = `INSERT INTO feature_execution (owner_id, id, module_code, record_id, feature_id, mode, status,
			record_revision, input, output, idempotency_key, created_at, updated_at, written_xid, digest)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, pg_current_xact_id(), ` +
		ExecutionDigestSQL(ExecutionExprs{ID: "$2::text", Owner: "$1::text", Module: "$3::text", Record: "$4::text", Feature: "$5::text",
			Mode: "$6::text", Status: "$7::text", Revision: "$8::integer", Input: "$9::jsonb", Output: "$10::jsonb", Key: "$11::text",
			At: "$12::timestamptz", XID: "pg_current_xact_id()::text"}) + `)`
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
