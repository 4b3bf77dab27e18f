-- +goose Up
-- Issue 22: every row a keyed request writes names the key and the transaction that wrote it, and
-- every revision and execution carries a digest chained to the revision before it, so a row
-- changed behind the kernel's back is found by a replay, a snapshot read and `idemwork verify`
-- (docs/reliability.md, "Tamper-evident history").
--
-- Expand / Copy / Verify, safe on existing data:
--   Expand: nullable columns only. ADD COLUMN without a default rewrites no row and evaluates
--           nothing for existing ones; the defaults set afterwards apply to new rows only.
--   Copy:   what the database can tell — an outbox message's key is its execution's; a revision's
--           and an execution's digest is computed from the row as it is now. What it cannot tell
--           stays NULL and says so: the transaction that wrote a row before this migration is not
--           recorded anywhere (written_xid NULL: "unattributed", reported by verify apart from
--           violations), nor when a key's earlier life expired (key_expires_at NULL).
--   Verify: the end of this file fails the migration (and rolls all of it back) unless every
--           revision and execution carries a digest and every keyed execution's message its key.
-- No business data (record, snapshot, payload, title, input, output, envelope) is rewritten.
-- The ledger entry 0004_row_digests records when the old rows were attested and how many.

-- written_xid: the top-level transaction that wrote the row (pg_current_xact_id(), the same
-- value idempotency_record.reserved_xid holds for the reservation), so the rows of one request
-- are the rows of one transaction.
ALTER TABLE record_revision ADD COLUMN written_xid xid8, ADD COLUMN digest bytea;
ALTER TABLE feature_execution ADD COLUMN written_xid xid8, ADD COLUMN digest bytea;
-- key_expires_at: the expiry of the key row as the writing transaction saw it. A later life of
-- the key (the key expired, the next request ran anew) is told from a second run by it.
ALTER TABLE audit_event ADD COLUMN written_xid xid8, ADD COLUMN key_expires_at timestamptz;
ALTER TABLE commitment_review ADD COLUMN written_xid xid8;
ALTER TABLE outbox_message ADD COLUMN idempotency_key text COLLATE "C", ADD COLUMN written_xid xid8;

-- The kernel names the transaction in its INSERTs; the defaults make any other writer (psql, an
-- import) name its own, so a row planted by hand is told from the request's rows.
ALTER TABLE record_revision ALTER COLUMN written_xid SET DEFAULT pg_current_xact_id();
ALTER TABLE feature_execution ALTER COLUMN written_xid SET DEFAULT pg_current_xact_id();
ALTER TABLE audit_event ALTER COLUMN written_xid SET DEFAULT pg_current_xact_id();
ALTER TABLE commitment_review ALTER COLUMN written_xid SET DEFAULT pg_current_xact_id();
ALTER TABLE outbox_message ALTER COLUMN written_xid SET DEFAULT pg_current_xact_id();

