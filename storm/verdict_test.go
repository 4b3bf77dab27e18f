package storm_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/httpapi"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/storm"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// latestLocks keeps the storm's last lock sample (its OnLocks).
type latestLocks struct {
	mu sync.Mutex
	s  stormtypes.LockSample
}

func (l *latestLocks) set(s stormtypes.LockSample) { l.mu.Lock(); l.s = s; l.mu.Unlock() }
func (l *latestLocks) get() stormtypes.LockSample  { l.mu.Lock(); defer l.mu.Unlock(); return l.s }

// holdKey opens a transaction (not the storm's) that reserves owner's key as PROCESSING, the
// way a request stuck in its work would, and returns it with its backend's pid.
func (b *testBundle) holdKey(t *testing.T, owner, key, operation string) (pgx.Tx, int) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	var pid int
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	_, err = tx.Exec(ctx, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, created_at, expires_at, updated_at)
		VALUES ($1, $2, $3, 'v1:held', 'PROCESSING', now(), now() + interval '1 hour', now())`, owner, key, operation)
	require.NoError(t, err)
	return tx, pid
}

// stormSessionsInXact counts the database sessions a storm named as its own that have a
// transaction open.
func (b *testBundle) stormSessionsInXact(t *testing.T, id string) int {
	t.Helper()
	return b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE starts_with(application_name, $1) AND xact_start IS NOT NULL`, stormtypes.AppNamePrefix(id))
}

// requireStormSessionsGone waits until the storm's sessions have disconnected (a backend
// leaves pg_stat_activity shortly after its client closed the connection).
func (b *testBundle) requireStormSessionsGone(t *testing.T, id string) {
	t.Helper()
	require.Eventually(t, func() bool {
		return b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE starts_with(application_name, $1)`, stormtypes.AppNamePrefix(id)) == 0
	}, 10*time.Second, 10*time.Millisecond, "the storm's pools are closed")
}

func TestAStormWhoseEveryRequestIsRejectedSaysSoAndWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	b := setup(t)
	id := b.newRecord(t, "rita", kernel.ModuleNote, `{}`)
	title := "moved on"
	_, err := b.k.Patch(ctx, model.PatchInput{Owner: "rita", Module: kernel.ModuleNote, RecordID: id, ExpectRevision: 1, Title: &title})
	require.NoError(t, err)

	// A patch storm from the revision the record has left behind.
	spec := stormtypes.Spec{Op: stormtypes.OpPatch, N: 50, Share: false, Patch: model.PatchInput{Owner: "rita", Module: kernel.ModuleNote, RecordID: id,
		Key: "k-stale", ExpectRevision: 1, Title: &title}}
	sum, err := storm.Run(ctxFor(t), b.env, spec, nil)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"REVISION_CONFLICT": 50}, sum.Outcomes)
	require.Equal(t, 50, sum.Errors["REVISION_CONFLICT"].Count)
	require.Equal(t, 409, sum.Errors["REVISION_CONFLICT"].Status)
	require.Contains(t, sum.Errors["REVISION_CONFLICT"].Sample, "revision 2, not the expected 1")
	require.True(t, sum.Verified.Agrees, "%v", sum.Verified.Problems)
	require.Equal(t, "ABSENT", sum.Verified.KeyStatusBefore)
	require.Equal(t, "ABSENT", sum.Verified.KeyStatus)
	v := sum.Verdict
	require.Equal(t, stormtypes.VerdictRejected, v.Verdict)
	require.Equal(t, "REVISION_CONFLICT", v.Code)
	require.Equal(t, "no request succeeded: REVISION_CONFLICT × 50", v.Text)
	require.True(t, v.Answers.OK, "a rejection is a SPEC answer: %s", v.Answers.Text)
	require.True(t, v.Database.OK)
	require.Equal(t, "nothing written: the key was ABSENT before the storm and still is", v.Database.Text)
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM record_revision WHERE owner_id = 'rita'`))

	// A committed leftover PROCESSING row: every request gets IDEMPOTENCY_IN_PROGRESS, and the
	// row is left as it was.
	op := model.OpCreate(kernel.ModuleNote)
	tx, _ := b.holdKey(t, "rita", "k-leftover", op)
	require.NoError(t, tx.Commit(ctx))
	spec = createSpec("rita", "k-leftover")
	spec.N = 20
	sum, err = storm.Run(ctxFor(t), b.env, spec, nil)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"IDEMPOTENCY_IN_PROGRESS": 20}, sum.Outcomes)
	require.Equal(t, stormtypes.VerdictRejected, sum.Verdict.Verdict)
	require.Equal(t, "IDEMPOTENCY_IN_PROGRESS", sum.Verdict.Code)
	require.True(t, sum.Verdict.Database.OK, "%v", sum.Verified.Problems)
	require.Equal(t, "nothing written: the key is PROCESSING, as before the storm", sum.Verdict.Database.Text)

	// The check is real: a key that changes under a storm none of whose requests succeeded is
	// a disagreement, not "nothing written".
	spec = createSpec("rita", "k-changes")
	spec.Create.Module, spec.N, spec.Concurrency = kernel.ModuleIdentity, 5, 1 // every request: LEGACY_WRITE_DISABLED
	events := make(chan stormtypes.Event)                                      // unbuffered: Run waits for each delivery
	written := make(chan error, 1)
	go func() {
		<-events // the first answer: now someone else writes the key, before Run can judge
		_, err := b.k.Create(ctx, model.CreateInput{Owner: "rita", Module: kernel.ModuleNote, Key: "k-changes", Title: "x"})
		written <- err
		for range events {
		}
	}()
	sum, err = storm.Run(ctxFor(t), b.env, spec, events)
	close(events)
	require.NoError(t, err)
	require.NoError(t, <-written)
	require.False(t, sum.Verified.Agrees)
	require.Equal(t, stormtypes.VerdictDisagrees, sum.Verdict.Verdict)
	require.Contains(t, sum.Verdict.Text, "no request succeeded, yet the key changed: ABSENT before the storm, SUCCEEDED since")
}

