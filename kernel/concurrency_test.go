package kernel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// outcomes tallies results of concurrent calls.
type outcomes struct {
	mu      sync.Mutex
	byName  map[string]int
	results []model.WriteResult
	errs    []error
}

func newOutcomes() *outcomes { return &outcomes{byName: map[string]int{}} }

func (o *outcomes) add(res model.WriteResult, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.byName[string(apperr.CodeOf(err))]++
		o.errs = append(o.errs, err)
		return
	}
	o.byName[string(res.Outcome)]++
	o.results = append(o.results, res)
}

// fire runs n calls of f at once (released together by a barrier) and waits for all of them.
func fire(n int, f func(i int)) {
	var start, done sync.WaitGroup
	start.Add(1)
	for i := 0; i < n; i++ {
		done.Add(1)
		go func(i int) {
			defer done.Done()
			start.Wait()
			f(i)
		}(i)
	}
	start.Done()
	done.Wait()
}

func TestSameKeyRaceWithSharingOnExecutesOnceAndTheRestJoinOrReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 16
	got := newOutcomes()
	fire(n, func(int) {
		got.add(b.k.Create(context.Background(), model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "race-share", Title: "raced",
			Payload: raw(map[string]any{"n": 1})}))
	})
	require.Empty(t, got.errs)
	require.Equal(t, 1, got.byName["EXECUTED"], "%v", got.byName)
	require.Equal(t, n-1, got.byName["JOINED"]+got.byName["REPLAYED"], "%v", got.byName)
	for _, r := range got.results {
		require.Equal(t, got.results[0].Record.ID, r.Record.ID)
		require.Equal(t, 1, r.Record.Revision)
		if r.Outcome == idemtype.Joined {
			require.False(t, r.Waited, "a joined call never touched the unique index")
		}
	}
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM record`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM record_revision`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_event`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM idempotency_record`))
	require.Zero(t, b.runner.Stats().InFlight)
}

func TestWithSharingOnFollowersJoinTheLeaderInsteadOfQueueingOnTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	b := setup(t)
	g := newGate(t)
	var leaders atomic.Int32
	// Every call carries the same fault func; only a call holding the reservation reaches a step,
	// so the one that does is the leader, held open until the followers have gathered.
	faulted := b.k.WithFaults(func(_ context.Context, step string) error {
		if step == kernel.StepReserved && leaders.Add(1) == 1 {
			g.Hold()
		}
		return nil
	})
	in := model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "join-me", Title: "shared"}
	got := newOutcomes()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); got.add(faulted.Create(ctx, in)) }()
	g.AwaitHeld(t)
	require.Equal(t, 1, b.runner.Stats().InFlight, "the leader published its flight")

	const followers = 6
	for i := 0; i < followers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got.add(faulted.Create(ctx, in))
		}()
	}
	// Every follower parks on the leader's flight; none went to the database, where it would
	// show as a session waiting on a lock.
	waitForFollowers(t, b.k, followers)
	n, err := waitingOnLocks(ctx, b.db.DB)
	require.NoError(t, err)
	require.Zero(t, n, "no follower queues on the unique index while it can join the leader")
	g.Open()
	wg.Wait()

	require.Empty(t, got.errs)
	require.Equal(t, map[string]int{"EXECUTED": 1, "JOINED": followers}, got.byName)
	require.Equal(t, int32(1), leaders.Load(), "only the leader reached the reservation")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM record`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM record_revision`))
	require.Zero(t, b.runner.Stats().InFlight)
}