-- A key's rows, found by key: verify and the key view read a key's reviews and messages too.
CREATE INDEX commitment_review_owner_key_idx ON commitment_review (owner_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX outbox_message_owner_key_idx ON outbox_message (owner_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- Copy: an outbox message belongs to its execution's key.
UPDATE outbox_message m SET idempotency_key = e.idempotency_key
FROM feature_execution e
WHERE e.owner_id = m.owner_id AND e.id = m.execution_id AND m.idempotency_key IS NULL AND e.idempotency_key IS NOT NULL;

-- Copy: the digests of the rows already stored, revision 1 of every record first, then 2, … (each
-- revision's digest covers the one before it). The formula is the one the kernel writes with
-- (store/attest.go; package attest computes it in Go):
--   digest(revision n) = sha256(digest(revision n-1) || text of
--       {"at": created_at in µs, "key": idempotency_key, "xid": written_xid, "snapshot": snapshot})
--   digest(execution)  = sha256(digest(its revision) || text of
--       {"at": …, "key": …, "xid": …, "execution": {id, ownerId, moduleCode, recordId, featureId,
--        mode, status as written, recordRevision, input, output}})
-- with digest(revision 0) the empty string and "text" jsonb's own rendering, UTF-8.
CREATE INDEX record_revision_attest_idx ON record_revision (revision) WHERE digest IS NULL;
-- +goose StatementBegin
DO $$
DECLARE
    n integer;
BEGIN
    FOR n IN SELECT DISTINCT revision FROM record_revision WHERE digest IS NULL ORDER BY revision LOOP
        UPDATE record_revision rv SET digest = sha256(
                coalesce((SELECT p.digest FROM record_revision p
                          WHERE p.owner_id = rv.owner_id AND p.record_id = rv.record_id AND p.revision = rv.revision - 1), ''::bytea)
                || convert_to(jsonb_build_object(
                    'at', CASE WHEN isfinite(rv.created_at) THEN (extract(epoch FROM rv.created_at) * 1000000)::bigint END,
                    'key', rv.idempotency_key,
                    'xid', rv.written_xid::text,
                    'snapshot', rv.snapshot)::text, 'UTF8'))
        WHERE rv.revision = n AND rv.digest IS NULL;
    END LOOP;
END
$$;
-- +goose StatementEnd
DROP INDEX record_revision_attest_idx;

UPDATE feature_execution e SET digest = sha256(
        coalesce((SELECT v.digest FROM record_revision v
                  WHERE v.owner_id = e.owner_id AND v.record_id = e.record_id AND v.revision = e.record_revision), ''::bytea)
        || convert_to(jsonb_build_object(
            'at', CASE WHEN isfinite(e.created_at) THEN (extract(epoch FROM e.created_at) * 1000000)::bigint END,
            'key', e.idempotency_key,
            'xid', e.written_xid::text,
            'execution', jsonb_build_object('id', e.id, 'ownerId', e.owner_id, 'moduleCode', e.module_code,
                'recordId', e.record_id, 'featureId', e.feature_id, 'mode', e.mode,
                'status', CASE WHEN e.mode = 'outbox' THEN 'PENDING' ELSE e.status END,
                'recordRevision', e.record_revision, 'input', e.input, 'output', e.output))::text, 'UTF8'))
WHERE e.digest IS NULL;

INSERT INTO data_migration_ledger (name, status, detail, updated_at)
SELECT '0004_row_digests', 'passed', jsonb_build_object(
        'revisions', (SELECT count(*) FROM record_revision),
        'executions', (SELECT count(*) FROM feature_execution),
        'outboxMessagesKeyed', (SELECT count(*) FROM outbox_message WHERE idempotency_key IS NOT NULL),
        'attestedAt', now(),
        'note', 'rows written before migration 0004 carry no written_xid (the transaction that wrote them is not recorded) '
             || 'and digests computed by this migration from their content as it was then, not as it was written'),
    now();

-- Verify: the copy is whole, or nothing of this migration stays.
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM record_revision WHERE digest IS NULL) THEN
        RAISE EXCEPTION '0004: a revision was left without a digest';
    END IF;
    IF EXISTS (SELECT 1 FROM feature_execution WHERE digest IS NULL) THEN
        RAISE EXCEPTION '0004: an execution was left without a digest';
    END IF;
    IF EXISTS (SELECT 1 FROM outbox_message m JOIN feature_execution e ON e.owner_id = m.owner_id AND e.id = m.execution_id
               WHERE m.idempotency_key IS DISTINCT FROM e.idempotency_key) THEN
        RAISE EXCEPTION '0004: an outbox message does not carry its execution''s key';
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
DELETE FROM data_migration_ledger WHERE name = '0004_row_digests';
DROP INDEX outbox_message_owner_key_idx;
DROP INDEX commitment_review_owner_key_idx;
ALTER TABLE outbox_message DROP COLUMN written_xid, DROP COLUMN idempotency_key;
ALTER TABLE commitment_review DROP COLUMN written_xid;
ALTER TABLE audit_event DROP COLUMN key_expires_at, DROP COLUMN written_xid;
ALTER TABLE feature_execution DROP COLUMN digest, DROP COLUMN written_xid;
ALTER TABLE record_revision DROP COLUMN digest, DROP COLUMN written_xid;
