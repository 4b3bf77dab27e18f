package apperr_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
)

// An error of no known cause is INTERNAL; what a user is shown names the steps this program
// named on the way up and the SQLSTATE, and where the cause is — never the driver's or the
// server's text, which may quote SQL, values or a connection string.
func TestAnUnknownErrorShowsItsStepAndSQLStateNeverTheDriversText(t *testing.T) {
	t.Parallel()
	pg := &pgconn.PgError{Severity: "ERROR", Code: "22012", Message: "division by zero", Detail: "secret value 42"}
	err := fmt.Errorf("restore record-snapshot-reference-v2: %w", fmt.Errorf("read key: %w", pg))
	ae := apperr.As(err)
	require.Equal(t, apperr.Internal, ae.Code)
	require.Equal(t, 500, ae.Status())
	require.Equal(t, "internal error in restore record-snapshot-reference-v2: read key (SQLSTATE 22012); "+
		"the cause is in the server log (IDEMWORK_DEBUG=1 prints it for a CLI command)", ae.Message)
	require.ErrorIs(t, ae, pg, "the cause is kept for the log")

	// Another package's wrapper ends the walk: its text is not a step.
	wrapped := fmt.Errorf("begin: %w", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by 10.0.0.7")})
	require.Equal(t, "internal error in begin; the cause is in the server log (IDEMWORK_DEBUG=1 prints it for a CLI command)", apperr.As(wrapped).Message)
	plain := apperr.As(fmt.Errorf("read page: %w", io.ErrUnexpectedEOF))
	require.Equal(t, "internal error in read page; the cause is in the server log (IDEMWORK_DEBUG=1 prints it for a CLI command)", plain.Message)
	require.NotContains(t, apperr.As(errors.New("pq: password=hunter2")).Message, "hunter2")
}
