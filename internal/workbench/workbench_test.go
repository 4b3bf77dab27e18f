package workbench_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/workbench"
	"github.com/idemwork/idemwork/views"
)

// The views show what Coded makes of a database's error: its code and what to do, an
// unreachable database marked as such (views word it), a cancelled context left recognisable,
// and no driver text.
func TestCodedErrorsAreWhatTheViewsShow(t *testing.T) {
	t.Parallel()
	require.NoError(t, workbench.Coded(nil))

	for _, err := range []error{io.ErrUnexpectedEOF, &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}} {
		got := workbench.Coded(fmt.Errorf("read keys: %w", err))
		require.Equal(t, apperr.DatabaseUnavailable, apperr.CodeOf(got))
		require.True(t, views.IsUnreachable(got), "%v reads as an unreachable database", err)
	}

	timeout := workbench.Coded(&pgconn.PgError{Code: "57014", Message: "canceling statement due to statement timeout"})
	require.Equal(t, apperr.DatabaseUnavailable, apperr.CodeOf(timeout))
	require.False(t, views.IsUnreachable(timeout), "a statement that timed out ran on a reachable database")
	require.Contains(t, timeout.Error(), "statement_timeout")

	raw := workbench.Coded(fmt.Errorf("read records: %w", &pgconn.PgError{Code: "42703", Message: `column "secret" does not exist`}))
	require.Equal(t, apperr.Internal, apperr.CodeOf(raw))
	require.Contains(t, raw.Error(), "internal error in read records (SQLSTATE 42703)")
	require.NotContains(t, raw.Error(), "secret")

	refused := apperr.New(apperr.RecordNotFound, "owner alice has no record X")
	require.Same(t, refused, workbench.Coded(refused), "a coded error passes as it is")

	require.True(t, errors.Is(workbench.Coded(context.Canceled), context.Canceled), "a stop stays a stop")
}