func TestFailedRequestsAreNeverHiddenBehindADatabaseThatAgrees(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// A pool of two connections with a 150 ms statement timeout, and a winner that holds its
	// transaction 800 ms: the requests queued behind it on the unique index time out.
	env := b.env
	env.DSN, env.MaxConns = testdb.WithParam(b.db.DSN, "statement_timeout", "150"), 2
	spec := createSpec("sam", "k-small-pool")
	spec.N, spec.Concurrency, spec.Share, spec.Hold = 20, 8, false, 800*time.Millisecond
	sum, err := storm.Run(ctxFor(t), env, spec, nil)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Outcomes["EXECUTED"], "%v", sum.Outcomes)
	// A statement timeout is a known cause with its code and what to do, never INTERNAL with
	// the driver's text.
	require.Positive(t, sum.Outcomes["DATABASE_UNAVAILABLE"], "%v", sum.Outcomes)
	require.Zero(t, sum.Outcomes["INTERNAL"], "%v", sum.Outcomes)
	sample := sum.Errors["DATABASE_UNAVAILABLE"].Sample
	require.Contains(t, sample, "cancelled the statement when it reached statement_timeout (SQLSTATE 57014")
	require.Contains(t, sample, "retry")
	require.NotContains(t, sample, "ERROR:", "not pgx's rendering of the server's error")

	// What was written is right…
	require.True(t, sum.Verified.Agrees, "%v", sum.Verified.Problems)
	require.True(t, sum.Verdict.Database.OK)
	// …and the storm still failed.
	v := sum.Verdict
	require.Equal(t, stormtypes.VerdictFailed, v.Verdict)
	require.Equal(t, "DATABASE_UNAVAILABLE", v.Code)
	require.False(t, v.Answers.OK)
	n := sum.Outcomes["DATABASE_UNAVAILABLE"]
	require.Contains(t, v.Text, fmt.Sprintf("%d of 20 requests failed: DATABASE_UNAVAILABLE × %d", n, n))
	require.Contains(t, v.Text, "statement_timeout", "the verdict names the error")
	require.Contains(t, v.Answers.Text, "failed: DATABASE_UNAVAILABLE")
}

