package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/storm"
)

// The fairness cell (issue 28): one owner floods the HTTP API with reads of a record with a long
// history while another owner reads its own record; the other owner's p99 under the flood,
// divided by its p99 alone, says how much one owner's reads take from another's.
const (
	FairnessRevisions    = 60
	FairnessPayloadBytes = 60 << 10 // each revision's payload: the size the issue saw (3.79 MB for 61)
	FairnessFlood        = 2000     // the flooding owner's GETs, all in flight at once
	FairnessProbes       = 200      // the other owner's GETs alone, one after another
	FairnessPoolConns    = 64       // idemwork's pool on the embedded cluster (database.max_conns = 0)
	// FairnessTarget is issue 28's goal: the other owner's p99 within 5× its unloaded p99.
	FairnessTarget = 5.0
)

// FairnessReport is the fairness cell.
type FairnessReport struct {
	Revisions    int `json:"revisions"`
	PayloadBytes int `json:"payloadBytes"`
	// Flood is how many GETs the flooding owner sent, all at once, each on its own connection.
	Flood     int `json:"flood"`
	PoolConns int `json:"poolConns"`
	// OwnerShare is the connections one owner's requests may hold (idempotency.owner_max_conns).
	OwnerShare int `json:"ownerShare"`
	// AloneP50Ms and AloneP99Ms are the other owner's GET latencies with nothing else running.
	AloneP50Ms float64 `json:"aloneP50Ms"`
	AloneP99Ms float64 `json:"aloneP99Ms"`
	// LoadedP50Ms, LoadedP99Ms and LoadedMaxMs are its GETs while the flood runs (Samples of them).
	LoadedP50Ms float64 `json:"loadedP50Ms"`
	LoadedP99Ms float64 `json:"loadedP99Ms"`
	LoadedMaxMs float64 `json:"loadedMaxMs"`
	Samples     int     `json:"samples"`
	// Ratio is LoadedP99Ms ÷ AloneP99Ms; Met says whether it is within FairnessTarget.
	Ratio  float64 `json:"ratio"`
	Target float64 `json:"target"`
	Met    bool    `json:"met"`
	// FloodMs is how long the flood took; FloodStatuses counts its answers by status.
	FloodMs       float64        `json:"floodMs"`
	FloodStatuses map[string]int `json:"floodStatuses"`
	// FloodBytes is the size of one answer to the flooding owner.
	FloodBytes int `json:"floodBytes"`
}

