package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/testdb"
)

func TestACacheHitRunsNeitherPrepareNorWork(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	req := idem.Request{Owner: "alice", Key: "k1"}
	first, err := b.run(ctx, req, "one")
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, first.Outcome)
	require.Equal(t, int32(1), b.prepares.Load())
	require.Equal(t, int32(1), b.works.Load())
	require.Zero(t, b.restores.Load(), "the executing call returns its own value")

	for i := 0; i < 3; i++ {
		again, err := b.run(ctx, req, "one")
		require.NoError(t, err)
		require.Equal(t, idemtype.Replayed, again.Outcome)
		require.False(t, again.Waited)
		require.Equal(t, first.Value, again.Value)
		require.JSONEq(t, string(first.Envelope), string(again.Envelope))
		require.Equal(t, first.Fingerprint, again.Fingerprint)
	}
	require.Equal(t, int32(1), b.prepares.Load(), "a hit never runs prepare")
	require.Equal(t, int32(1), b.works.Load(), "a hit never runs work")
	require.Equal(t, int32(3), b.restores.Load(), "each hit restores through the policy")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM widget`))
	require.JSONEq(t, `{"schemaVersion":1,"policy":"widget-reference-v1","result":{"widgetId":"`+first.Value.ID+`"}}`, string(first.Envelope))
}

func TestWithoutAKeyEveryCallExecutesAndNothingIsRecorded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := 0; i < 2; i++ {
		res, err := b.run(context.Background(), idem.Request{Owner: "alice"}, "x")
		require.NoError(t, err)
		require.Equal(t, idemtype.Executed, res.Outcome)
		require.Nil(t, res.Envelope)
	}
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM widget`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM idem.idempotency_record`))
}

func TestPrepareRunsOnlyAfterTheReservationInsideTheSameTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var status string
	var workSees int
	prepare := func(ctx context.Context, tx idem.Querier) (int, error) {
		err := tx.QueryRow(ctx, `SELECT status FROM idem.idempotency_record WHERE owner_id = 'alice' AND idempotency_key = 'k'`).Scan(&status)
		return 0, err
	}
	work := func(ctx context.Context, tx *idem.Tx, _ int) (widget, error) {
		w := widget{ID: "w1", Owner: "alice", Module: "W", Label: "l"}
		if _, err := tx.Exec(ctx, `INSERT INTO widget VALUES ('alice', 'w1', 'W', 'l')`); err != nil {
			return widget{}, err
		}
		err := tx.QueryRow(ctx, `SELECT count(*) FROM widget`).Scan(&workSees)
		return w, err
	}
	res, err := idem.RunPrepared(context.Background(), b.runner, idem.Request{Owner: "alice", Key: "k", Operation: "W:widget:create", Module: "W"},
		idem.ResultPolicy[widget](b.policy), prepare, work)
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, res.Outcome)
	require.Equal(t, "PROCESSING", status, "prepare runs in the request's transaction and sees its own reservation")
	require.Equal(t, 1, workSees, "work's statements run at once, in the transaction")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM widget`))
}

