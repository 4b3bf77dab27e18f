package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
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
	f, err := h.runFairness(ctx, 40, []int{10, 40})
	require.NoError(t, err)
	require.Equal(t, FairnessRevisions, f.Revisions)
	require.Equal(t, FairnessPoolConns/2, f.OwnerShare)
	require.Equal(t, httpapi.DefaultOwnerMaxReads(), f.OwnerReadSlots)
	require.Equal(t, "this", f.FloodProcess)
	require.Equal(t, "this", f.ProbeProcess)
	require.Less(t, f.FloodBytes, 2*FairnessPayloadBytes+64<<10, "one answer holds the latest revision, not %d", FairnessRevisions)
	require.Positive(t, f.AloneP99Ms)
	require.Len(t, f.Floods, 2)
	require.NotNil(t, f.Floor)
	require.Equal(t, FairnessFloor, f.Floor.Path)
	require.Equal(t, map[string]int{"200": 40}, f.Floor.Statuses)
	for i, fl := range f.Floods {
		require.Equal(t, []int{10, 40}[i], fl.InFlight)
		total := 0
		for _, n := range fl.Statuses {
			total += n
		}
		require.Equal(t, 40, total, "every GET of the flood is answered: %v", fl.Statuses)
		require.Positive(t, fl.Statuses["200"])
		require.Positive(t, fl.Samples)
		require.GreaterOrEqual(t, fl.LoadedMaxMs, fl.LoadedP99Ms)
		require.Positive(t, fl.AloneP99Ms, "each flood's own baseline, just before it")
		require.InDelta(t, fl.LoadedP99Ms/fl.AloneP99Ms, fl.Ratio, 1e-9)
	}
}

// The flood's child side reads its job and a release line from stdin and answers a ready line
// and its result, as `idemwork bench-flood` does for `idemwork bench`.
func TestAFloodChildParksReleasesAndReports(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- FloodMain(context.Background(), inR, outW); _ = outW.Close() }()
	lines := bufio.NewScanner(outR)
	_, err := fmt.Fprintf(inW, `{"url":%q,"token":"tok","n":30,"inFlight":7}`+"\n", srv.URL)
	require.NoError(t, err)
	require.True(t, lines.Scan())
	require.JSONEq(t, `{"ready":true}`, lines.Text())
	_, err = fmt.Fprintln(inW, "go")
	require.NoError(t, err)
	require.True(t, lines.Scan())
	var res FloodResult
	require.NoError(t, json.Unmarshal(lines.Bytes(), &res))
	require.Equal(t, map[string]int{"200": 30}, res.Statuses)
	require.NoError(t, <-done)
}

// The other owner's side runs in a child as well (the same bench-flood, with probe set): it
// answers ready, then times N GETs on "N", GETs until the next line on "run", and says when an
// answer is not 200.
func TestAProbeChildTimesCountsAndRunsAndReportsARefusal(t *testing.T) {
	t.Parallel()
	var refuse atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse.Load() || r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := floodRunner{}.probe(ctx, FloodJob{URL: srv.URL, Token: "tok"})
	require.NoError(t, err)
	defer p.close()
	got, err := p.count(7)
	require.NoError(t, err)
	require.Len(t, got, 7)
	require.NoError(t, p.send("run"))
	require.NoError(t, p.send("stop"))
	got, err = p.result()
	require.NoError(t, err)
	require.NotEmpty(t, got, "a run takes at least one sample")
	refuse.Store(true)
	_, err = p.count(3)
	require.ErrorContains(t, err, "answered 503")
}