func TestStoppingAStormStuckBehindALockAccountsForEveryRequestAndLeavesNoSessionBehind(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// In this process, and from two worker processes (this test binary: interrupted, it dies
	// without cancelling its statements, so its backends stay queued until the storm cancels
	// them).
	for _, procs := range []int{1, 2} {
		owner, id := fmt.Sprintf("tom-%d", procs), fmt.Sprintf("stuck%d", procs)
		holder, pid := b.holdKey(t, owner, "k-stuck", model.OpCreate(kernel.ModuleNote))
		var locks latestLocks
		env := b.env
		env.OnLocks = locks.set
		spec := createSpec(owner, "k-stuck")
		// 20 requests sent (they queue behind the holder), 20 never sent.
		spec.N, spec.Processes, spec.Concurrency, spec.Share, spec.ID = 40, procs, 20/procs, false, id
		ctx, stop := context.WithCancel(ctxFor(t))
		type result struct {
			sum stormtypes.Summary
			err error
		}
		done := make(chan result, 1)
		go func() {
			sum, err := storm.Run(ctx, env, spec, nil)
			done <- result{sum, err}
		}()
		// The sampler sees the queue and says what it waits on: the holder's transaction.
		require.Eventually(t, func() bool {
			s := locks.get()
			return s.Waiting == 20 && len(s.Blockers) > 0 && s.Blockers[0].Waiters == 20
		}, time.Minute, 10*time.Millisecond)
		waits := locks.get().WaitsOn()
		require.Contains(t, waits, "20 of the storm's sessions wait on a lock")
		require.Contains(t, waits, fmt.Sprintf("transactionid: 20 held by pid %d", pid))
		require.Contains(t, waits, "idle in transaction")
		require.Contains(t, waits, "INSERT INTO idempotency_record")

		stop()
		var r result
		select {
		case r = <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the stopped storm did not return")
		}
		require.ErrorIs(t, r.err, context.Canceled)
		sum := r.sum
		require.Equal(t, map[string]int{"CANCELLED": 40}, sum.Outcomes, "processes %d: every request accounted for, sent or not", procs)
		require.Equal(t, 40, sum.Errors["CANCELLED"].Count)
		require.Equal(t, stormtypes.VerdictStopped, sum.Verdict.Verdict)
		require.Equal(t, "stopped: 0 answered, 40 cancelled", sum.Verdict.Text)
		require.GreaterOrEqual(t, sum.Locks.PeakWaiting, 20)
		// Judged after its own sessions ended: none is left waiting behind the holder.
		require.Zero(t, sum.Verified.Unsettled, "processes %d: %v", procs, sum.Verified.Problems)
		require.Zero(t, b.stormSessionsInXact(t, id))
		require.True(t, sum.Verified.Agrees, "%v", sum.Verified.Problems)
		require.NoError(t, holder.Rollback(context.Background()))
		require.Zero(t, b.count(t, `SELECT count(*) FROM idempotency_record WHERE owner_id = $1`, owner))
	}
}