// A work's statements run at once in the transaction; what it queues travels with the success
// row and COMMIT. Both commit with the key, and an error from work sends nothing it queued.
func TestWorkWritesAtOnceOrQueuedAndBothCommitWithTheKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	req := idem.Request{Owner: "alice", Key: "both", Operation: "W:widget:create", Module: "W", Body: []byte(`{}`)}
	res, err := idem.Run(ctx, b.runner, req, idem.ResultPolicy[widget](b.policy), func(ctx context.Context, tx *idem.Tx) (widget, error) {
		if _, err := tx.Exec(ctx, `INSERT INTO widget VALUES ('alice', 'now', 'W', 'at once')`); err != nil {
			return widget{}, err
		}
		tx.Queue(`INSERT INTO widget VALUES ('alice', 'later', 'W', 'queued')`)
		require.Equal(t, 1, tx.Queued())
		require.Error(t, tx.Commit(ctx), "the runner commits, not the work")
		return widget{ID: "now", Owner: "alice", Module: "W", Label: "at once"}, nil
	})
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, res.Outcome)
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM widget`))

	boom := errors.New("boom")
	req.Key = "neither"
	_, err = idem.Run(ctx, b.runner, req, idem.ResultPolicy[widget](b.policy), func(ctx context.Context, tx *idem.Tx) (widget, error) {
		if _, err := tx.Exec(ctx, `INSERT INTO widget VALUES ('alice', 'now2', 'W', 'at once')`); err != nil {
			return widget{}, err
		}
		tx.Queue(`INSERT INTO widget VALUES ('alice', 'later2', 'W', 'queued')`)
		return widget{}, boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM widget`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM idem.idempotency_record WHERE idempotency_key = 'neither'`))

	// A queued write the server refuses fails the call and takes everything with it.
	req.Key = "refused"
	_, err = idem.Run(ctx, b.runner, req, idem.ResultPolicy[widget](b.policy), func(ctx context.Context, tx *idem.Tx) (widget, error) {
		tx.Queue(`INSERT INTO widget VALUES ('alice', 'now', 'W', 'duplicate id')`)
		return widget{ID: "now", Owner: "alice", Module: "W", Label: "x"}, nil
	})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23505", pgErr.Code)
	require.Zero(t, b.count(t, `SELECT count(*) FROM idem.idempotency_record WHERE idempotency_key = 'refused'`))
	res, err = b.run(ctx, idem.Request{Owner: "alice", Key: "refused"}, "ok")
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, res.Outcome, "the key is free again")
}

func TestAnErrorFromPrepareOrWorkRollsEverythingBackAndCachesNoFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	boom := errors.New("boom")
	for _, failIn := range []string{"prepare", "work"} {
		key := "fail-" + failIn
		prepare := func(ctx context.Context, _ idem.Querier) (string, error) {
			if failIn == "prepare" {
				return "", apperr.New(apperr.ValidationFailed, "label: bad")
			}
			return "l", nil
		}
		work := func(ctx context.Context, tx *idem.Tx, l string) (widget, error) {
			if _, err := tx.Exec(ctx, `INSERT INTO widget VALUES ('alice', $1, 'W', $2)`, key, l); err != nil {
				return widget{}, err
			}
			return widget{}, boom
		}
		_, err := idem.RunPrepared(ctx, b.runner, idem.Request{Owner: "alice", Key: key, Operation: "W:widget:create", Module: "W"},
			idem.ResultPolicy[widget](b.policy), prepare, work)
		require.Error(t, err)
		require.Zero(t, b.count(t, `SELECT count(*) FROM widget`), failIn)
		require.Zero(t, b.count(t, `SELECT count(*) FROM idem.idempotency_record`), failIn)
		res, err := b.run(ctx, idem.Request{Owner: "alice", Key: key}, "ok")
		require.NoError(t, err)
		require.Equal(t, idemtype.Executed, res.Outcome, "the key is free after a failure")
		b.exec(t, `DELETE FROM widget`)
		b.exec(t, `DELETE FROM idem.idempotency_record`)
	}
}

func TestAPolicyThatSerializesMoreThanItsWhitelistFailsClosedAndRollsBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	leaky := leakyPolicy{b.policy}
	_, err := idem.RunPrepared(context.Background(), b.runner, idem.Request{Owner: "alice", Key: "leak", Operation: "W:widget:create", Module: "W"},
		idem.ResultPolicy[widget](leaky), func(context.Context, idem.Querier) (string, error) { return "secret label", nil },
		func(ctx context.Context, tx *idem.Tx, l string) (widget, error) {
			_, err := tx.Exec(ctx, `INSERT INTO widget VALUES ('alice', 'w', 'W', $1)`, l)
			return widget{ID: "w", Label: l}, err
		})
	ae := requireCode(t, err, apperr.Internal)
	require.Contains(t, ae.Message, "label")
	require.Zero(t, b.count(t, `SELECT count(*) FROM widget`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM idem.idempotency_record`))
}

