package store

import "github.com/idemwork/idemwork/model"

// The rows the store reads and writes and the queries that select them are plain data of
// package model (views use them without importing the store); these names are the same types.
type (
	Record        = model.Record
	Revision      = model.Revision
	Execution     = model.Execution
	AuditEvent    = model.AuditEvent
	Review        = model.Review
	OutboxMessage = model.OutboxMessage
	KeyRow        = model.KeyRow
	Event         = model.Event
	Session       = model.Session
	RevisionHead  = model.RevisionHead
	RecordOutline = model.RecordOutline

	RecordQuery    = model.RecordQuery
	KeyQuery       = model.KeyQuery
	ExecutionQuery = model.ExecutionQuery
	AuditQuery     = model.AuditQuery
	HistoryQuery   = model.HistoryQuery
	ExportFormat   = model.ExportFormat
)

// Export formats.
const (
	ExportJSON = model.ExportJSON
	ExportCSV  = model.ExportCSV
)

// DetailCap bounds each list of one record's detail (newest kept).
const DetailCap = model.DetailCap
