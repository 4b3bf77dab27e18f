package store

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"

	"github.com/jackc/pgx/v5"
	"github.com/jmoiron/sqlx"
)

// Reader is the read models' query API: sqlx's Select and Get, with sqlx mapping rows to
// structs by their db tags. The statements themselves go through the DB's one path (db.Q), so a
// read model can never bypass what a session enforces: inside BEGIN READ ONLY on a read-only
// session, inside a transaction through a transaction pooler, in the ambient transaction when
// ctx carries one. (database/sql could only give that with a sql.Tx: three round trips a read.)
type Reader struct{ db *DB }

// SelectContext runs query and scans every row into dest, a pointer to a slice.
func (r *Reader) SelectContext(ctx context.Context, dest any, query string, args ...any) error {
	rows, err := r.db.Q(ctx).Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	return sqlx.StructScan(&sqlxRows{rows: rows}, dest)
}

// GetContext runs query and scans its first row into dest, a pointer; no row is sql.ErrNoRows.
func (r *Reader) GetContext(ctx context.Context, dest any, query string, args ...any) error {
	dv := reflect.ValueOf(dest)
	if dv.Kind() != reflect.Pointer || dv.IsNil() {
		return fmt.Errorf("store: GetContext needs a non-nil pointer, got %T", dest)
	}
	rows, err := r.db.Q(ctx).Query(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	one := reflect.New(reflect.SliceOf(dv.Elem().Type()))
	if err := sqlx.StructScan(&sqlxRows{rows: rows, limit: 1}, one.Interface()); err != nil {
		return err
	}
	if one.Elem().Len() == 0 {
		return sql.ErrNoRows
	}
	dv.Elem().Set(one.Elem().Index(0))
	return nil
}

// ScanStructs maps rows (at most limit when > 0) into dest, a pointer to a slice, by their db
// tags, as the Reader's SelectContext does — for the answers of a batch, which the Reader's
// one-statement calls cannot send. It closes rows.
func ScanStructs(rows pgx.Rows, dest any, limit int) error {
	return sqlx.StructScan(&sqlxRows{rows: rows, limit: limit}, dest)
}

// sqlxRows lets sqlx scan pgx rows; limit > 0 stops after that many.
type sqlxRows struct {
	rows        pgx.Rows
	limit, seen int
}

func (r *sqlxRows) Close() error {
	r.rows.Close()
	return r.rows.Err()
}

func (r *sqlxRows) Columns() ([]string, error) {
	fds := r.rows.FieldDescriptions()
	cols := make([]string, len(fds))
	for i, fd := range fds {
		cols[i] = fd.Name
	}
	return cols, nil
}

func (r *sqlxRows) Err() error { return r.rows.Err() }

func (r *sqlxRows) Next() bool {
	if r.limit > 0 {
		if r.seen >= r.limit {
			return false
		}
		r.seen++
	}
	return r.rows.Next()
}

func (r *sqlxRows) Scan(dest ...any) error { return r.rows.Scan(dest...) }