// leakyPolicy adds the widget's label to its result: the envelope guard must refuse it.
type leakyPolicy struct{ widgetPolicy }

func (leakyPolicy) Serialize(w widget) (json.RawMessage, error) {
	return json.Marshal(map[string]string{"widgetId": w.ID, "label": w.Label})
}

// renamedPolicy restores like widgetPolicy under another name: changed restore semantics.
type renamedPolicy struct{ widgetPolicy }

func (renamedPolicy) Name() string { return "widget-reference-v2" }

func TestAStoredPolicyNameThatDiffersFromTheOperationsPolicyFailsClosed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.run(ctx, idem.Request{Owner: "alice", Key: "k"}, "l")
	require.NoError(t, err)
	_, err = idem.RunPrepared(ctx, b.runner, idem.Request{Owner: "alice", Key: "k", Operation: "W:widget:create", Module: "W", Body: []byte(`{"label":"l"}`)},
		idem.ResultPolicy[widget](renamedPolicy{b.policy}), func(context.Context, idem.Querier) (string, error) { return "l", nil },
		func(context.Context, *idem.Tx, string) (widget, error) {
			t.Fatal("work must not run")
			return widget{}, nil
		})
	ae := requireCode(t, err, apperr.PolicyMismatch)
	require.Equal(t, 500, ae.Status())
	require.Contains(t, ae.Message, widgetPolicyName)
	require.Contains(t, ae.Message, "widget-reference-v2")
}

func TestTheOperationIsCheckedBeforeTheFingerprintAndBothBeforeRestore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.run(ctx, idem.Request{Owner: "alice", Key: "k"}, "l")
	require.NoError(t, err)
	_, err = b.run(ctx, idem.Request{Owner: "alice", Key: "k", Operation: "W:widget:other"}, "different body")
	requireCode(t, err, apperr.ScopeConflict)
	_, err = b.run(ctx, idem.Request{Owner: "alice", Key: "k"}, "different body")
	ae := requireCode(t, err, apperr.KeyReused)
	require.Equal(t, 422, ae.Status())
	require.Zero(t, b.restores.Load(), "nothing is restored for a conflicting request")
	require.Equal(t, int32(1), b.works.Load())
	// Another owner's identical key is untouched by all of it.
	res, err := b.run(ctx, idem.Request{Owner: "bob", Key: "k", Operation: "W:widget:other"}, "different body")
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, res.Outcome)
}

func TestTheFingerprintIsVersionedAndCoversOperationAndBody(t *testing.T) {
	t.Parallel()
	fp := func(op, body string) string {
		s := idem.Fingerprint(op, []byte(body))
		require.Len(t, s, len("v2:")+64)
		require.Equal(t, 2, idem.FingerprintVersion(s))
		return s
	}
	require.Equal(t, fp("op", `{"a": 1}`), fp("op", `{"a": 1}`))
	require.NotEqual(t, fp("op", `{"a": 1}`), fp("op2", `{"a": 1}`), "the operation is part of it")
	require.NotEqual(t, fp("op", `{"a": 1}`), fp("op", `{"a": 1.0}`), "1 and 1.0 are different requests (jsonb keeps 1.0)")
	require.NotEqual(t, fp("op", `{"a": "x"}`), fp("op", `{"a": "y"}`))
}