func TestAFailedLeaderNeverHandsItsErrorToFollowers(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	b := setup(t)
	g := newGate(t)
	var calls atomic.Int32
	boom := fmt.Errorf("leader dies")
	faulted := b.k.WithFaults(func(_ context.Context, step string) error {
		if step == kernel.StepSucceeded && calls.Add(1) == 1 {
			g.Hold()
			return boom
		}
		return nil
	})
	in := model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "bad-leader", Title: "t"}
	got := newOutcomes()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); got.add(faulted.Create(ctx, in)) }()
	g.AwaitHeld(t)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); got.add(faulted.Create(ctx, in)) }()
	}
	// The followers are parked on the flight before the leader fails.
	waitForFollowers(t, b.k, 4)
	g.Open()
	wg.Wait()

	require.Len(t, got.errs, 1, "only the leader fails: %v", got.errs)
	require.ErrorIs(t, got.errs[0], boom)
	require.Equal(t, 1, got.byName["EXECUTED"], "a follower took the database path itself and executed: %v", got.byName)
	// Each follower runs the database path itself (SPEC §4.3): none leads a new flight for the
	// others to join, so the rest replay the one that executed.
	require.Equal(t, 3, got.byName["REPLAYED"], "%v", got.byName)
	require.Zero(t, got.byName["JOINED"], "%v", got.byName)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM record`))
}

func TestWithSharingOffNoCallJoinsAndLosersReplayAfterWaitingOnTheUniqueIndex(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	b := setup(t)
	g := newGate(t)
	winner := b.k.WithFaults(func(_ context.Context, step string) error {
		if step == kernel.StepSucceeded {
			g.Hold()
		}
		return nil
	})
	in := model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "no-share", Title: "t", ShareInFlight: boolp(false)}
	got := newOutcomes()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); got.add(winner.Create(ctx, in)) }()
	g.AwaitHeld(t)
	require.Zero(t, b.runner.Stats().InFlight, "ShareInFlight false publishes no flight")

	const losers = 5
	for i := 0; i < losers; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); got.add(b.k.Create(ctx, in)) }()
	}
	// The winner holds its transaction open; every loser's INSERT waits on the winner's
	// transaction id for the unique index.
	waitForLockWaiters(t, b.db.DB, losers)
	require.Equal(t, losers, b.count(t, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		WHERE a.datname = current_database() AND l.locktype = 'transactionid' AND NOT l.granted`))
	g.Open()
	wg.Wait()

	require.Empty(t, got.errs)
	require.Equal(t, map[string]int{"EXECUTED": 1, "REPLAYED": losers}, got.byName)
	for _, r := range got.results {
		require.Equal(t, got.results[0].Record.ID, r.Record.ID)
		if r.Outcome == idemtype.Replayed {
			require.True(t, r.Waited, "a loser that queued behind the winner reports waited")
		} else {
			require.False(t, r.Waited)
		}
	}
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM record`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM record_revision`))

	// A replay that did not queue says so.
	res, err := b.k.Create(ctx, in)
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, res.Outcome)
	require.False(t, res.Waited)
}

func TestWithSharingOffAFreeForAllStillExecutesOnceAndNeverJoins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 12
	got := newOutcomes()
	fire(n, func(int) {
		got.add(b.k.Create(context.Background(), model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "ffa", Title: "t", ShareInFlight: boolp(false)}))
	})
	require.Empty(t, got.errs)
	require.Equal(t, 1, got.byName["EXECUTED"], "%v", got.byName)
	require.Equal(t, n-1, got.byName["REPLAYED"], "%v", got.byName)
	require.Zero(t, got.byName["JOINED"])
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM record`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM record_revision`))
}

func TestInsideAnAmbientTransactionCallsNeverShareEvenWhenAskedTo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testdb.Context(t)
	in := model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "ambient", Title: "t", ShareInFlight: boolp(true)}
	g, commit := newGate(t), newGate(t)
	var resA, resB model.WriteResult
	var errA, errB, txErrA, txErrB error
	var bInTx bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		txErrA = b.db.Tx(ctx, func(tx context.Context) error {
			held := b.k.WithFaults(func(_ context.Context, step string) error {
				if step == kernel.StepSucceeded {
					g.Hold()
				}
				return nil
			})
			resA, errA = held.Create(tx, in)
			commit.Hold()
			return errA
		})
	}()
	g.AwaitHeld(t)
	require.Zero(t, b.runner.Stats().InFlight, "a call inside an ambient transaction publishes no flight, even with ShareInFlight true")

	wg.Add(1)
	go func() {
		defer wg.Done()
		txErrB = b.db.Tx(ctx, func(tx context.Context) error {
			bInTx = store.InTx(tx)
			resB, errB = b.k.Create(tx, in)
			return errB
		})
	}()
	// B cannot join A's (uncommitted) result: it queues on the unique index instead.
	waitForLockWaiters(t, b.db.DB, 1)
	g.Open()
	commit.AwaitHeld(t)               // A has returned from Create, its transaction not committed
	waitForLockWaiters(t, b.db.DB, 1) // and B is still queued behind it
	commit.Open()
	wg.Wait()

	require.True(t, bInTx)
	require.NoError(t, txErrA)
	require.NoError(t, txErrB)
	require.NoError(t, errA)
	require.NoError(t, errB)
	require.Equal(t, idemtype.Executed, resA.Outcome)
	require.Equal(t, idemtype.Replayed, resB.Outcome)
	require.True(t, resB.Waited)
	require.Equal(t, resA.Record.ID, resB.Record.ID)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM record`))
}

func TestConcurrentOptimisticLockingLetsExactlyOnePatchWin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := b.createNote(t, "alice", "base", "base")
	const n = 10
	got := newOutcomes()
	fire(n, func(i int) {
		got.add(b.k.Patch(context.Background(), model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID,
			Key: fmt.Sprintf("patch-%d", i), ExpectRevision: 1, Title: str(fmt.Sprintf("writer %d", i))}))
	})
	require.Equal(t, map[string]int{"EXECUTED": 1, "REVISION_CONFLICT": n - 1}, got.byName)
	for _, err := range got.errs {
		require.Equal(t, 409, apperr.As(err).Status())
	}
	require.Equal(t, []int{1, 2}, b.revisionsOf(t, "alice", rec.Record.ID))
	require.Equal(t, 2, b.currentRevision(t, "alice", rec.Record.ID))
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM idempotency_record`), "the losers' reservations rolled back")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_event WHERE action = 'RECORD_PATCHED'`))
	var title string
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT title FROM record`).Scan(&title))
	require.Equal(t, got.results[0].Record.Title, title)
}

