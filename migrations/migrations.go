// Package migrations holds idemwork's schema as goose SQL files embedded in the binary and
// applies them with goose's Provider API under a PostgreSQL session lock, so concurrent
// processes starting on one database migrate it exactly once.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// Status is one migration's state.
type Status struct {
	Version int64  `json:"version"`
	Name    string `json:"name"`
	Applied bool   `json:"applied"`
}

func provider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(goose.DialectPostgres, db, files, goose.WithSessionLocker(locker))
}

// Up applies every pending migration and returns how many ran.
func Up(ctx context.Context, db *sql.DB) (int, error) {
	p, err := provider(db)
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	res, err := p.Up(ctx)
	if err != nil {
		return len(res), fmt.Errorf("migrations: %w", err)
	}
	return len(res), nil
}

// Pending reports whether the database lacks any migration. It only reads.
func Pending(ctx context.Context, db *sql.DB) (bool, error) {
	p, err := goose.NewProvider(goose.DialectPostgres, db, files)
	if err != nil {
		return false, fmt.Errorf("migrations: %w", err)
	}
	has, err := p.HasPending(ctx)
	if err != nil {
		return false, fmt.Errorf("migrations: %w", err)
	}
	return has, nil
}

// List returns the state of every migration this binary knows.
func List(ctx context.Context, db *sql.DB) ([]Status, error) {
	p, err := goose.NewProvider(goose.DialectPostgres, db, files)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	sts, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	out := make([]Status, 0, len(sts))
	for _, s := range sts {
		out = append(out, Status{Version: s.Source.Version, Name: s.Source.Path, Applied: s.State == goose.StateApplied})
	}
	return out, nil
}