func TestKeysAndOwnersOutsideTheirAlphabetsAreRejectedBeforeAnythingRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, key := range []string{strings.Repeat("k", 256), "with space", "tab\t", "nul\x00", "del\x7f", "é", "\n"} {
		_, err := b.run(ctx, idem.Request{Owner: "alice", Key: key}, "l")
		ae := requireCode(t, err, apperr.ValidationFailed)
		require.True(t, strings.HasPrefix(ae.Message, "key:"), ae.Message)
	}
	for _, owner := range []string{"", strings.Repeat("o", 129), "a b", "a/b", "ä", "a\x00", "a;drop"} {
		_, err := b.run(ctx, idem.Request{Owner: owner, Key: "k"}, "l")
		ae := requireCode(t, err, apperr.ValidationFailed)
		require.True(t, strings.HasPrefix(ae.Message, "owner:"), ae.Message)
	}
	require.Zero(t, b.prepares.Load())
	require.Zero(t, b.count(t, `SELECT count(*) FROM idem.idempotency_record`))

	res, err := b.run(ctx, idem.Request{Owner: strings.Repeat("o", 128), Key: strings.Repeat("~", 255)}, "l")
	require.NoError(t, err, "the limits themselves are allowed")
	require.Equal(t, idemtype.Executed, res.Outcome)
	res, err = b.run(ctx, idem.Request{Owner: "Aa0._:@-", Key: "!\"#$%&'()*+,-./0123456789:;<=>?@[\\]^_`{|}~"}, "l")
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, res.Outcome)
}

func TestTheTTLComesFromOptionsAndAReplayNeverExtendsIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := idem.NewRunner(idem.PoolDriver(b.pool), idem.Options{Schema: runnerSchema, TTL: time.Hour, Clock: b.clock})
	require.Equal(t, time.Hour, r.TTL())
	run := func() idem.Result[widget] {
		res, err := idem.RunPrepared(ctx, r, idem.Request{Owner: "alice", Key: "ttl", Operation: "W:widget:create", Module: "W"},
			idem.ResultPolicy[widget](b.policy), func(context.Context, idem.Querier) (string, error) { b.prepares.Add(1); return "l", nil },
			func(ctx context.Context, tx *idem.Tx, l string) (widget, error) {
				w := widget{ID: time.Now().Format("150405.000000000"), Owner: "alice", Module: "W", Label: l}
				_, err := tx.Exec(ctx, `INSERT INTO widget VALUES ($1, $2, $3, $4)`, w.Owner, w.ID, w.Module, w.Label)
				return w, err
			})
		require.NoError(t, err)
		return res
	}
	first := run()
	var created, expires time.Time
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT created_at, expires_at FROM idem.idempotency_record`).Scan(&created, &expires))
	require.Equal(t, time.Hour, expires.Sub(created))
	b.clock.Advance(59 * time.Minute)
	require.Equal(t, idemtype.Replayed, run().Outcome)
	var expires2 time.Time
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT expires_at FROM idem.idempotency_record`).Scan(&expires2))
	require.True(t, expires.Equal(expires2))
	b.clock.Advance(2 * time.Minute)
	again := run()
	require.Equal(t, idemtype.Executed, again.Outcome, "an expired key executes again")
	require.NotEqual(t, first.Value.ID, again.Value.ID)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM idem.idempotency_record`))
}

func TestAFollowerWithAnotherBodyDoesNotJoinAndGetsKeyReuseFromTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	b := setup(t)
	g := newGate(t)
	var wg sync.WaitGroup
	var leaderErr, followerErr error
	var leader idem.Result[widget]
	wg.Add(1)
	go func() {
		defer wg.Done()
		leader, leaderErr = b.runHeld(ctx, idem.Request{Owner: "alice", Key: "k"}, "one", held{g: g})
	}()
	g.AwaitHeld(t)
	require.Equal(t, 1, b.runner.Stats().InFlight)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, followerErr = b.run(ctx, idem.Request{Owner: "alice", Key: "k"}, "two")
	}()
	// It queues on the unique index instead of sharing a result computed for another body.
	for i := 0; ; i++ {
		n := b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
		if n == 1 {
			break
		}
		require.Less(t, i, 1000, "the follower never queued on the database")
		time.Sleep(10 * time.Millisecond)
	}
	g.Open()
	wg.Wait()
	require.NoError(t, leaderErr)
	require.Equal(t, idemtype.Executed, leader.Outcome)
	requireCode(t, followerErr, apperr.KeyReused)
	require.Zero(t, b.runner.Stats().InFlight)
}

func TestSameKeyGoroutinesRunWorkOnceAndShareTheLeadersValue(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	b := setup(t)
	const n = 12
	var mu sync.Mutex
	tally := map[idemtype.Outcome]int{}
	ids := map[string]bool{}
	var wg, start sync.WaitGroup
	start.Add(1)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait()
			res, err := b.run(ctx, idem.Request{Owner: "alice", Key: "same"}, "v")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				tally["error: "+idemtype.Outcome(err.Error())]++
				return
			}
			tally[res.Outcome]++
			ids[res.Value.ID] = true
		}()
	}
	start.Done()
	wg.Wait()
	require.Equal(t, 1, tally[idemtype.Executed], "%v", tally)
	require.Equal(t, n-1, tally[idemtype.Joined]+tally[idemtype.Replayed], "%v", tally)
	require.Len(t, ids, 1)
	require.Equal(t, int32(1), b.works.Load())
	require.Equal(t, int32(1), b.prepares.Load())
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM widget`))
}

