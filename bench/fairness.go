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
	"time"

	"github.com/idemwork/idemwork/httpapi"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/storm"
)

// The fairness cell (issue 28): one owner floods the HTTP API with reads of a record with a long
// history while another owner reads its own record; the other owner's p99 under the flood,
// divided by its p99 alone, says how much one owner's reads take from another's. The flood runs
// twice: 2,000 GETs with 100 in flight (what the issue saw: alice's p50 went from 4.3 ms to
// 1,253 ms), and all 2,000 in flight at once.
const (
	FairnessRevisions    = 60
	FairnessPayloadBytes = 60 << 10 // each revision's payload: the size the issue saw (3.79 MB for 61)
	FairnessFlood        = 2000     // the flooding owner's GETs
	FairnessProbes       = 1000     // the other owner's GETs alone, one after another
	FairnessPoolConns    = 64       // idemwork's pool on the embedded cluster (database.max_conns = 0)
	// FairnessTarget is issue 28's goal: the other owner's p99 within 5× its unloaded p99.
	FairnessTarget = 5.0
)

// FairnessInFlight are the flood's shapes: how many of its GETs are in flight at once.
var FairnessInFlight = []int{100, FairnessFlood}

// FairnessFloor is the shape of the floor: as many GETs of /healthz (no owner, no database, no
// body to speak of) all in flight at once, which bounds from below what any burst of that many
// connections costs the other owner on this machine.
const FairnessFloor = "healthz"

// FairnessReport is the fairness cell.
type FairnessReport struct {
	Revisions    int `json:"revisions"`
	PayloadBytes int `json:"payloadBytes"`
	// FloodBytes is the size of one answer to the flooding owner.
	FloodBytes int `json:"floodBytes"`
	PoolConns  int `json:"poolConns"`
	// OwnerShare is the connections one owner's requests may hold (idempotency.owner_max_conns).
	OwnerShare int `json:"ownerShare"`
	// OwnerReadSlots is how many of one owner's reads run at once (http.owner_max_reads: the
	// server's default, half its CPUs).
	OwnerReadSlots int `json:"ownerReadSlots"`
	// FloodProcess says where the flood's client ran: "child" (a process of its own, as a real
	// client is) or "this" (the server's process: tests).
	FloodProcess string `json:"floodProcess"`
	// FloodNice is the nice value the flood's child ran at (FloodNice: it stands in for clients
	// on other machines, whose CPU is not the server's); 0 when it ran in this process.
	FloodNice int `json:"floodNice"`
	// FloodPolicy is the scheduling policy the flood's child ran at (FloodPolicy, "idle": it
	// runs only on a CPU nothing else wants); "" when it ran in this process.
	FloodPolicy string `json:"floodPolicy"`
	// ProbeProcess says the same of the other owner's client, alone and under the flood alike: in
	// the server's process its GETs would queue behind the server's goroutines for its own
	// client's work too, and measure that.
	ProbeProcess string `json:"probeProcess"`
	// AloneP50Ms and AloneP99Ms are the other owner's GET latencies with nothing else running,
	// before the first flood (each flood's ratio divides by its own, measured just before it).
	AloneP50Ms float64 `json:"aloneP50Ms"`
	AloneP99Ms float64 `json:"aloneP99Ms"`
	// Floods are the flood's shapes, each with the other owner's latencies meanwhile.
	Floods []FairnessFloodReport `json:"floods"`
	// Floor is the same number of GETs of /healthz, all in flight at once (FairnessFloor): what
	// the burst of connections alone costs, whoever sends it.
	Floor  *FairnessFloodReport `json:"floor"`
	Target float64              `json:"target"`
	// Met is true when every shape's ratio is within Target.
	Met bool `json:"met"`
}

// FairnessFloodReport is one shape of the flood.
type FairnessFloodReport struct {
	// Path is what the flood GETs: the flooding owner's record, or /healthz for the floor.
	Path     string `json:"path"`
	Requests int    `json:"requests"`
	InFlight int    `json:"inFlight"`
	// LoadedP50Ms, LoadedP99Ms and LoadedMaxMs are the other owner's GETs while the flood ran
	// (Samples of them, one after another).
	LoadedP50Ms float64 `json:"loadedP50Ms"`
	LoadedP99Ms float64 `json:"loadedP99Ms"`
	LoadedMaxMs float64 `json:"loadedMaxMs"`
	Samples     int     `json:"samples"`
	// AloneP99Ms is the other owner's p99 alone (FairnessProbes GETs) just before this flood: on
	// a shared machine the noise drifts, and a baseline taken a minute earlier measures the drift.
	AloneP99Ms float64 `json:"aloneP99Ms"`
	// Ratio is LoadedP99Ms ÷ AloneP99Ms.
	Ratio float64 `json:"ratio"`
	Met   bool    `json:"met"`
	// FloodMs is how long the flood took; Statuses counts its answers by status.
	FloodMs  float64        `json:"floodMs"`
	Statuses map[string]int `json:"statuses"`
}

