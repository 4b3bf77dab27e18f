package stormrows

import (
	"context"
	"fmt"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/store"
)

// CountServiceRows runs a count of a service's own rows (a storm's --count-sql: "one row =
// executed once") inside a read-only snapshot: whatever the text says, the server refuses to
// write. It must return one row of one integer.
func CountServiceRows(ctx context.Context, db *store.DB, sql string, args ...any) (int64, error) {
	var n int64
	err := db.ReadSnapshot(ctx, func(ctx context.Context) error {
		rows, err := db.Q(ctx).Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		if len(rows.FieldDescriptions()) != 1 {
			return apperr.New(apperr.Usage, "--count-sql must return one column (a count), not %d", len(rows.FieldDescriptions()))
		}
		got := 0
		for rows.Next() {
			got++
			if got == 1 {
				if err := rows.Scan(&n); err != nil {
					return apperr.New(apperr.Usage, "--count-sql must return an integer (a count): %v", err)
				}
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if got != 1 {
			return apperr.New(apperr.Usage, "--count-sql must return exactly one row (a count), not %d", got)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("count the service's rows: %w", err)
	}
	return n, nil
}