func TestAnExplicitShareInFlightCannotOverrideTheCallersTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testdb.Context(t)
	g := newGate(t)
	var wg sync.WaitGroup
	var txErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		txErr = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			_, err := b.runHeld(ctx, idem.Request{Owner: "alice", Key: "k", ShareInFlight: boolp(true), Tx: tx}, "v", held{g: g})
			return err
		})
	}()
	g.AwaitHeld(t)
	require.Zero(t, b.runner.Stats().InFlight, "inside the caller's transaction nothing is published")
	g.Open()
	wg.Wait()
	require.NoError(t, txErr)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM idem.idempotency_record WHERE idempotency_key = 'k' AND status = 'SUCCEEDED'`),
		"the caller committed the key with its transaction")

	// ShareInFlight false publishes nothing either.
	g2 := newGate(t)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, txErr = b.runHeld(ctx, idem.Request{Owner: "alice", Key: "k2", ShareInFlight: boolp(false)}, "v", held{g: g2})
	}()
	g2.AwaitHeld(t)
	require.Zero(t, b.runner.Stats().InFlight)
	g2.Open()
	wg.Wait()
	require.NoError(t, txErr)

	// With sharing on (nil), a flight is published while the call runs.
	g3 := newGate(t)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, txErr = b.runHeld(ctx, idem.Request{Owner: "alice", Key: "k3"}, "v", held{g: g3})
	}()
	g3.AwaitHeld(t)
	require.Equal(t, 1, b.runner.Stats().InFlight)
	g3.Open()
	wg.Wait()
	require.NoError(t, txErr)
}

// In the caller's transaction the key, the work's writes and the success row are the caller's
// to commit: rolled back, none of them remains and the key is free; committed, a replay returns
// the first result.
func TestACallInTheCallersTransactionCommitsOrRollsBackWithIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	res, err := b.run(ctx, idem.Request{Owner: "alice", Key: "k", Tx: tx}, "v")
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, res.Outcome)
	require.NoError(t, tx.Rollback(ctx))
	require.Zero(t, b.count(t, `SELECT count(*) FROM widget`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM idem.idempotency_record`))

	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		res, err = b.run(ctx, idem.Request{Owner: "alice", Key: "k", Tx: tx}, "v")
		return err
	}))
	require.Equal(t, idemtype.Executed, res.Outcome)
	again, err := b.run(ctx, idem.Request{Owner: "alice", Key: "k"}, "v")
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, again.Outcome)
	require.Equal(t, res.Value, again.Value)
	require.Equal(t, string(res.Envelope), string(again.Envelope))
}

func TestTheOffsetClockMovesAndResets(t *testing.T) {
	t.Parallel()
	var c idem.OffsetClock
	require.WithinDuration(t, time.Now(), c.Now(), time.Second)
	c.Advance(48 * time.Hour)
	require.Equal(t, 48*time.Hour, c.Offset())
	require.WithinDuration(t, time.Now().Add(48*time.Hour), c.Now(), time.Second)
	require.Equal(t, time.UTC, c.Now().Location())
	require.Zero(t, c.Now().Nanosecond()%1000, "microsecond precision, as timestamptz stores it")
	c.Reset()
	require.Zero(t, c.Offset())
}

