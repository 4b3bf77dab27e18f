-- +goose Up
-- The workbench searches keys and actions by prefix (SPEC §10.4: `/` searches the database).
-- A prefix is a range [p, p') only in byte order, and a B-tree serves such a range only in the
-- collation it was built with. Keys are visible ASCII (SPEC §9) and actions are upper-case
-- identifiers, so byte order ("C") is their natural order whatever the database's default
-- collation: these columns are declared COLLATE "C", which rebuilds their indexes in it (no
-- table rewrite). Comparisons with parameters and with other tables' text columns take "C" too.
ALTER TABLE idempotency_record ALTER COLUMN idempotency_key TYPE text COLLATE "C";
ALTER TABLE audit_event ALTER COLUMN idempotency_key TYPE text COLLATE "C",
                        ALTER COLUMN action TYPE text COLLATE "C";
ALTER TABLE feature_execution ALTER COLUMN idempotency_key TYPE text COLLATE "C";
ALTER TABLE record_revision ALTER COLUMN idempotency_key TYPE text COLLATE "C";
ALTER TABLE commitment_review ALTER COLUMN idempotency_key TYPE text COLLATE "C";

-- A key's rows in key order, then time: key-prefix search and a key's own history, one page at a
-- time. The audit index replaces audit_event_key_idx (same leading columns, so exact-key reads
-- keep their plan).
DROP INDEX audit_event_key_idx;
CREATE INDEX audit_event_owner_key_idx ON audit_event (owner_id, idempotency_key, at, id) WHERE idempotency_key IS NOT NULL;
CREATE INDEX feature_execution_owner_key_idx ON feature_execution (owner_id, idempotency_key, created_at, id) WHERE idempotency_key IS NOT NULL;
CREATE INDEX record_revision_owner_key_idx ON record_revision (owner_id, idempotency_key, created_at, record_id, revision) WHERE idempotency_key IS NOT NULL;
-- An action's events newest first: action-prefix search reads each matching action's page.
CREATE INDEX audit_event_owner_action_idx ON audit_event (owner_id, action, at, id);

-- +goose Down
DROP INDEX audit_event_owner_action_idx;
DROP INDEX record_revision_owner_key_idx;
DROP INDEX feature_execution_owner_key_idx;
DROP INDEX audit_event_owner_key_idx;
CREATE INDEX audit_event_key_idx ON audit_event (owner_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
ALTER TABLE commitment_review ALTER COLUMN idempotency_key TYPE text COLLATE "default";
ALTER TABLE record_revision ALTER COLUMN idempotency_key TYPE text COLLATE "default";
ALTER TABLE feature_execution ALTER COLUMN idempotency_key TYPE text COLLATE "default";
ALTER TABLE audit_event ALTER COLUMN action TYPE text COLLATE "default",
                        ALTER COLUMN idempotency_key TYPE text COLLATE "default";
ALTER TABLE idempotency_record ALTER COLUMN idempotency_key TYPE text COLLATE "default";