func TestAStalePatchThatRacesPastPrepareStillGetsRevisionConflict(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	b := setup(t)
	rec := b.createNote(t, "alice", "base", "base")
	g := newGate(t)
	// B's writes are queued and reach the server with its COMMIT, so B is held after its
	// prepare (which sees revision 1 and passes) and its queued UPDATE; A then writes and commits
	// revision 2; released, B's UPDATE finds the row no longer at revision 1 and the server fails
	// it (and B's whole transaction).
	stale := b.k.WithFaults(func(_ context.Context, step string) error {
		if step == kernel.StepRecord {
			g.Hold()
		}
		return nil
	})
	var resA model.WriteResult
	var errA, errB error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, errB = stale.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, Key: "b", ExpectRevision: 1, Title: str("b")})
	}()
	g.AwaitHeld(t) // B passed prepare against revision 1 and queued its UPDATE
	resA, errA = b.k.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, Key: "a", ExpectRevision: 1, Title: str("a")})
	g.Open()
	wg.Wait()
	require.NoError(t, errA)
	require.Equal(t, 2, resA.Record.Revision)
	requireCode(t, errB, apperr.RevisionConflict)
	require.Equal(t, []int{1, 2}, b.revisionsOf(t, "alice", rec.Record.ID))
	require.Zero(t, b.count(t, `SELECT count(*) FROM idempotency_record WHERE idempotency_key = 'b'`))
}

// Across processes: the test binary re-executes itself; the children collide on one key.

const (
	helperEnvDSN     = "IDEMWORK_HELPER_DSN"
	helperEnvOwner   = "IDEMWORK_HELPER_OWNER"
	helperEnvRecord  = "IDEMWORK_HELPER_RECORD"
	helperEnvKey     = "IDEMWORK_HELPER_KEY"
	helperResultLine = "RESULT "
)

type helperResult struct {
	Outcome     string `json:"outcome"`
	Waited      bool   `json:"waited"`
	Revision    int    `json:"revision"`
	ExecutionID string `json:"executionId"`
	Error       string `json:"error"`
}

// TestHelperProcessRunsOneFeature is the child of the cross-process tests: it does nothing unless
// started by one of them with the helper environment.
func TestHelperProcessRunsOneFeature(t *testing.T) {
	dsn := os.Getenv(helperEnvDSN)
	if dsn == "" {
		return
	}
	ctx := context.Background()
	db, err := store.Open(ctx, dsn, store.Options{MaxConns: 2})
	require.NoError(t, err)
	defer db.Close()
	k := kernel.New(db, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
	require.NoError(t, db.Warm(ctx, 1))
	fmt.Println("READY")
	// The barrier: every child connects first, then all fire when the parent says so.
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "GO\n", line)
	res, err := k.RunFeature(ctx, model.FeatureInput{Owner: os.Getenv(helperEnvOwner), Module: kernel.ModuleNote,
		RecordID: os.Getenv(helperEnvRecord), FeatureID: "F01", Key: os.Getenv(helperEnvKey)})
	out := helperResult{}
	if err != nil {
		out.Error = string(apperr.CodeOf(err)) + ": " + err.Error()
	} else {
		out = helperResult{Outcome: string(res.Outcome), Waited: res.Waited, Revision: res.Record.Revision, ExecutionID: res.Execution.ID}
	}
	b, _ := json.Marshal(out)
	fmt.Println(helperResultLine + string(b))
}

type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	output strings.Builder
}

func startChild(t *testing.T, ctx context.Context, env ...string) *child {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcessRunsOneFeature$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	return c
}

// await returns the first line with prefix, failing if the child ends first.
func (c *child) await(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("child ended before printing %q; output so far:\n%s", prefix, c.output.String())
			}
			c.output.WriteString(l + "\n")
			if strings.HasPrefix(l, prefix) {
				return strings.TrimPrefix(l, prefix)
			}
		case <-timeout:
			t.Fatalf("child printed no %q in time", prefix)
		}
	}
}

func (c *child) result(t *testing.T) helperResult {
	t.Helper()
	var r helperResult
	require.NoError(t, json.Unmarshal([]byte(c.await(t, helperResultLine)), &r))
	for range c.lines { // drain to EOF so Wait can finish
	}
	require.NoError(t, c.cmd.Wait(), c.output.String())
	return r
}

