package model

import (
	"encoding/json"
	"strconv"
	"strings"
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
	// IdempotencyKey is the key of the request that queued the message (its execution's).
	IdempotencyKey *string   `json:"key,omitempty" db:"idempotency_key"`
	Status         string    `json:"status" db:"status"`
	Attempts       int       `json:"attempts" db:"attempts"`
	NextAttemptAt  time.Time `json:"nextAttemptAt" db:"next_attempt_at"`
	LastError      *string   `json:"lastError" db:"last_error"`
	CreatedAt      time.Time `json:"createdAt" db:"created_at"`
	UpdatedAt      time.Time `json:"updatedAt" db:"updated_at"`
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
	// ReservedXID is the transaction that reserved the key (reserved_xid): the one that wrote
	// the rows of its current life.
	ReservedXID *string `json:"-" db:"reserved_xid"`
}

// Event is one entry of an owner's merged timeline.
type Event struct {
	At          time.Time `json:"at" db:"at"`
	Kind        string    `json:"kind" db:"kind"` // audit | execution | key | revision
	ID          string    `json:"id" db:"id"`
	ModuleCode  *string   `json:"moduleCode,omitempty" db:"module_code"`
	RecordID    *string   `json:"recordId,omitempty" db:"record_id"`
	Revision    *int      `json:"revision,omitempty" db:"revision"`
	ExecutionID *string   `json:"executionId,omitempty" db:"execution_id"`
	Action      *string   `json:"action,omitempty" db:"action"`
	Key         *string   `json:"key,omitempty" db:"idempotency_key"`
	Status      *string   `json:"status,omitempty" db:"status"`
	Operation   *string   `json:"operation,omitempty" db:"operation"`
	FeatureID   *string   `json:"featureId,omitempty" db:"feature_id"`
	Mode        *string   `json:"mode,omitempty" db:"mode"`
	// XID is the transaction that wrote the row (for a key, the one that reserved it); absent
	// for a row written before migration 0004.
	XID *string `json:"xid,omitempty" db:"xid"`
	// KeyExpiresAt is, for a key, its expiry; for an audit event, the key's expiry as the
	// transaction that wrote it saw it (what proves a later life of the key came after it).
	KeyExpiresAt *time.Time `json:"keyExpiresAt,omitempty" db:"key_expires_at"`
}

// Summary is the entry's substance in a few words: its action, operation, feature, mode or
// status, and the record revision or execution it names.
func (e Event) Summary() string {
	var parts []string
	for _, p := range []*string{e.Action, e.Operation, e.FeatureID, e.Mode, e.Status} {
		if p != nil && *p != "" {
			parts = append(parts, *p)
		}
	}
	if e.RecordID != nil {
		r := "record " + *e.RecordID
		if e.Revision != nil {
			r += " rev " + strconv.Itoa(*e.Revision)
		}
		parts = append(parts, r)
	}
	if e.Kind == "execution" {
		parts = append(parts, "execution "+e.ID)
	}
	return strings.Join(parts, " · ")
}

// Session is one client session of the current database, with what it waits on.
type Session struct {
	PID         int     `json:"pid" db:"pid"`
	Application string  `json:"application" db:"application_name"`
	State       string  `json:"state" db:"state"`
	WaitType    string  `json:"waitType" db:"wait_event_type"`
	WaitEvent   string  `json:"waitEvent" db:"wait_event"`
	BlockedBy   []int64 `json:"blockedBy" db:"-"`
	XactMs      float64 `json:"xactMs" db:"xact_ms"`
	Query       string  `json:"query" db:"query"`
	BackendXID  string  `json:"backendXid" db:"backend_xid"`
	LockType    string  `json:"lockType" db:"locktype"`
	LockTarget  string  `json:"lockTarget" db:"lock_target"`
	// InXact: a transaction is open (XactMs is its age; else the time since the last statement).
	InXact bool `json:"inXact" db:"in_xact"`
}

// RevisionHead is a revision without its snapshot: what a list of revisions shows.
type RevisionHead struct {
	Revision       int       `json:"revision" db:"revision"`
	IdempotencyKey *string   `json:"key" db:"idempotency_key"`
	CreatedAt      time.Time `json:"createdAt" db:"created_at"`
	// Bytes is the snapshot's size on disk (after TOAST compression; reading the whole snapshot
	// to measure it would read every revision).
	Bytes int `json:"bytes" db:"bytes"`
}

// RecordOutline is a record with the heads of its revisions, its executions and audit events:
// what the workbench loads to open a record, leaving each snapshot to be read when it is shown.
type RecordOutline struct {
	Record     Record         `json:"record"`
	Revisions  []RevisionHead `json:"revisions"`
	Executions []Execution    `json:"executions"`
	Audit      []AuditEvent   `json:"audit"`
}