// runFairness measures the fairness cell over the HTTP API serve runs (env.Serve), with flood
// GETs (FairnessFlood in a run).
func (h *harness) runFairness(ctx context.Context, flood int) (*FairnessReport, error) {
	if h.env.Serve == nil {
		return nil, errors.New("bench: the fairness cell serves the HTTP API, and its host gave it no server (Env.Serve)")
	}
	db, err := store.Open(ctx, h.dsn, store.Options{MaxConns: FairnessPoolConns})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	k := kernel.New(idem.NewRunner(db, idem.Options{}), kernel.NewRegistry(kernel.NewRules(h.memMax)), kernel.Options{})
	const flooder, other = "bench-fair-bob", "bench-fair-alice"
	tokens := map[string]string{"bench-token-" + flooder: flooder, "bench-token-" + other: other}

	floodID, err := longHistory(ctx, k, flooder, FairnessRevisions, FairnessPayloadBytes)
	if err != nil {
		return nil, err
	}
	otherID, err := longHistory(ctx, k, other, 1, 200)
	if err != nil {
		return nil, err
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: fairness: listen: %w", err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- h.env.Serve(sctx, k, ln, storm.ServeOptions{Tokens: tokens}) }()
	defer func() {
		stop()
		<-served
	}()
	base := "http://" + ln.Addr().String() + "/v1/modules/" + kernel.ModuleNote + "/records/"
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: flood + 8, MaxIdleConns: flood + 8}}
	defer client.CloseIdleConnections()
	get := func(ctx context.Context, owner, id string) (int, int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+id, nil)
		if err != nil {
			return 0, 0, err
		}
		req.Header.Set("Authorization", "Bearer bench-token-"+owner)
		resp, err := client.Do(req)
		if err != nil {
			return 0, 0, err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, int(n), err
	}
	probe := func() (time.Duration, error) {
		t0 := time.Now()
		status, _, err := get(ctx, other, otherID)
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("bench: fairness: the other owner's GET answered %d", status)
		}
		return time.Since(t0), err
	}

	rep := &FairnessReport{Revisions: FairnessRevisions, PayloadBytes: FairnessPayloadBytes, Flood: flood,
		PoolConns: FairnessPoolConns, OwnerShare: k.Runner().Admission().OwnerMaxConns(), Target: FairnessTarget,
		FloodStatuses: map[string]int{}}
	// Warm both owners' paths (statement caches, connections, the flooder's record pages).
	for range 20 {
		if _, err := probe(); err != nil {
			return nil, err
		}
		status, n, err := get(ctx, flooder, floodID)
		if err != nil || status != http.StatusOK {
			return nil, fmt.Errorf("bench: fairness: the flooding owner's GET: %d %v", status, err)
		}
		rep.FloodBytes = n
	}
	alone := make([]time.Duration, 0, FairnessProbes)
	for range FairnessProbes {
		d, err := probe()
		if err != nil {
			return nil, err
		}
		alone = append(alone, d)
	}

	// The flood: every GET on its own connection, opened first and released at once.
	var (
		mu      sync.Mutex
		ready   sync.WaitGroup
		flooded sync.WaitGroup
	)
	release := make(chan struct{})
	ready.Add(flood)
	for range flood {
		flooded.Go(func() {
			ready.Done()
			<-release
			status, _, err := get(ctx, flooder, floodID)
			key := fmt.Sprint(status)
			if err != nil {
				key = "error"
			}
			mu.Lock()
			rep.FloodStatuses[key]++
			mu.Unlock()
		})
	}
	ready.Wait()
	floodDone := make(chan struct{})
	started := time.Now()
	close(release)
	go func() {
		flooded.Wait()
		close(floodDone)
	}()
	var loaded []time.Duration
	for {
		select {
		case <-floodDone:
		default:
			d, err := probe()
			if err != nil {
				return nil, err
			}
			loaded = append(loaded, d)
			continue
		}
		break
	}
	rep.FloodMs = ms(time.Since(started))

	rep.AloneP50Ms, rep.AloneP99Ms = percentileMs(alone, 50), percentileMs(alone, 99)
	rep.LoadedP50Ms, rep.LoadedP99Ms, rep.LoadedMaxMs = percentileMs(loaded, 50), percentileMs(loaded, 99), ms(slices.Max(loaded))
	rep.Samples = len(loaded)
	if rep.AloneP99Ms > 0 {
		rep.Ratio = rep.LoadedP99Ms / rep.AloneP99Ms
	}
	rep.Met = rep.Ratio > 0 && rep.Ratio <= FairnessTarget
	return rep, nil
}

// longHistory creates a NOTE record of owner with revisions revisions, each with a payload of
// about size bytes, and returns its id.
func longHistory(ctx context.Context, k *kernel.Kernel, owner string, revisions, size int) (string, error) {
	blob := strings.Repeat("x", size)
	c, err := k.Create(ctx, kernel.CreateInput{Owner: owner, Module: kernel.ModuleNote, Title: "fairness", Payload: []byte(`{"blob":"` + blob + `"}`)})
	if err != nil {
		return "", fmt.Errorf("bench: fairness: create: %w", err)
	}
	for rev := 1; rev < revisions; rev++ {
		if _, err := k.Patch(ctx, kernel.PatchInput{Owner: owner, Module: kernel.ModuleNote, RecordID: c.Record.ID, ExpectRevision: rev,
			Payload: []byte(fmt.Sprintf(`{"blob":"%s","rev":%d}`, blob, rev+1))}); err != nil {
			return "", fmt.Errorf("bench: fairness: patch: %w", err)
		}
	}
	return c.Record.ID, nil
}
