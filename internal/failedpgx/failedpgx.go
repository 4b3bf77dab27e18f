// Package failedpgx is the rows a pgx read answers when its statement never reached the server
// (no connection within the acquire timeout, a BEGIN the server refused, a batch already
// failed). pgx's own Query never returns nil Rows, even with an error, and code written against
// it closes them on every path: a nil there is a panic in the caller, far from the cause.
package failedpgx

import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Rows is closed rows whose Err is err: Next is false, Scan and Values fail with err.
func Rows(err error) pgx.Rows { return rows{err} }

type rows struct{ err error }

func (r rows) Close()                                       {}
func (r rows) Err() error                                   { return r.err }
func (r rows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (r rows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (r rows) Next() bool                                   { return false }
func (r rows) Scan(...any) error                            { return r.err }
func (r rows) Values() ([]any, error)                       { return nil, r.err }
func (r rows) RawValues() [][]byte                          { return nil }
func (r rows) Conn() *pgx.Conn                              { return nil }
func (r rows) TypeMap() *pgtype.Map                         { return nil }
