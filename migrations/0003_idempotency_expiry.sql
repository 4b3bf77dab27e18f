-- +goose Up
-- The reaper deletes expired keys of every owner in bounded batches, oldest expiry first
-- (idemwork reap, and serve every idempotency.reap_interval). The (owner_id, expires_at) index
-- serves a reap of one owner; this one serves the reap of all owners, which would otherwise
-- scan the whole table for every batch.
CREATE INDEX idempotency_record_expires_idx ON idempotency_record (expires_at);

-- +goose Down
DROP INDEX idempotency_record_expires_idx;
