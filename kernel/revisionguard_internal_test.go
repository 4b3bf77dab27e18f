package kernel

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
)

// The guard of a queued update reads, to errors.As and errors.Is, as the REVISION_CONFLICT it
// stands for — the same code and message — though it is formatted only when read.
func TestARevisionGuardReadsAsItsRevisionConflict(t *testing.T) {
	t.Parallel()
	want := revisionConflict("rec-1", 3)
	var guard error = &idem.StepError{Step: StepRecord, Err: &revisionConflictGuard{"rec-1", 3}}
	require.Equal(t, apperr.RevisionConflict, apperr.CodeOf(guard))
	require.Equal(t, want, apperr.As(guard))
	require.ErrorIs(t, guard, want)
	require.Contains(t, guard.Error(), want.Error())
}
