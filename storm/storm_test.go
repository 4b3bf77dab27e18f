package storm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/httpapi"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/storm"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// TestMain doubles as the storm's worker: children of multi-process storms re-execute this test
// binary with storm.WorkerEnvVar set, and run the worker instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv(storm.WorkerEnvVar) == "1" {
		if err := storm.WorkerMain(context.Background(), os.Stdin, os.Stdout, storm.WorkerSession{Serve: serveHTTP}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(4)
		}
		os.Exit(0)
	}
	testdb.Main(m)
}

type testBundle struct {
	db  *testdb.DB
	k   *kernel.Kernel
	env storm.Env
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	db := testdb.NewWith(t, testdb.Options{MaxConns: 48})
	k := kernel.New(db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
	return &testBundle{db: db, k: k, env: storm.Env{Kernel: k, DSN: store.WithChildConnectTimeout(db.DSN), Stderr: testWriter{t}, Serve: serveHTTP}}
}

// serveHTTP serves the HTTP API for the storm's own servers, as the CLI wires it.
func serveHTTP(ctx context.Context, k *kernel.Kernel, ln net.Listener, o storm.ServeOptions) error {
	api := httpapi.New(k, httpapi.Options{Tokens: o.Tokens, MaxBodyBytes: o.MaxBodyBytes})
	return httpapi.Serve(ctx, httpapi.NewServer(api, nil), ln, 5*time.Second)
}

// testWriter sends the children's stderr to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// count reads one number from the database.
func (b *testBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// ownerRows counts every row an owner has, so a partial write anywhere would show.
func (b *testBundle) ownerRows(t *testing.T, owner string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"record", "record_revision", "feature_execution", "audit_event", "idempotency_record"} {
		out[table] = b.count(t, "SELECT count(*) FROM "+table+" WHERE owner_id = $1", owner)
	}
	return out
}

func sumOutcomes(s stormtypes.Summary) int {
	n := 0
	for _, c := range s.Outcomes {
		n += c
	}
	return n
}

func requireOnlySuccesses(t *testing.T, s stormtypes.Summary) {
	t.Helper()
	for code := range s.Outcomes {
		require.Contains(t, []string{"EXECUTED", "REPLAYED", "JOINED"}, code, "outcomes: %v", s.Outcomes)
	}
}

func createSpec(owner, key string) stormtypes.Spec {
	return stormtypes.Spec{Op: stormtypes.OpCreate, Create: model.CreateInput{Owner: owner, Module: kernel.ModuleNote, Key: key, Title: "storm"}}
}

func (b *testBundle) newRecord(t *testing.T, owner, module string, payload string) string {
	t.Helper()
	res, err := b.k.Create(context.Background(), model.CreateInput{Owner: owner, Module: module, Title: "base", Payload: json.RawMessage(payload)})
	require.NoError(t, err)
	return res.Record.ID
}

func TestFourHundredRequestsFromFourProcessesExecuteOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spec := createSpec("alice", "k-procs")
	spec.N, spec.Processes, spec.Concurrency, spec.Share = 400, 4, 25, true

	events := make(chan stormtypes.Event, 4) // small on purpose: the consumer lags behind the storm
	var got []stormtypes.Event
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for ev := range events {
			got = append(got, ev)
		}
	}()
	sum, err := storm.Run(ctxFor(t), b.env, spec, events)
	close(events) // ours: Run never closes it
	<-consumed
	require.NoError(t, err)

	require.Equal(t, 400, sum.Requests)
	require.Equal(t, 400, sumOutcomes(sum))
	require.Equal(t, 1, sum.Outcomes["EXECUTED"], "outcomes: %v", sum.Outcomes)
	requireOnlySuccesses(t, sum)
	require.Equal(t, stormtypes.Distinct{RecordIDs: 1, Revisions: 1, ExecutionIDs: 0}, sum.Distinct)
	require.True(t, sum.Verified.Agrees, "problems: %v", sum.Verified.Problems)
	require.Equal(t, "SUCCEEDED", sum.Verified.KeyStatus)
	require.Equal(t, 1, sum.Verified.Revisions)
	require.Equal(t, 0, sum.Verified.Executions)
	require.Equal(t, 1, sum.Verified.AuditEvents)
	require.Positive(t, sum.LatencyMs.P50)
	require.LessOrEqual(t, sum.LatencyMs.P50, sum.LatencyMs.P95)
	require.LessOrEqual(t, sum.LatencyMs.P99, sum.LatencyMs.Max)
	require.Positive(t, sum.WallMs)

	// Four real processes, none of them this one, each firing its share.
	require.Len(t, sum.ByProcess, 4)
	for _, p := range sum.ByProcess {
		require.NotEqual(t, os.Getpid(), p.PID)
		require.Equal(t, 100, p.Requests)
	}

	// Every request was streamed exactly once, with the process that fired it.
	require.Len(t, got, 400)
	seen := map[int]bool{}
	for _, ev := range got {
		require.False(t, seen[ev.Index], "index %d twice", ev.Index)
		seen[ev.Index] = true
		require.NotZero(t, ev.PID)
	}

	// The rows themselves: one record, one revision, one audit event, one SUCCEEDED key.
	require.Equal(t, map[string]int{"record": 1, "record_revision": 1, "feature_execution": 0, "audit_event": 1, "idempotency_record": 1},
		b.ownerRows(t, "alice"))
}

func TestNoShareNeverJoinsAndStillExecutesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, procs := range []int{1, 3} {
		key := fmt.Sprintf("k-noshare-%d", procs)
		spec := createSpec("bob", key)
		spec.N, spec.Processes, spec.Concurrency, spec.Share = 150, procs, 20, false
		sum, err := storm.Run(ctxFor(t), b.env, spec, nil)
		require.NoError(t, err)
		require.Equal(t, 150, sumOutcomes(sum))
		require.Zero(t, sum.Outcomes["JOINED"], "processes %d: %v", procs, sum.Outcomes)
		require.Equal(t, 1, sum.Outcomes["EXECUTED"], "processes %d: %v", procs, sum.Outcomes)
		require.Equal(t, 149, sum.Outcomes["REPLAYED"])
		require.True(t, sum.Verified.Agrees, "problems: %v", sum.Verified.Problems)
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM record_revision WHERE owner_id = 'bob' AND idempotency_key = $1", key))
	}
	require.Equal(t, 2, b.count(t, "SELECT count(*) FROM record WHERE owner_id = 'bob'"))
}

func TestPatchStormWritesOneRevision(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.newRecord(t, "carol", kernel.ModuleNote, `{"n":1}`)
	for _, share := range []bool{true, false} {
		// Each storm patches from the revision the previous one left.
		from := b.count(t, "SELECT revision FROM record WHERE owner_id = 'carol' AND id = $1", id)
		title := fmt.Sprintf("patched share=%v", share)
		spec := stormtypes.Spec{Op: stormtypes.OpPatch, Patch: model.PatchInput{Owner: "carol", Module: kernel.ModuleNote, RecordID: id,
			Key: fmt.Sprintf("k-patch-%v", share), ExpectRevision: from, Title: &title}}
		spec.N, spec.Processes, spec.Share = 120, 2, share
		sum, err := storm.Run(ctxFor(t), b.env, spec, nil)
		require.NoError(t, err)
		require.Equal(t, 1, sum.Outcomes["EXECUTED"], "share %v: %v", share, sum.Outcomes)
		requireOnlySuccesses(t, sum)
		if !share {
			require.Zero(t, sum.Outcomes["JOINED"])
		}
		require.Equal(t, stormtypes.Distinct{RecordIDs: 1, Revisions: 1}, sum.Distinct)
		require.True(t, sum.Verified.Agrees, "problems: %v", sum.Verified.Problems)
		require.Equal(t, &stormtypes.Reference{RecordID: id, Revision: from + 1}, sum.Verified.Envelope)
		require.Equal(t, from+1, b.count(t, "SELECT revision FROM record WHERE owner_id = 'carol' AND id = $1", id))
	}
	require.Equal(t, 3, b.count(t, "SELECT count(*) FROM record_revision WHERE owner_id = 'carol'"))
}

func TestActionStormRunsTheFeatureOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	note := b.newRecord(t, "dave", kernel.ModuleNote, `{}`)
	mem := b.newRecord(t, "dave", kernel.ModuleMem, `{"originalContent":"a","currentContent":"a"}`)
	cases := []struct {
		name          string
		module, id, f string
		share         bool
		wantRevisions int
		status        string
	}{
		{"internal, shared", kernel.ModuleNote, note, "F01", true, 1, "SUCCEEDED"},
		{"direct external fails closed, no share", kernel.ModuleMem, mem, "F02", false, 0, "BLOCKED"},
	}
	for i, c := range cases {
		key := fmt.Sprintf("k-action-%d", i)
		spec := stormtypes.Spec{Op: stormtypes.OpAction, Action: model.FeatureInput{Owner: "dave", Module: c.module, RecordID: c.id, FeatureID: c.f, Key: key}}
		spec.N, spec.Processes, spec.Share = 120, 2, c.share
		sum, err := storm.Run(ctxFor(t), b.env, spec, nil)
		require.NoError(t, err, c.name)
		require.Equal(t, 1, sum.Outcomes["EXECUTED"], "%s: %v", c.name, sum.Outcomes)
		requireOnlySuccesses(t, sum)
		require.Equal(t, 1, sum.Distinct.ExecutionIDs, c.name)
		require.True(t, sum.Verified.Agrees, "%s: %v", c.name, sum.Verified.Problems)
		require.Equal(t, 1, sum.Verified.Executions, c.name)
		require.Equal(t, c.wantRevisions, sum.Verified.Revisions, c.name)
		require.Equal(t, c.status, sum.Verified.ExecutionStatus, c.name)
		require.Contains(t, sum.Verdict.Database.Text, "execution "+c.status, "the result's status is part of what the database holds")
		if c.status == "BLOCKED" {
			// A storm of a fail-closed feature never reads as the action done.
			require.Contains(t, sum.Verdict.Answers.Text, " — every answer carries the execution BLOCKED (failed closed: nothing was sent)", c.name)
			require.Contains(t, sum.Verdict.Text, "exactly one request executed, and its execution is BLOCKED (failed closed: nothing was sent)", c.name)
		} else {
			require.NotContains(t, sum.Verdict.Answers.Text, "BLOCKED", c.name)
			require.NotContains(t, sum.Verdict.Text, "its execution is", c.name)
		}
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM feature_execution WHERE owner_id = 'dave' AND idempotency_key = $1 AND status = $2", key, c.status))
	}
}

func TestFailFirstLeavesNothingPartialAndAnotherRequestExecutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name  string
		owner string
		procs int
		share bool
		via   string
	}{
		{"in process, shared", "erin", 1, true, stormtypes.ViaInproc},
		{"in process, no share", "frank", 1, false, stormtypes.ViaInproc},
		{"three processes", "grace", 3, true, stormtypes.ViaInproc},
		{"over http", "heidi", 1, true, stormtypes.ViaHTTP},
	}
	for _, c := range cases {
		spec := createSpec(c.owner, "k-fail")
		spec.N, spec.Processes, spec.Share, spec.Via, spec.FailFirst = 90, c.procs, c.share, c.via, true
		sum, err := storm.Run(ctxFor(t), b.env, spec, nil)
		require.NoError(t, err, c.name)
		require.Equal(t, 90, sumOutcomes(sum), c.name)
		require.Equal(t, 1, sum.Outcomes[string(stormtypes.CodeInjectedFault)], "%s: %v", c.name, sum.Outcomes)
		require.Equal(t, 1, sum.Outcomes["EXECUTED"], "%s: %v", c.name, sum.Outcomes)
		require.Equal(t, 89, sum.Successes(), c.name)
		require.True(t, sum.Verified.Agrees, "%s: %v", c.name, sum.Verified.Problems)
		// The failed attempt rolled back record, revision, audit and reservation together.
		require.Equal(t, map[string]int{"record": 1, "record_revision": 1, "feature_execution": 0, "audit_event": 1, "idempotency_record": 1},
			b.ownerRows(t, c.owner), c.name)
	}
}

func TestHTTPStormAgainstItsOwnServerExecutesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.newRecord(t, "ivan", kernel.ModuleNote, `{}`)
	create := createSpec("ivan", "k-http")
	create.N, create.Via, create.Share, create.Concurrency = 200, stormtypes.ViaHTTP, true, 24
	sum, err := storm.Run(ctxFor(t), b.env, create, nil)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Outcomes["EXECUTED"], "%v", sum.Outcomes)
	requireOnlySuccesses(t, sum)
	require.True(t, sum.Verified.Agrees, "%v", sum.Verified.Problems)

	// Children over HTTP, without sharing in the server: every request reaches PostgreSQL.
	action := stormtypes.Spec{Op: stormtypes.OpAction, Action: model.FeatureInput{Owner: "ivan", Module: kernel.ModuleNote, RecordID: id, FeatureID: "F01", Key: "k-http-action"}}
	action.N, action.Via, action.Processes, action.Share = 120, stormtypes.ViaHTTP, 2, false
	events := make(chan stormtypes.Event, 200)
	sum, err = storm.Run(ctxFor(t), b.env, action, events)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Outcomes["EXECUTED"], "%v", sum.Outcomes)
	require.Zero(t, sum.Outcomes["JOINED"])
	require.True(t, sum.Verified.Agrees, "%v", sum.Verified.Problems)
	require.Len(t, events, 120)
	close(events)
	for ev := range events {
		require.Equal(t, 200, ev.Status)
		require.NotEqual(t, os.Getpid(), ev.PID)
	}
}

func TestDisagreementIsReadFromTheDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spec := createSpec("judy", "k-tampered")
	spec.N, spec.Share = 20, true
	_, err := storm.Run(ctxFor(t), b.env, spec, nil)
	require.NoError(t, err)
	// A second audit event of the operation under the key: the responses cannot show it, the
	// verdict must.
	_, err = b.db.Pool.Exec(context.Background(), `INSERT INTO audit_event (owner_id, id, module_code, record_id, action, idempotency_key, detail, at)
		SELECT owner_id, id || 'x', module_code, record_id, action, idempotency_key, detail, at FROM audit_event WHERE owner_id = 'judy'`)
	require.NoError(t, err)
	sum, err := storm.Run(ctxFor(t), b.env, spec, nil)
	require.NoError(t, err)
	require.Zero(t, sum.Outcomes["EXECUTED"])
	require.Equal(t, 20, sum.Successes())
	require.False(t, sum.Verified.Agrees)
	require.Equal(t, 2, sum.Verified.AuditEvents)
	require.Contains(t, strings.Join(sum.Verified.Problems, "\n"), "2 audit events carry the key")
}

func TestAStormOnAKeyThatExpiredAndRanAgainJudgesOnlyTheKeysCurrentLife(t *testing.T) {
	t.Parallel()
	db := testdb.NewWith(t, testdb.Options{MaxConns: 48})
	clock := &idem.OffsetClock{}
	k := kernel.New(db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{Runner: idem.Options{Clock: clock}})
	env := storm.Env{Kernel: k, DSN: store.WithChildConnectTimeout(db.DSN), Stderr: testWriter{t}, Serve: serveHTTP}
	spec := createSpec("ivan", "k-lives")
	spec.N, spec.Share = 30, true

	first, err := storm.Run(ctxFor(t), env, spec, nil)
	require.NoError(t, err)
	require.True(t, first.Verified.Agrees, "%v", first.Verified.Problems)
	require.Zero(t, first.Verified.EarlierRows)

	// A day and a bit later the key has expired: the next storm executes it again. Its worker
	// processes judge expiry by the moved clock too.
	clock.Advance(25 * time.Hour)
	spec.Processes = 2
	second, err := storm.Run(ctxFor(t), env, spec, nil)
	require.NoError(t, err)
	require.Equal(t, 1, second.Outcomes["EXECUTED"])
	require.True(t, second.Verified.Agrees, "%v", second.Verified.Problems)
	require.Equal(t, 1, second.Verified.Revisions)
	require.Equal(t, 1, second.Verified.AuditEvents)
	require.Equal(t, 2, second.Verified.EarlierRows, "the first life's revision and audit event")
	require.Equal(t, 2, countRows(t, db, "SELECT count(*) FROM record WHERE owner_id = 'ivan'"), "two lives, two records")

	// A row of the current life that should not be there still shows.
	_, err = db.Pool.Exec(context.Background(), `INSERT INTO audit_event (owner_id, id, module_code, record_id, action, idempotency_key, detail, at)
		SELECT owner_id, id || 'x', module_code, record_id, action, idempotency_key, detail, at FROM audit_event
		WHERE owner_id = 'ivan' ORDER BY at DESC LIMIT 1`)
	require.NoError(t, err)
	spec.Processes = 1
	third, err := storm.Run(ctxFor(t), env, spec, nil)
	require.NoError(t, err)
	require.False(t, third.Verified.Agrees)
	require.Contains(t, strings.Join(third.Verified.Problems, "\n"), "2 audit events carry the key")
}

func countRows(t *testing.T, db *testdb.DB, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), sql).Scan(&n))
	return n
}

