package tuitest_test

import (
	"context"
	"github.com/idemwork/idemwork/inspect"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/stretchr/testify/require"
	"testing"
)

func TestMain(m *testing.M) { testdb.Main(m) }
func TestTheFixedDataRestoresThroughTheKernel(t *testing.T) {
	b := tuitest.New(t)
	tuitest.SeedFixed(t, b)
	v, err := inspect.Key(context.Background(), b.Kernel, "alice", "fixed-create")
	require.NoError(t, err)
	require.Nil(t, v.RestoreError, "%+v", v.RestoreError)
	require.Equal(t, 1, v.Restored.Record.Revision)
	require.Equal(t, 2, v.Latest.Record.Revision)
	v, err = inspect.Key(context.Background(), b.Kernel, "alice", "fixed-publish")
	require.NoError(t, err)
	require.Nil(t, v.RestoreError, "%+v", v.RestoreError)
	require.Equal(t, "BLOCKED", v.Restored.Execution.Status)
}
