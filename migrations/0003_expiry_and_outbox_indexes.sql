-- +goose Up
-- The reaper deletes expired keys of every owner in bounded batches, oldest expiry first
-- (idemwork reap, and serve every idempotency.reap_interval). The (owner_id, expires_at) index
-- serves a reap of one owner; this one serves the reap of all owners, which would otherwise
-- scan the whole table for every batch.
CREATE INDEX idempotency_record_expires_idx ON idempotency_record (expires_at);

-- idemwork verify checks that every outbox execution has exactly one message and that the two
-- agree: a lookup of an execution's messages, which would otherwise scan the owner's outbox.
CREATE INDEX outbox_message_execution_idx ON outbox_message (owner_id, execution_id);

-- +goose Down
DROP INDEX outbox_message_execution_idx;
DROP INDEX idempotency_record_expires_idx;
