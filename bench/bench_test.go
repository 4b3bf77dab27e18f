package bench

// Micro-benchmarks: `go test -run '^$' -bench . -benchmem ./bench/...`. They run on the test
// cluster (fsync off), so they isolate what the runner adds in CPU, allocations and round trips;
// `idemwork bench` measures the same workloads on a durable cluster with many clients.

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/storm"
)

// TestMain serves the tests and benchmarks and, re-executed by the multi-process storm, the
// storm's worker.
func TestMain(m *testing.M) {
	if os.Getenv(storm.WorkerEnvVar) == "1" {
		if err := storm.WorkerMain(context.Background(), os.Stdin, os.Stdout, storm.WorkerSession{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	testdb.Main(m)
}

// benchTarget is a fresh database with the fixtures of every workload: n records per side for
// feature runs and replay keys.
func benchTarget(b *testing.B, records int) *target {
	b.Helper()
	db := testdb.New(b)
	t, err := newTarget(db.DB, db.Pool, newFixtures(), DefaultMemMaxContentLength)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := t.provisionReplayKeys(ctx, 64, 4); err != nil {
		b.Fatal(err)
	}
	if err := t.fx.runnerRecords.ensure(ctx, t.pool, records); err != nil {
		b.Fatal(err)
	}
	if err := t.fx.rawRecords.ensure(ctx, t.pool, records); err != nil {
		b.Fatal(err)
	}
	return t
}

const warmOps = 20

// runOp times o alone, after a warm-up that fills the statement cache.
func runOp(b *testing.B, o op) {
	ctx := context.Background()
	w := &worker{clients: 1, keyBuf: make([]byte, 0, 64)}
	for range warmOps {
		if err := o(ctx, w); err != nil {
			b.Fatal(err)
		}
		w.seq++
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for range b.N {
		if err := o(ctx, w); err != nil {
			b.Fatal(err)
		}
		w.seq++
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time this process has used (user and system): around ops, the client's
// own work per op — Go and the driver's system calls, not the server's — which a busy machine
// disturbs far less than the wall clock.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runRatio alternates runner and raw ops (runner first on even iterations) and reports each
// side's time per op and ratio = runner ops/s ÷ raw ops/s, the number `idemwork bench` reports.
func runRatio(b *testing.B, runner, raw op) { runAgainst(b, runner, raw, "raw", "ratio") }

// runAgainst is runRatio against another side, named other, its quotient named quotient (the
// limit's is the efficiency).
func runAgainst(b *testing.B, runner, raw op, other, quotient string) {
	ctx := context.Background()
	wr := &worker{clients: 1, keyBuf: make([]byte, 0, 64)}
	ww := &worker{clients: 1, keyBuf: make([]byte, 0, 64)}
	for range warmOps {
		if err := runner(ctx, wr); err != nil {
			b.Fatal(err)
		}
		if err := raw(ctx, ww); err != nil {
			b.Fatal(err)
		}
		wr.seq++
		ww.seq++
	}
	var tRunner, tRaw, cpuRunner, cpuRaw time.Duration
	timed := func(o op, w *worker, acc, cpu *time.Duration) {
		c0, t0 := processCPU(b), time.Now()
		if err := o(ctx, w); err != nil {
			b.Fatal(err)
		}
		*acc += time.Since(t0)
		*cpu += processCPU(b) - c0
		w.seq++
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			timed(runner, wr, &tRunner, &cpuRunner)
			timed(raw, ww, &tRaw, &cpuRaw)
		} else {
			timed(raw, ww, &tRaw, &cpuRaw)
			timed(runner, wr, &tRunner, &cpuRunner)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(tRunner.Nanoseconds())/float64(b.N), "runner-ns/op")
	b.ReportMetric(float64(tRaw.Nanoseconds())/float64(b.N), other+"-ns/op")
	b.ReportMetric(float64(cpuRunner.Nanoseconds())/float64(b.N), "runner-cpu-ns/op")
	b.ReportMetric(float64(cpuRaw.Nanoseconds())/float64(b.N), other+"-cpu-ns/op")
	if tRunner > 0 {
		b.ReportMetric(float64(tRaw)/float64(tRunner), quotient)
	}
}

func BenchmarkRunnerFreshKey(b *testing.B) { t := benchTarget(b, 0); runOp(b, t.runnerFreshKey) }
func BenchmarkRawFreshKey(b *testing.B)    { t := benchTarget(b, 0); runOp(b, t.rawFreshKey) }
func BenchmarkFreshKeyRatio(b *testing.B) {
	t := benchTarget(b, 0)
	runRatio(b, t.runnerFreshKey, t.rawFreshKey)
}

func BenchmarkRunnerFeatureRun(b *testing.B) {
	t := benchTarget(b, b.N+warmOps)
	runOp(b, t.runnerFeatureRun)
}

func BenchmarkRawFeatureRun(b *testing.B) {
	t := benchTarget(b, b.N+warmOps)
	runOp(b, t.rawFeatureRun)
}

func BenchmarkFeatureRunRatio(b *testing.B) {
	t := benchTarget(b, b.N+warmOps)
	runRatio(b, t.runnerFeatureRun, t.rawFeatureRun)
}

// limitTarget is benchTarget with the limit side's statements learned from a traced runner (as
// `idemwork bench` learns them) and records records per side.
func limitTarget(b *testing.B, records int) *target {
	b.Helper()
	db := testdb.New(b)
	ctx := context.Background()
	tr := &rtTracer{}
	sdb, err := store.Open(ctx, db.DSN, store.Options{MaxConns: 1, Tracer: tr})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sdb.Close)
	fx := newFixtures()
	learner, err := newTarget(sdb, db.Pool, fx, DefaultMemMaxContentLength)
	if err != nil {
		b.Fatal(err)
	}
	if err := learner.learnPlans(ctx, tr); err != nil {
		b.Fatal(err)
	}
	t, err := newTarget(db.DB, db.Pool, fx, DefaultMemMaxContentLength)
	if err != nil {
		b.Fatal(err)
	}
	for _, side := range allSides {
		if err := fx.records(side).ensure(ctx, t.pool, records); err != nil {
			b.Fatal(err)
		}
	}
	return t
}

// The limit side (the runner's statements in one round trip, computed once where they do not
// vary) and the runner against it: what the runner's Go work and its one round trip more cost.

func BenchmarkLimitFreshKey(b *testing.B) { t := limitTarget(b, 0); runOp(b, t.limitFreshKey) }
func BenchmarkFreshKeyEfficiency(b *testing.B) {
	t := limitTarget(b, 0)
	runAgainst(b, t.runnerFreshKey, t.limitFreshKey, "limit", "efficiency")
}

func BenchmarkLimitFeatureRun(b *testing.B) {
	t := limitTarget(b, b.N+warmOps)
	runOp(b, t.limitFeatureRun)
}

func BenchmarkFeatureRunEfficiency(b *testing.B) {
	t := limitTarget(b, b.N+warmOps)
	runAgainst(b, t.runnerFeatureRun, t.limitFeatureRun, "limit", "efficiency")
}

func BenchmarkRunnerReplayHit(b *testing.B) { t := benchTarget(b, 0); runOp(b, t.runnerReplayHit) }
func BenchmarkRawReplayHit(b *testing.B)    { t := benchTarget(b, 0); runOp(b, t.rawReplayHit) }
func BenchmarkReplayHitRatio(b *testing.B) {
	t := benchTarget(b, 0)
	runRatio(b, t.runnerReplayHit, t.rawReplayHit)
}

// BenchmarkLimitReplayHit is the replay's limit alone: the runner's statement in BEGIN … COMMIT,
// its row decoded and nothing checked. Its allocs/op and cpu-ns/op against
// BenchmarkRunnerReplayHit's are what the runner's checks and bookkeeping add to a replay.
func BenchmarkLimitReplayHit(b *testing.B) {
	t := limitTarget(b, 0)
	if err := t.provisionReplayKeys(context.Background(), 64, 4); err != nil {
		b.Fatal(err)
	}
	runOp(b, t.limitReplayHit)
}

func BenchmarkReplayHitEfficiency(b *testing.B) {
	t := limitTarget(b, 0)
	if err := t.provisionReplayKeys(context.Background(), 64, 4); err != nil {
		b.Fatal(err)
	}
	runAgainst(b, t.runnerReplayHit, t.limitReplayHit, "limit", "efficiency")
}

// The runner's CPU-only steps on every keyed request, without a database: what a follower of an
// in-process flight pays before it joins, and what a replay pays besides its reads.

func BenchmarkFingerprint(b *testing.B) {
	body := []byte(`{"title": "bench note", "payload": {"tags": ["home", "todo"], "text": "call the plumber about the kitchen tap", "priority": 2}}`)
	b.ReportAllocs()
	for b.Loop() {
		_ = idem.Fingerprint(model.OpCreate(kernel.ModuleNote), body)
	}
}

func BenchmarkBuildEnvelope(b *testing.B) {
	result := []byte(`{"recordId":"01JZ3W9Q8X4T6V2N1M0K7H5G3F","revision":2,"executionId":"01JZ3W9Q8X4T6V2N1M0K7H5G3G"}`)
	fields := []string{"recordId", "revision", "executionId"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := idem.BuildEnvelope(kernel.PolicyFeatureExecution, fields, result); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseEnvelope(b *testing.B) {
	env := []byte(`{"schemaVersion":1,"policy":"feature-execution-reference-v1","result":{"recordId":"01JZ3W9Q8X4T6V2N1M0K7H5G3F","revision":2,"executionId":"01JZ3W9Q8X4T6V2N1M0K7H5G3G"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := idemtype.ParseEnvelope(env); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalEnvelope(b *testing.B) {
	stored := []byte(`{"policy": "feature-execution-reference-v1", "result": {"recordId": "01JZ3W9Q8X4T6V2N1M0K7H5G3F", "revision": 2, "executionId": "01JZ3W9Q8X4T6V2N1M0K7H5G3G"}, "schemaVersion": 1}`)
	b.ReportAllocs()
	for b.Loop() {
		_ = idem.CanonicalEnvelope(stored)
	}
}

// BenchmarkInprocStormShared is the bench's 1,000-request shared storm on one key, one storm
// per op: release → last response, with the lone request it is compared with reported beside it.
func BenchmarkInprocStormShared(b *testing.B) {
	benchStorms(b, stormKind{"storm", func(ctx context.Context, h *harness, k *kernel.Kernel) (stormShot, error) {
		return h.inprocStorm(ctx, k, StormRequests, true)
	}})
}

// BenchmarkInprocStormFloor is the shared storm's floor on this machine (floorStorm): the
// scheduler's part of the storm, with none of the runner's. Compare storm-µs with
// BenchmarkInprocStormShared's, or run BenchmarkInprocStormVsFloor.
func BenchmarkInprocStormFloor(b *testing.B) {
	benchStorms(b, stormKind{"storm", func(ctx context.Context, h *harness, k *kernel.Kernel) (stormShot, error) {
		return h.floorStorm(ctx, k, StormRequests)
	}})
}

// BenchmarkInprocStormVsFloor runs the shared storm and its floor in every op, side by side, so
// that the machine's noise hits both: ×floor is what the runner adds to the scheduler's part.
func BenchmarkInprocStormVsFloor(b *testing.B) {
	benchStorms(b, stormKind{"storm", func(ctx context.Context, h *harness, k *kernel.Kernel) (stormShot, error) {
		return h.inprocStorm(ctx, k, StormRequests, true)
	}}, stormKind{"floor", func(ctx context.Context, h *harness, k *kernel.Kernel) (stormShot, error) {
		return h.floorStorm(ctx, k, StormRequests)
	}})
}

type stormKind struct {
	name string
	fire func(ctx context.Context, h *harness, k *kernel.Kernel) (stormShot, error)
}

// benchStorms runs a lone create then each storm once per op, and reports the medians over the
// ops (lone-µs, <name>-µs) and the first storm's median ÷ the lone median (×lone) and, with a
// second storm, ÷ its median (×<name>). The context can be cancelled, as every caller's is (an
// HTTP request's, the CLI's): a follower parks on it too.
func benchStorms(b *testing.B, kinds ...stormKind) {
	db := testdb.NewWith(b, testdb.Options{MaxConns: StormPoolConns})
	k := kernel.New(db.DB, kernel.NewRegistry(kernel.NewRules(DefaultMemMaxContentLength)), kernel.Options{})
	h := &harness{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		if _, err := h.inprocStorm(ctx, k, StormPoolConns*3, false); err != nil {
			b.Fatal(err)
		}
	}
	var lone []time.Duration
	walls := make([][]time.Duration, len(kinds))
	w := &worker{keyBuf: make([]byte, 0, 64)}
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if _, err := k.Create(ctx, model.CreateInput{Owner: Owner, Module: kernel.ModuleNote, Key: w.newKey("lone-"),
			Title: noteTitle, Payload: notePayload}); err != nil {
			b.Fatal(err)
		}
		lone = append(lone, time.Since(t0))
		for j := range kinds {
			j = (j + i) % len(kinds) // alternate which storm goes first
			shot, err := kinds[j].fire(ctx, h, k)
			if err != nil {
				b.Fatal(err)
			}
			if len(shot.problems) > 0 {
				b.Fatal(shot.problems)
			}
			walls[j] = append(walls[j], shot.wall)
		}
	}
	b.StopTimer()
	med := func(d []time.Duration) float64 { return percentileMs(d, 50) * 1000 }
	b.ReportMetric(med(lone), "lone-µs")
	for j, kd := range kinds {
		b.ReportMetric(med(walls[j]), kd.name+"-µs")
	}
	b.ReportMetric(med(walls[0])/med(lone), "×lone")
	if len(kinds) > 1 {
		b.ReportMetric(med(walls[0])/med(walls[1]), "×"+kinds[1].name)
	}
}
