-- +goose Up
-- Every key leads with owner_id so the schema can be distributed by owner (e.g. Citus) unchanged.

CREATE TABLE record (
    owner_id    text        NOT NULL,
    id          text        NOT NULL,
    module_code text        NOT NULL,
    revision    integer     NOT NULL CHECK (revision >= 1),
    title       text        NOT NULL,
    summary     text        NOT NULL DEFAULT '',
    payload     jsonb       NOT NULL CHECK (jsonb_typeof(payload) = 'object'),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    CONSTRAINT record_pkey PRIMARY KEY (owner_id, id),
    CONSTRAINT record_owner_module_id_key UNIQUE (owner_id, module_code, id)
);
-- Records of an owner, newest first, keyset-paged by (created_at, id).
CREATE INDEX record_owner_created_idx ON record (owner_id, created_at DESC, id DESC);

-- Immutable revisions: the snapshot is the whole record as of that revision.
CREATE TABLE record_revision (
    owner_id        text        NOT NULL,
    record_id       text        NOT NULL,
    revision        integer     NOT NULL CHECK (revision >= 1),
    snapshot        jsonb       NOT NULL,
    idempotency_key text,
    created_at      timestamptz NOT NULL,
    CONSTRAINT record_revision_pkey PRIMARY KEY (owner_id, record_id, revision),
    CONSTRAINT record_revision_record_fkey FOREIGN KEY (owner_id, record_id) REFERENCES record (owner_id, id)
);
CREATE INDEX record_revision_owner_created_idx ON record_revision (owner_id, created_at, record_id, revision);

CREATE TABLE feature_execution (
    owner_id        text        NOT NULL,
    id              text        NOT NULL,
    module_code     text        NOT NULL,
    record_id       text        NOT NULL,
    feature_id      text        NOT NULL,
    mode            text        NOT NULL CHECK (mode IN ('internal', 'blocked_external', 'outbox')),
    status          text        NOT NULL CHECK (status IN ('SUCCEEDED', 'BLOCKED', 'PENDING', 'DELIVERED', 'FAILED')),
    record_revision integer     NOT NULL,
    input           jsonb       NOT NULL DEFAULT '{}'::jsonb,
    output          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    idempotency_key text,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    CONSTRAINT feature_execution_pkey PRIMARY KEY (owner_id, id),
    CONSTRAINT feature_execution_record_fkey FOREIGN KEY (owner_id, module_code, record_id)
        REFERENCES record (owner_id, module_code, id)
);
CREATE INDEX feature_execution_owner_created_idx ON feature_execution (owner_id, created_at, id);
CREATE INDEX feature_execution_record_idx ON feature_execution (owner_id, record_id, created_at);

CREATE TABLE audit_event (
    owner_id        text        NOT NULL,
    id              text        NOT NULL,
    module_code     text        NOT NULL,
    record_id       text,
    action          text        NOT NULL,
    revision        integer,
    execution_id    text,
    idempotency_key text,
    detail          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    at              timestamptz NOT NULL,
    CONSTRAINT audit_event_pkey PRIMARY KEY (owner_id, id)
);
CREATE INDEX audit_event_owner_at_idx ON audit_event (owner_id, at, id);
CREATE INDEX audit_event_record_idx ON audit_event (owner_id, record_id, at);
CREATE INDEX audit_event_key_idx ON audit_event (owner_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

-- The idempotency boundary is (owner_id, idempotency_key); operation is a scope check, not part
-- of the unique index.
CREATE TABLE idempotency_record (
    owner_id        text        NOT NULL,
    idempotency_key text        NOT NULL,
    operation       text        NOT NULL,
    fingerprint     text        NOT NULL,
    status          text        NOT NULL CHECK (status IN ('PROCESSING', 'SUCCEEDED')),
    response        jsonb,
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    -- The transaction that reserved the key. A competitor whose INSERT snapshot did not yet see
    -- this transaction as finished provably waited for it on the unique index.
    reserved_xid    xid8        NOT NULL DEFAULT pg_current_xact_id(),
    CONSTRAINT idempotency_record_pkey PRIMARY KEY (owner_id, idempotency_key),
    CONSTRAINT idempotency_record_response_check CHECK ((status = 'PROCESSING') = (response IS NULL))
);
CREATE INDEX idempotency_record_owner_created_idx ON idempotency_record (owner_id, created_at DESC, idempotency_key);
CREATE INDEX idempotency_record_owner_expires_idx ON idempotency_record (owner_id, expires_at);

CREATE TABLE commitment_review (
    owner_id        text        NOT NULL,
    id              text        NOT NULL,
    module_code     text        NOT NULL DEFAULT 'COMMITMENT' CHECK (module_code = 'COMMITMENT'),
    record_id       text        NOT NULL,
    record_revision integer     NOT NULL,
    verdict         text        NOT NULL CHECK (verdict IN ('kept', 'missed')),
    comment         text        NOT NULL,
    idempotency_key text,
    created_at      timestamptz NOT NULL,
    CONSTRAINT commitment_review_pkey PRIMARY KEY (owner_id, id),
    CONSTRAINT commitment_review_record_fkey FOREIGN KEY (owner_id, module_code, record_id)
        REFERENCES record (owner_id, module_code, id)
);

-- The controlled outbox that replaces direct provider calls (SPEC §7).
CREATE TABLE outbox_message (
    owner_id        text        NOT NULL,
    id              text        NOT NULL,
    execution_id    text        NOT NULL,
    provider        text        NOT NULL,
    payload_ref     jsonb       NOT NULL,
    idempotency_id  text        NOT NULL,
    status          text        NOT NULL CHECK (status IN ('PENDING', 'DELIVERED', 'FAILED')),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    last_error      text,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    CONSTRAINT outbox_message_pkey PRIMARY KEY (owner_id, id),
    CONSTRAINT outbox_message_idempotency_key UNIQUE (owner_id, idempotency_id),
    CONSTRAINT outbox_message_execution_fkey FOREIGN KEY (owner_id, execution_id) REFERENCES feature_execution (owner_id, id)
);
CREATE INDEX outbox_message_due_idx ON outbox_message (next_attempt_at) WHERE status = 'PENDING';

CREATE TABLE data_migration_ledger (
    name       text        NOT NULL PRIMARY KEY,
    status     text        NOT NULL CHECK (status IN ('pending', 'passed', 'failed')),
    detail     jsonb       NOT NULL DEFAULT '{}'::jsonb,
    updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO data_migration_ledger (name, status) VALUES ('0019_identity_legacy_verification', 'pending');

-- +goose Down
DROP TABLE data_migration_ledger;
DROP TABLE outbox_message;
DROP TABLE commitment_review;
DROP TABLE idempotency_record;
DROP TABLE audit_event;
DROP TABLE feature_execution;
DROP TABLE record_revision;
DROP TABLE record;