func TestWaitedIsTheRunnersFactForReplaysAndRejectionsAlike(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	b := setup(t)
	for _, via := range []string{stormtypes.ViaInproc, stormtypes.ViaHTTP} {
		owner := "uma-" + via
		holder, _ := b.holdKey(t, owner, "k-wait", model.OpCreate(kernel.ModuleNote))
		var locks latestLocks
		env := b.env
		env.OnLocks = locks.set
		spec := createSpec(owner, "k-wait")
		spec.N, spec.Concurrency, spec.Share, spec.Via = 20, 20, false, via
		done := make(chan stormtypes.Summary, 1)
		go func() {
			sum, err := storm.Run(ctxFor(t), env, spec, nil)
			if err != nil {
				sum.Outcomes = map[string]int{"run: " + err.Error(): 1}
			}
			done <- sum
		}()
		require.Eventually(t, func() bool { return locks.get().Waiting == 20 }, time.Minute, 5*time.Millisecond, via)
		// The holder commits its PROCESSING row: every waiter gets IDEMPOTENCY_IN_PROGRESS after
		// having waited on the unique index, and says so.
		require.NoError(t, holder.Commit(ctx))
		sum := <-done
		require.Equal(t, map[string]int{"IDEMPOTENCY_IN_PROGRESS": 20}, sum.Outcomes, via)
		require.Equal(t, 20, sum.Waited, "%s: waited on the unique index, as the runner recorded it", via)
		require.Equal(t, 20, sum.Locks.PeakWaiting, via)
	}
}

func TestHoldKeepsTheQueueOnTheUniqueIndexWhereTheSamplerSeesIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, procs := range []int{1, 3} {
		key := fmt.Sprintf("k-hold-%d", procs)
		spec := createSpec("vera", key)
		spec.N, spec.Processes, spec.Concurrency, spec.Share, spec.Hold = 30, procs, 10, false, time.Second
		if procs == 1 {
			spec.Concurrency = 30
		}
		start := time.Now()
		sum, err := storm.Run(ctxFor(t), b.env, spec, nil)
		require.NoError(t, err)
		require.GreaterOrEqual(t, time.Since(start), time.Second, "the winner held its transaction")
		require.Equal(t, 1, sum.Outcomes["EXECUTED"], "%v", sum.Outcomes)
		require.Equal(t, 29, sum.Outcomes["REPLAYED"], "%v", sum.Outcomes)
		require.Equal(t, 29, sum.Waited, "every loser queued behind the winner")
		require.GreaterOrEqual(t, sum.Locks.PeakWaiting, 25, "processes %d", procs)
		require.LessOrEqual(t, sum.Locks.PeakWaiting, 29)
		require.NotNil(t, sum.Locks.PeakAt)
		require.Greater(t, sum.Locks.Samples, 20, "sampled every %v ms for a second", sum.Locks.EveryMs)
		require.Equal(t, stormtypes.VerdictAgrees, sum.Verdict.Verdict, sum.Verdict.Text)
		require.InDelta(t, 1000, sum.Storm.HoldMs, 0.001)
		b.requireStormSessionsGone(t, sum.Storm.ID)
	}
}