// leadHeld starts a leader for req (a widget labelled "v") held at its SUCCEEDED step by g, and
// returns once it is held; result waits for the leader's end (open g first).
func leadHeld(t *testing.T, b *testBundle, g *gate, req idem.Request) (result func() (idem.Result[widget], error)) {
	t.Helper()
	ctx := testdb.Context(t)
	var res idem.Result[widget]
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = b.runHeld(ctx, req, "v", held{g: g})
	}()
	g.AwaitHeld(t)
	return func() (idem.Result[widget], error) {
		<-done
		return res, err
	}
}

// A follower waits for its leader only as long as its own context lets it: cancelled while
// parked, it returns the context's error and joins nothing, and the leader and the other
// followers (with contexts of their own, as every caller's can be cancelled) are unaffected.
func TestAParkedFollowerWhoseContextEndsLeavesAndTheOthersStillJoin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	g := newGate(t)
	request := func() idem.Request {
		return idem.Request{Owner: "alice", Key: "k", Module: "W", Operation: "W:widget:create", Body: []byte(`{"label":"v"}`)}
	}
	leaderResult := leadHeld(t, b, g, request())

	type joinResult struct {
		res idem.Result[widget]
		err error
	}
	follow := func(ctx context.Context) chan joinResult {
		c := make(chan joinResult, 1)
		go func() {
			res, err := b.run(ctx, request(), "v")
			c <- joinResult{res, err}
		}()
		return c
	}
	leaving, leave := context.WithCancel(context.Background())
	defer leave()
	staying, stay := context.WithCancel(context.Background())
	defer stay()
	left, joined := follow(leaving), follow(staying)
	require.Eventually(t, func() bool { return b.runner.Stats().Followers == 2 }, 10*time.Second, time.Millisecond)

	leave()
	var l joinResult
	select {
	case l = <-left:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower whose context was cancelled is still waiting for the leader")
	}
	require.ErrorIs(t, l.err, context.Canceled)
	require.Eventually(t, func() bool { return b.runner.Stats().Followers == 1 }, 10*time.Second, time.Millisecond,
		"the other follower is still parked")

	g.Open()
	leader, err := leaderResult()
	require.NoError(t, err)
	j := <-joined
	require.NoError(t, j.err)
	require.Equal(t, idemtype.Joined, j.res.Outcome)
	require.Equal(t, leader.Value, j.res.Value)
	require.Equal(t, int32(1), b.works.Load(), "one execution")
}

// RunPrepared joins a running leader for the same request: its followers park on the flight, never on the database, and share the
// leader's value.
func TestRunPreparedFollowersParkOnTheLeadersFlightAndShareItsValue(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	b := setup(t)
	g := newGate(t)
	var wg sync.WaitGroup
	var leader idem.Result[widget]
	var leaderErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		leader, leaderErr = b.runHeld(ctx, idem.Request{Owner: "alice", Key: "k"}, "v", held{g: g})
	}()
	g.AwaitHeld(t)
	const followers = 5
	results, errs := b.followers(&wg, followers, idem.Request{Owner: "alice", Key: "k"}, "v")
	require.Eventually(t, func() bool { return b.runner.Stats().Followers == followers }, 15*time.Second, time.Millisecond,
		"every follower parks on the flight (none queues on the unique index)")
	require.Zero(t, b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`))
	g.Open()
	wg.Wait()
	require.NoError(t, leaderErr)
	require.Equal(t, idemtype.Executed, leader.Outcome)
	for i := range followers {
		require.NoError(t, errs[i])
		require.Equal(t, idemtype.Joined, results[i].Outcome)
		require.Equal(t, leader.Value, results[i].Value)
		require.Equal(t, leader.Fingerprint, results[i].Fingerprint)
		require.Equal(t, leader.Envelope, results[i].Envelope)
	}
	require.Equal(t, int32(1), b.works.Load())
	require.Zero(t, b.runner.Stats().Followers)
}

// A leader's failure is never handed to the followers that joined it through RunPrepared: each
// takes the database path itself, so exactly one of them executes and the rest share or replay.
func TestRunPreparedFollowersOfAFailedLeaderTakeTheDatabasePathThemselves(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	b := setup(t)
	g := newGate(t)
	boom := errors.New("the leader fails")
	var wg sync.WaitGroup
	var leaderErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, leaderErr = b.runHeld(ctx, idem.Request{Owner: "alice", Key: "k"}, "v", held{g: g, fail: boom})
	}()
	g.AwaitHeld(t)
	const followers = 4
	results, errs := b.followers(&wg, followers, idem.Request{Owner: "alice", Key: "k"}, "v")
	require.Eventually(t, func() bool { return b.runner.Stats().Followers == followers }, 15*time.Second, time.Millisecond)
	g.Open()
	wg.Wait()
	require.ErrorIs(t, leaderErr, boom)
	tally := map[idemtype.Outcome]int{}
	for i := range followers {
		require.NoError(t, errs[i], "a follower never inherits the leader's error")
		tally[results[i].Outcome]++
	}
	require.Equal(t, 1, tally[idemtype.Executed], "%v", tally)
	require.Equal(t, followers-1, tally[idemtype.Joined]+tally[idemtype.Replayed], "%v", tally)
	require.Equal(t, int32(2), b.works.Load(), "the failed leader's work and one follower's")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM widget`))
}