func TestRejectedStormReportsTheCode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spec := createSpec("kim", "k-bad")
	spec.Create.Title = "" // the kernel refuses: 422 for every request
	spec.N = 10
	sum, err := storm.Run(ctxFor(t), b.env, spec, nil)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"VALIDATION_FAILED": 10}, sum.Outcomes)
	require.True(t, sum.Verified.Agrees, "nothing claimed, nothing written: %v", sum.Verified.Problems)
	require.Equal(t, "ABSENT", sum.Verified.KeyStatus)
	code, n := sum.TopError()
	require.Equal(t, "VALIDATION_FAILED", code)
	require.Equal(t, 10, n)
	require.Equal(t, stormtypes.VerdictRejected, sum.Verdict.Verdict)
	require.Equal(t, "VALIDATION_FAILED", sum.Verdict.Code)
	require.Equal(t, 10, sum.Errors["VALIDATION_FAILED"].Count)
	require.Contains(t, sum.Errors["VALIDATION_FAILED"].Sample, "title", "the sample says which field and why")
}

func TestSpecNormalization(t *testing.T) {
	t.Parallel()
	base := createSpec("o", "k")
	base.N = 10
	bad := map[string]func(s *stormtypes.Spec){
		"no requests":       func(s *stormtypes.Spec) { s.N = 0 },
		"too many requests": func(s *stormtypes.Spec) { s.N = stormtypes.MaxRequests + 1 },
		"unknown op":        func(s *stormtypes.Spec) { s.Op = "delete" },
		"unknown via":       func(s *stormtypes.Spec) { s.Via = "carrier-pigeon" },
		"url without http":  func(s *stormtypes.Spec) { s.URL = "http://127.0.0.1:1" },
		"url without token": func(s *stormtypes.Spec) { s.Via, s.URL = stormtypes.ViaHTTP, "http://127.0.0.1:1" },
		"fail-first over url": func(s *stormtypes.Spec) {
			s.Via, s.URL, s.Token, s.FailFirst = stormtypes.ViaHTTP, "http://127.0.0.1:1", "t", true
		},
		"bad key":       func(s *stormtypes.Spec) { s.Create.Key = "has space" },
		"bad owner":     func(s *stormtypes.Spec) { s.Create.Owner = "no/slash" },
		"negative conc": func(s *stormtypes.Spec) { s.Concurrency = -1 },
	}
	for name, mutate := range bad {
		s := base
		mutate(&s)
		_, err := s.Normalized()
		require.Error(t, err, name)
	}
	s := base
	s.Create.Key = ""
	s.Processes = 50
	n, err := s.Normalized()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(n.Key(), "storm-"), n.Key())
	require.Equal(t, 10, n.Processes, "never more processes than requests")
	require.Equal(t, 1, n.Concurrency)
	require.Equal(t, stormtypes.ViaInproc, n.Via)
}

func TestWorkerNeverFiresWithoutARelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spec := createSpec("lou", "k-abort")
	spec.N, spec.Concurrency, spec.Processes, spec.Share, spec.Via = 5, 2, 1, true, stormtypes.ViaInproc
	job, err := json.Marshal(map[string]any{"spec": spec, "indexBase": 0, "dsn": b.db.DSN, "ttl": int64(time.Hour), "memMaxContentLength": 2000})
	require.NoError(t, err)
	r, w := io.Pipe()
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- storm.ServeWorker(ctxFor(t), strings.NewReader(string(job)), &out, r, storm.WorkerSession{Serve: serveHTTP})
	}()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), `"t":"ready"`) }, time.Minute, 10*time.Millisecond)
	require.NoError(t, w.Close()) // the parent is gone: EOF instead of a release byte
	err = <-done
	require.ErrorContains(t, err, "without a release")
	require.NotContains(t, out.String(), `"t":"event"`)
	require.Zero(t, b.count(t, "SELECT count(*) FROM idempotency_record WHERE owner_id = 'lou'"))
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestPercentileIsNearestRank(t *testing.T) {
	t.Parallel()
	v := []float64{1, 2, 3, 4, 5}
	require.Equal(t, 3.0, stormtypes.Percentile(v, 50))
	require.Equal(t, 5.0, stormtypes.Percentile(v, 99))
	require.Equal(t, 1.0, stormtypes.Percentile(v, 1))
	require.Zero(t, stormtypes.Percentile(nil, 50))
}
