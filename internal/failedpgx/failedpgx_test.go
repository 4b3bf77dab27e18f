package failedpgx_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/failedpgx"
)

// Code written against pgx closes the rows whatever Query answered, and reads why from Err:
// failed rows allow both, iterate nothing and fail every read with the cause.
func TestFailedRowsCloseIterateNothingAndSayWhy(t *testing.T) {
	cause := errors.New("no database connection became free")
	rows := failedpgx.Rows(cause)
	require.NotPanics(t, rows.Close)
	require.False(t, rows.Next())
	require.ErrorIs(t, rows.Err(), cause)
	var n int
	require.ErrorIs(t, rows.Scan(&n), cause)
	_, err := rows.Values()
	require.ErrorIs(t, err, cause)
	_, err = pgx.CollectRows(rows, pgx.RowTo[int])
	require.ErrorIs(t, err, cause, "pgx's own helpers see the cause")
}
