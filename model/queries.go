package model

// RecordQuery selects an owner's records.
type RecordQuery struct {
	Owner  string
	Module string // "" = every module
	// IDPrefix lists the records whose id starts with it (ULID characters), newest first, through
	// the primary key.
	IDPrefix string
	// TitleContains lists the records whose title contains it (case-insensitive), newest first.
	// Unlike a prefix this is no index range: each page scans the owner's records until it has a
	// page of matches.
	TitleContains string
	Limit         int
	Cursor        string
}

// KeyQuery selects an owner's idempotency rows.
type KeyQuery struct {
	Owner string
	// Prefix lists the keys starting with it in key order (byte order, A→Z), through the
	// primary key; without it the page is newest first.
	Prefix string
	// Reverse lists the same rows from the other end (the oldest first; for a prefix, Z→A): a
	// list's G reaches its last row in one page, not page by page. A cursor of a reversed page
	// continues in reverse.
	Reverse bool
	Limit   int
	Cursor  string
}

// ExecutionQuery selects an owner's feature executions.
type ExecutionQuery struct {
	Owner string
	// KeyPrefix lists the executions whose key starts with it, in key order, then time.
	KeyPrefix string
	// RecordPrefix lists the executions of records whose id starts with it (ULID characters),
	// newest record first.
	RecordPrefix string
	Limit        int
	Cursor       string
}

// AuditQuery selects an owner's audit events.
type AuditQuery struct {
	Owner string
	// ActionPrefix lists the events whose action starts with it, newest first: each matching
	// action's newest page through its index, merged.
	ActionPrefix string
	// KeyPrefix lists the events whose key starts with it, in key order, then time.
	KeyPrefix string
	// Reverse lists the same rows from the other end (the oldest first; by key, Z→A and each
	// key's newest first); a cursor of a reversed page continues in reverse.
	Reverse bool
	Limit   int
	Cursor  string
}

// DetailCap bounds each list of one record's detail (newest kept).
const DetailCap = 1000

// HistoryQuery selects entries of an owner's merged timeline.
type HistoryQuery struct {
	Owner string
	// Desc lists newest first (or, by key, keys Z→A and each key's entries newest first).
	Desc bool
	// Key lists exactly this key's entries: its whole story, every life.
	Key string
	// KeyPrefix lists the entries of the keys starting with it, in key order, then time.
	KeyPrefix string
	// ActionPrefix lists the audit events whose action starts with it, in time order (the other
	// kinds have no action).
	ActionPrefix string
	Limit        int
	Cursor       string
}

// ExportFormat is how ExportHistory writes.
type ExportFormat string

// Export formats.
const (
	ExportJSON ExportFormat = "json"
	ExportCSV  ExportFormat = "csv"
)