// followers starts n calls of req in goroutines counted by wg; their results land in the slices
// once wg is done.
func (b *testBundle) followers(wg *sync.WaitGroup, n int, req idem.Request, label string) ([]idem.Result[widget], []error) {
	results := make([]idem.Result[widget], n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = b.run(context.Background(), req, label)
		}()
	}
	return results, errs
}

// A call that fails in the caller's transaction after reserving its key leaves nothing the
// caller could commit: its COMMIT answers ROLLBACK, so neither the PROCESSING reservation (which
// would answer IDEMPOTENCY_IN_PROGRESS for a day) nor the work's writes stand, and the key is
// free for the retry. A call refused before it reserved (the key's first request differs)
// leaves the transaction usable.
func TestAFailedCallInTheCallersTransactionCannotCommitItsReservation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	failing := func(tx pgx.Tx) error {
		_, err := idem.Run(ctx, b.runner, idem.Request{Owner: "alice", Key: "kf", Module: "W", Operation: "W:widget:create", Body: []byte(`{}`), Tx: tx},
			b.policy, func(ctx context.Context, tx *idem.Tx) (widget, error) {
				if _, err := tx.Exec(ctx, `INSERT INTO widget (owner_id, id, module, label) VALUES ('alice', 'half', 'W', 'half-done')`); err != nil {
					return widget{}, err
				}
				return widget{}, apperr.New(apperr.ValidationFailed, "the work refused after its first write")
			})
		return err
	}
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	require.Equal(t, apperr.ValidationFailed, apperr.CodeOf(failing(tx)))
	require.ErrorIs(t, tx.Commit(ctx), pgx.ErrTxCommitRollback, "the caller's COMMIT of a failed call rolls back")
	require.Zero(t, b.count(t, `SELECT count(*) FROM widget`), "the work's write did not commit")
	require.Zero(t, b.count(t, `SELECT count(*) FROM idem.idempotency_record`), "no PROCESSING reservation was left")

	res, err := b.run(ctx, idem.Request{Owner: "alice", Key: "kf", Body: []byte(`{}`)}, "v")
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, res.Outcome, "the key is free for the retry")

	tx, err = b.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = b.run(ctx, idem.Request{Owner: "alice", Key: "kf", Body: []byte(`{"other":1}`), Tx: tx}, "v")
	require.Equal(t, apperr.KeyReused, apperr.CodeOf(err))
	var one int
	require.NoError(t, tx.QueryRow(ctx, `SELECT 1`).Scan(&one), "a call refused before reserving leaves the transaction usable")
	require.NoError(t, tx.Commit(ctx))
}
