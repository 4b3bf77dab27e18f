package store

import (
	"encoding/json"
	"time"
)

// Record is a record row, and also the shape of a revision snapshot and of the public JSON
// (SPEC §10.2).
type Record struct {
	ID         string          `json:"id" db:"id"`
	OwnerID    string          `json:"ownerId" db:"owner_id"`
	ModuleCode string          `json:"moduleCode" db:"module_code"`
	Revision   int             `json:"revision" db:"revision"`
	Title      string          `json:"title" db:"title"`
	Summary    string          `json:"summary" db:"summary"`
	Payload    json.RawMessage `json:"payload" db:"payload"`
	CreatedAt  time.Time       `json:"createdAt" db:"created_at"`
	UpdatedAt  time.Time       `json:"updatedAt" db:"updated_at"`
}

// Revision is an immutable record_revision row.
type Revision struct {
	OwnerID        string          `json:"ownerId" db:"owner_id"`
	RecordID       string          `json:"recordId" db:"record_id"`
	Revision       int             `json:"revision" db:"revision"`
	Snapshot       json.RawMessage `json:"snapshot" db:"snapshot"`
	IdempotencyKey *string         `json:"key" db:"idempotency_key"`
	CreatedAt      time.Time       `json:"createdAt" db:"created_at"`
}

// Execution is a feature_execution row.
type Execution struct {
	ID             string          `json:"id" db:"id"`
	OwnerID        string          `json:"ownerId" db:"owner_id"`
	ModuleCode     string          `json:"moduleCode" db:"module_code"`
	RecordID       string          `json:"recordId" db:"record_id"`
	FeatureID      string          `json:"featureId" db:"feature_id"`
	Mode           string          `json:"mode" db:"mode"`
	Status         string          `json:"status" db:"status"`
	RecordRevision int             `json:"recordRevision" db:"record_revision"`
	Input          json.RawMessage `json:"input" db:"input"`
	Output         json.RawMessage `json:"output" db:"output"`
	IdempotencyKey *string         `json:"key" db:"idempotency_key"`
	CreatedAt      time.Time       `json:"createdAt" db:"created_at"`
	UpdatedAt      time.Time       `json:"updatedAt" db:"updated_at"`
}

// AuditEvent is an audit_event row. Detail never holds bodies or secrets.
type AuditEvent struct {
	ID             string          `json:"id" db:"id"`
	OwnerID        string          `json:"ownerId" db:"owner_id"`
	ModuleCode     string          `json:"moduleCode" db:"module_code"`
	RecordID       *string         `json:"recordId" db:"record_id"`
	Action         string          `json:"action" db:"action"`
	Revision       *int            `json:"revision" db:"revision"`
	ExecutionID    *string         `json:"executionId" db:"execution_id"`
	IdempotencyKey *string         `json:"key" db:"idempotency_key"`
	Detail         json.RawMessage `json:"detail" db:"detail"`
	At             time.Time       `json:"at" db:"at"`
}

// Review is an immutable commitment_review row.
type Review struct {
	ID             string    `json:"id" db:"id"`
	OwnerID        string    `json:"ownerId" db:"owner_id"`
	ModuleCode     string    `json:"moduleCode" db:"module_code"`
	RecordID       string    `json:"recordId" db:"record_id"`
	RecordRevision int       `json:"recordRevision" db:"record_revision"`
	Verdict        string    `json:"verdict" db:"verdict"`
	Comment        string    `json:"comment" db:"comment"`
	IdempotencyKey *string   `json:"key" db:"idempotency_key"`
	CreatedAt      time.Time `json:"createdAt" db:"created_at"`
}

// OutboxMessage is an outbox_message row.
type OutboxMessage struct {
	ID            string          `json:"id" db:"id"`
	OwnerID       string          `json:"ownerId" db:"owner_id"`
	ExecutionID   string          `json:"executionId" db:"execution_id"`
	Provider      string          `json:"provider" db:"provider"`
	PayloadRef    json.RawMessage `json:"payloadRef" db:"payload_ref"`
	IdempotencyID string          `json:"idempotencyId" db:"idempotency_id"`
	Status        string          `json:"status" db:"status"`
	Attempts      int             `json:"attempts" db:"attempts"`
	NextAttemptAt time.Time       `json:"nextAttemptAt" db:"next_attempt_at"`
	LastError     *string         `json:"lastError" db:"last_error"`
	CreatedAt     time.Time       `json:"createdAt" db:"created_at"`
	UpdatedAt     time.Time       `json:"updatedAt" db:"updated_at"`
}

// KeyRow is an idempotency_record row as read models show it.
type KeyRow struct {
	OwnerID     string          `json:"ownerId" db:"owner_id"`
	Key         string          `json:"key" db:"idempotency_key"`
	Operation   string          `json:"operation" db:"operation"`
	Fingerprint string          `json:"fingerprint" db:"fingerprint"`
	Status      string          `json:"status" db:"status"`
	Response    json.RawMessage `json:"response" db:"response"`
	CreatedAt   time.Time       `json:"createdAt" db:"created_at"`
	ExpiresAt   time.Time       `json:"expiresAt" db:"expires_at"`
	UpdatedAt   time.Time       `json:"updatedAt" db:"updated_at"`
}
