package store

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/idemwork/idemwork/model"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/puddle/v2"
)

// What every job's statements share: the column lists of the tables several jobs read (in the
// order their Scan and sqlx tags expect), and how an error says the database is unreachable.

// RecordColumns are a record row's columns.
const RecordColumns = `id, owner_id, module_code, revision, title, summary, payload, created_at, updated_at`

// ExecutionColumns are a feature execution row's columns.
const ExecutionColumns = `id, owner_id, module_code, record_id, feature_id, mode, status, record_revision, input, output, idempotency_key, created_at, updated_at`

// ScanExecution scans a row of ExecutionColumns; no row is ErrNotFound.
func ScanExecution(row pgx.Row) (model.Execution, error) {
	var e model.Execution
	err := row.Scan(&e.ID, &e.OwnerID, &e.ModuleCode, &e.RecordID, &e.FeatureID, &e.Mode, &e.Status, &e.RecordRevision,
		&e.Input, &e.Output, &e.IdempotencyKey, &e.CreatedAt, &e.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, ErrNotFound
	}
	return e, err
}

// Prefixed qualifies a list of plain column names with a table alias.
func Prefixed(alias, cols string) string {
	parts := strings.Split(cols, ",")
	for i, p := range parts {
		parts[i] = alias + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}

// Unreachable reports whether err means the database could not be reached or went away (a
// stopped cluster, a refused or dropped connection, a server shutting down), as opposed to a
// query that failed: readers say so in words instead of showing the driver's text.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ne *net.OpError
	if errors.As(err, &ne) {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, puddle.ErrClosedPool)
}

// TextPtr is the *string a nullable text column scans into.
func TextPtr(t pgtype.Text) *string {
	if !t.Valid {
		return nil
	}
	s := t.String
	return &s
}
