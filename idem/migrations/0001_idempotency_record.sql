-- The idempotency runner's table (github.com/idemwork/idemwork/idem, SPEC §4.1). idem.Migrate
-- applies this file inside one transaction with the target schema first on search_path (SET
-- LOCAL); a service that runs goose itself may copy it into its own migrations. Every statement
-- is IF NOT EXISTS, so a database whose table an idemwork migration (0001-0003) already created
-- is adopted as it is: the shape below is exactly theirs.

-- +goose Up
-- One row per (owner_id, idempotency_key); operation is a scope check, not part of the unique
-- index. response is the envelope {"schemaVersion", "policy", "result"}: NULL while PROCESSING.
CREATE TABLE IF NOT EXISTS idempotency_record (
    owner_id        text              NOT NULL,
    idempotency_key text COLLATE "C"  NOT NULL,
    operation       text              NOT NULL,
    fingerprint     text              NOT NULL,
    status          text              NOT NULL CHECK (status IN ('PROCESSING', 'SUCCEEDED')),
    response        jsonb,
    created_at      timestamptz       NOT NULL,
    expires_at      timestamptz       NOT NULL,
    updated_at      timestamptz       NOT NULL,
    -- The transaction that reserved the key. A competitor whose INSERT snapshot did not yet see
    -- this transaction as finished provably waited for it on the unique index.
    reserved_xid    xid8              NOT NULL DEFAULT pg_current_xact_id(),
    CONSTRAINT idempotency_record_pkey PRIMARY KEY (owner_id, idempotency_key),
    CONSTRAINT idempotency_record_response_check CHECK ((status = 'PROCESSING') = (response IS NULL))
);
-- An owner's keys newest first (a support view), an owner's expired keys (a reap of one owner),
-- and every expired key (a reap of all owners).
CREATE INDEX IF NOT EXISTS idempotency_record_owner_created_idx ON idempotency_record (owner_id, created_at DESC, idempotency_key);
CREATE INDEX IF NOT EXISTS idempotency_record_owner_expires_idx ON idempotency_record (owner_id, expires_at);
CREATE INDEX IF NOT EXISTS idempotency_record_expires_idx ON idempotency_record (expires_at);

-- +goose Down
DROP TABLE idempotency_record;