func TestSameKeyAcrossProcessesExecutesOnceAndReplaysTheFirstRevisionAfterDrift(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rec := b.createNote(t, "alice", "xproc-base", "cross")
	env := []string{helperEnvDSN + "=" + b.db.DSN, helperEnvOwner + "=alice", helperEnvRecord + "=" + rec.Record.ID, helperEnvKey + "=xproc"}

	const procs = 4
	children := make([]*child, procs)
	for i := range children {
		children[i] = startChild(t, ctx, env...)
	}
	for _, c := range children {
		c.await(t, "READY")
	}
	// Hold the record row so the process that wins the key stays inside its transaction until
	// every other process has queued behind it on the unique index.
	lock, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = lock.Rollback(context.Background()) }()
	_, err = lock.Exec(ctx, `SELECT 1 FROM record WHERE owner_id = 'alice' AND id = $1 FOR UPDATE`, rec.Record.ID)
	require.NoError(t, err)
	for _, c := range children {
		_, err := io.WriteString(c.stdin, "GO\n")
		require.NoError(t, err)
		require.NoError(t, c.stdin.Close())
	}
	// One process waits on our row lock, the others on the winner's transaction.
	waitForLockWaiters(t, b.db.DB, procs)
	// A session that just queued can show another wait event for a moment: poll, do not sample.
	require.Eventually(t, func() bool {
		return b.count(t, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'transactionid'
			  AND query LIKE '%INSERT INTO %idempotency_record%'`) == procs-1
	}, 10*time.Second, 5*time.Millisecond, "the losers wait on the unique index")
	require.NoError(t, lock.Commit(ctx))

	tally := map[string]int{}
	var results []helperResult
	for _, c := range children {
		r := c.result(t)
		require.Empty(t, r.Error)
		tally[r.Outcome]++
		results = append(results, r)
	}
	require.Equal(t, map[string]int{"EXECUTED": 1, "REPLAYED": procs - 1}, tally, "no JOINED across processes")
	for _, r := range results {
		require.Equal(t, results[0].ExecutionID, r.ExecutionID)
		require.Equal(t, 2, r.Revision)
		require.Equal(t, r.Outcome == "REPLAYED", r.Waited, "every loser waited on the winner")
	}
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM feature_execution`), "exactly one execution row")
	require.Equal(t, []int{1, 2}, b.revisionsOf(t, "alice", rec.Record.ID), "exactly one new revision")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM idempotency_record WHERE idempotency_key = 'xproc'`))

	// Drift: the record moves on; a fresh process replaying the key gets the first result.
	_, err = b.k.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, Key: "drift", ExpectRevision: 2,
		Title: str("moved on"), Payload: raw(map[string]any{"archived": false})})
	require.NoError(t, err)
	late := startChild(t, ctx, env...)
	late.await(t, "READY")
	_, err = io.WriteString(late.stdin, "GO\n")
	require.NoError(t, err)
	require.NoError(t, late.stdin.Close())
	r := late.result(t)
	require.Empty(t, r.Error)
	require.Equal(t, "REPLAYED", r.Outcome)
	require.False(t, r.Waited)
	require.Equal(t, results[0].ExecutionID, r.ExecutionID)
	require.Equal(t, 2, r.Revision, "the replay returns the revision the feature wrote, not the latest")
	require.Equal(t, 3, b.currentRevision(t, "alice", rec.Record.ID))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM feature_execution`))
}

func TestAPatchQueuedBehindAnotherWritersRowLockGetsRevisionConflictWhenItCommits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := b.createNote(t, "alice", "base", "base")
	ctx := testdb.Context(t)

	// Another writer has moved the row to revision 2 and holds its lock, uncommitted.
	other, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = other.Rollback(ctx) }() // a no-op once committed
	_, err = other.Exec(ctx, `UPDATE record SET revision = 2, title = 'other' WHERE owner_id = 'alice' AND id = $1`, rec.Record.ID)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		// Prepare still reads revision 1 (the other write is not committed) and passes; the
		// guarded UPDATE then queues on the row lock inside this patch's commit.
		_, err := b.k.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, Key: "late", ExpectRevision: 1, Title: str("late")})
		done <- err
	}()
	waitForLockWaiters(t, b.db.DB, 1)
	require.NoError(t, other.Commit(ctx))
	err = <-done
	require.True(t, apperr.Is(err, apperr.RevisionConflict), "after the wait the server re-checks the row: %v", err)

	var keys, revisions int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM idempotency_record WHERE idempotency_key = 'late'),
		(SELECT count(*) FROM record_revision WHERE record_id = $1)`, rec.Record.ID).Scan(&keys, &revisions))
	require.Zero(t, keys, "the failed patch left no key")
	require.Equal(t, 1, revisions, "and no revision")
}