// runFairness measures the fairness cell over the HTTP API serve runs (env.Serve), with floods of
// flood GETs in each of the shapes.
func (h *harness) runFairness(ctx context.Context, flood int, shapes []int) (*FairnessReport, error) {
	if h.env.Serve == nil {
		return nil, errors.New("bench: the fairness cell serves the HTTP API, and its host gave it no server (Env.Serve)")
	}
	db, err := store.Open(ctx, h.dsn, store.Options{MaxConns: FairnessPoolConns})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	k := kernel.New(db, kernel.NewRegistry(kernel.NewRules(h.memMax)), kernel.Options{})
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
	client := &http.Client{Timeout: time.Minute}
	defer client.CloseIdleConnections()
	get := func(owner, id string) (int, int, error) {
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
	runner := floodRunner{exe: h.env.Executable, args: h.env.FloodArgs}
	rep := &FairnessReport{Revisions: FairnessRevisions, PayloadBytes: FairnessPayloadBytes, PoolConns: FairnessPoolConns,
		OwnerShare: k.Runner().OwnerMaxConns(), OwnerReadSlots: httpapi.DefaultOwnerMaxReads(), FloodProcess: "this", ProbeProcess: "this", Target: FairnessTarget, Floods: []FairnessFloodReport{}, Met: true}
	if len(runner.args) > 0 {
		rep.FloodProcess, rep.ProbeProcess, rep.FloodNice, rep.FloodPolicy = "child", "child", FloodNice, FloodPolicy
	}
	probe, err := runner.probe(ctx, FloodJob{URL: base + otherID, Token: "bench-token-" + other})
	if err != nil {
		return nil, err
	}
	defer probe.close()
	// Warm both owners' paths (statement caches, connections, the flooder's record pages).
	if _, err := probe.count(20); err != nil {
		return nil, err
	}
	for range 20 {
		status, n, err := get(flooder, floodID)
		if err != nil || status != http.StatusOK {
			return nil, fmt.Errorf("bench: fairness: the flooding owner's GET: %d %v", status, err)
		}
		rep.FloodBytes = n
	}
	alone, err := probe.count(FairnessProbes)
	if err != nil {
		return nil, err
	}
	rep.AloneP50Ms, rep.AloneP99Ms = percentileMs(alone, 50), percentileMs(alone, 99)

	measure := func(job FloodJob, path string) (FairnessFloodReport, error) {
		before, err := probe.count(FairnessProbes)
		if err != nil {
			return FairnessFloodReport{}, err
		}
		release, result, err := runner.start(ctx, job)
		if err != nil {
			return FairnessFloodReport{}, err
		}
		release()
		if err := probe.send("run"); err != nil {
			return FairnessFloodReport{}, err
		}
		res := <-result
		if err := probe.send("stop"); err != nil {
			return FairnessFloodReport{}, err
		}
		loaded, err := probe.result()
		if err != nil {
			return FairnessFloodReport{}, err
		}
		if len(loaded) == 0 {
			return FairnessFloodReport{}, errors.New("bench: fairness: the other owner's probe took no sample during the flood")
		}
		f := FairnessFloodReport{Path: path, Requests: job.N, InFlight: min(job.InFlight, job.N), Samples: len(loaded), FloodMs: res.WallMs,
			Statuses: res.Statuses, LoadedP50Ms: percentileMs(loaded, 50), LoadedP99Ms: percentileMs(loaded, 99), LoadedMaxMs: ms(slices.Max(loaded))}
		if f.AloneP99Ms = percentileMs(before, 99); f.AloneP99Ms > 0 {
			f.Ratio = f.LoadedP99Ms / f.AloneP99Ms
		}
		f.Met = f.Ratio > 0 && f.Ratio <= FairnessTarget
		return f, nil
	}
	for _, inFlight := range shapes {
		f, err := measure(FloodJob{URL: base + floodID, Token: "bench-token-" + flooder, N: flood, InFlight: inFlight}, "record")
		if err != nil {
			return nil, err
		}
		rep.Met = rep.Met && f.Met
		rep.Floods = append(rep.Floods, f)
	}
	root := strings.TrimSuffix(base, "/v1/modules/"+kernel.ModuleNote+"/records/")
	floor, err := measure(FloodJob{URL: root + "/healthz", N: flood, InFlight: flood}, FairnessFloor)
	if err != nil {
		return nil, err
	}
	rep.Floor = &floor
	return rep, nil
}

// longHistory creates a NOTE record of owner with revisions revisions, each with a payload of
// about size bytes, and returns its id.
func longHistory(ctx context.Context, k *kernel.Kernel, owner string, revisions, size int) (string, error) {
	blob := strings.Repeat("x", size)
	c, err := k.Create(ctx, model.CreateInput{Owner: owner, Module: kernel.ModuleNote, Title: "fairness", Payload: []byte(`{"blob":"` + blob + `"}`)})
	if err != nil {
		return "", fmt.Errorf("bench: fairness: create: %w", err)
	}
	for rev := 1; rev < revisions; rev++ {
		if _, err := k.Patch(ctx, model.PatchInput{Owner: owner, Module: kernel.ModuleNote, RecordID: c.Record.ID, ExpectRevision: rev,
			Payload: []byte(fmt.Sprintf(`{"blob":"%s","rev":%d}`, blob, rev+1))}); err != nil {
			return "", fmt.Errorf("bench: fairness: patch: %w", err)
		}
	}
	return c.Record.ID, nil
}
