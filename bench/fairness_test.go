package bench

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/httpapi"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/storm"
)

// The fairness cell at a toy flood: it serves the HTTP API, floods one owner's record, probes the
// other owner's, and reports both latencies and their ratio. Its figure is make bench's, never a
// test's: the machine is shared.
func TestTheFairnessCellMeasuresTheOtherOwnersReadsUnderAFlood(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	serve := func(ctx context.Context, k *kernel.Kernel, ln net.Listener, o storm.ServeOptions) error {
		return httpapi.Serve(ctx, httpapi.NewServer(httpapi.New(k, httpapi.Options{Tokens: o.Tokens}), nil), ln, 5*time.Second)
	}
	h := &harness{env: Env{Serve: serve}, dsn: db.DSN, memMax: DefaultMemMaxContentLength}
	f, err := h.runFairness(ctx, 40)
	require.NoError(t, err)
	require.Equal(t, 40, f.Flood)
	require.Equal(t, FairnessRevisions, f.Revisions)
	require.Equal(t, FairnessPoolConns/2, f.OwnerShare)
	total := 0
	for _, n := range f.FloodStatuses {
		total += n
	}
	require.Equal(t, 40, total, "every GET of the flood is answered: %v", f.FloodStatuses)
	require.Positive(t, f.FloodStatuses["200"])
	require.Less(t, f.FloodBytes, 2*FairnessPayloadBytes+64<<10, "one answer holds the latest revision, not %d", FairnessRevisions)
	require.Positive(t, f.AloneP99Ms)
	require.Positive(t, f.Samples)
	require.GreaterOrEqual(t, f.LoadedMaxMs, f.LoadedP99Ms)
	require.InDelta(t, f.LoadedP99Ms/f.AloneP99Ms, f.Ratio, 1e-9)
}