// serveAPI serves the HTTP API over k on loopback with tokens; it returns its URL.
func serveAPI(t *testing.T, k *kernel.Kernel, tokens map[string]string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: httpapi.New(k, httpapi.Options{Tokens: tokens}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func TestATokenOfAnotherOwnerIsRefusedBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	url := serveAPI(t, b.k, map[string]string{"tok-wes": "wes", "tok-xia": "xia"})
	spec := createSpec("xia", "k-token")
	spec.N, spec.Via, spec.URL = 10, stormtypes.ViaHTTP, url

	spec.Token = "tok-wes"
	_, err := storm.Run(ctxFor(t), b.env, spec, nil)
	require.Error(t, err)
	require.Equal(t, apperr.Usage, apperr.CodeOf(err))
	require.Contains(t, err.Error(), "the token acts as owner wes at "+url+", not as --owner xia")

	spec.Token = "tok-nobody"
	_, err = storm.Run(ctxFor(t), b.env, spec, nil)
	require.Equal(t, apperr.Usage, apperr.CodeOf(err))
	require.Contains(t, err.Error(), "refuses the token (UNAUTHORIZED")

	require.Zero(t, b.count(t, `SELECT count(*) FROM idempotency_record WHERE owner_id IN ('wes', 'xia')`), "nothing was fired")

	spec.Token = "tok-xia"
	sum, err := storm.Run(ctxFor(t), b.env, spec, nil)
	require.NoError(t, err)
	require.Equal(t, stormtypes.VerdictAgrees, sum.Verdict.Verdict, sum.Verdict.Text)
}

func TestAWorkerTakesReadOnlyFromItsSessionNeverFromTheJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	spec := createSpec("yan", "k-ro")
	spec.N, spec.Concurrency, spec.Processes, spec.Via = 3, 1, 1, stormtypes.ViaInproc
	// A hand-made job without readOnly, on a session whose rules say read-only.
	job, err := json.Marshal(map[string]any{"spec": spec, "indexBase": 0, "dsn": b.db.DSN, "ttl": int64(time.Hour), "memMaxContentLength": 2000})
	require.NoError(t, err)
	r, w := io.Pipe()
	go func() { _, _ = w.Write([]byte{'G'}); _ = w.Close() }()
	var out syncBuffer
	err = storm.ServeWorker(ctxFor(t), strings.NewReader(string(job)), &out, r, storm.WorkerSession{DSN: b.db.DSN, ReadOnly: true})
	require.Equal(t, apperr.ReadOnly, apperr.CodeOf(err), "%v", err)
	require.NotContains(t, out.String(), `"t":"event"`)
	require.Zero(t, b.count(t, `SELECT count(*) FROM idempotency_record WHERE owner_id = 'yan'`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM record WHERE owner_id = 'yan'`))
}

func TestThreeServerProcessesOnOneDatabaseExecuteExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, share := range []bool{true, false} {
		owner := fmt.Sprintf("zoe-%v", share)
		spec := createSpec(owner, "k-servers")
		spec.N, spec.Via, spec.Servers, spec.Share, spec.Concurrency = 300, stormtypes.ViaHTTP, 3, share, 24
		var seen atomic.Int64
		events := make(chan stormtypes.Event, 300)
		sum, err := storm.Run(ctxFor(t), b.env, spec, events)
		close(events)
		for ev := range events {
			require.NotZero(t, ev.Server)
			seen.Add(1)
		}
		require.NoError(t, err)
		require.Equal(t, int64(300), seen.Load())
		require.Equal(t, 1, sum.Outcomes["EXECUTED"], "%v", sum.Outcomes)
		requireOnlySuccesses(t, sum)
		require.Len(t, sum.ByServer, 3)
		urls := map[string]bool{}
		for _, s := range sum.ByServer {
			require.Equal(t, 100, s.Requests, "round-robin: %+v", sum.ByServer)
			urls[s.URL] = true
		}
		require.Len(t, urls, 3, "three servers")
		require.Equal(t, stormtypes.VerdictAgrees, sum.Verdict.Verdict, sum.Verdict.Text)
		require.Equal(t, map[string]int{"record": 1, "record_revision": 1, "feature_execution": 0, "audit_event": 1, "idempotency_record": 1},
			b.ownerRows(t, owner))
		b.requireStormSessionsGone(t, sum.Storm.ID)
	}
}

func TestSeveralURLsShareTheStormRoundRobin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tokens := map[string]string{"tok-amy": "amy"}
	u1, u2 := serveAPI(t, b.k, tokens), serveAPI(t, b.k, tokens)
	spec := createSpec("amy", "k-urls")
	spec.N, spec.Via, spec.URLs, spec.Token, spec.Share = 60, stormtypes.ViaHTTP, []string{u1, u2}, "tok-amy", false
	sum, err := storm.Run(ctxFor(t), b.env, spec, nil)
	require.NoError(t, err)
	require.Equal(t, 1, sum.Outcomes["EXECUTED"], "%v", sum.Outcomes)
	require.Equal(t, []stormtypes.ServerSummary{{URL: u1, Requests: 30, Outcomes: sum.ByServer[0].Outcomes}, {URL: u2, Requests: 30, Outcomes: sum.ByServer[1].Outcomes}}, sum.ByServer)
	require.Equal(t, []string{u1, u2}, sum.Storm.URLs)
	require.Equal(t, stormtypes.VerdictAgrees, sum.Verdict.Verdict, sum.Verdict.Text)
}
