package kernel_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store/reap"
)

func TestAStormRacingTheReaperStillExecutesOncePerKey(t *testing.T) {
	t.Parallel()
	b := setupWith(t, testdb.Options{MaxConns: 40})
	ctx := testdb.Context(t)
	// perKey workers per key, each sending its request rounds times in a row: requests keep
	// arriving after the key's new life committed, which is when a reaper that deleted a valid
	// row would let one of them execute again.
	const keys, perKey, rounds = 12, 8, 6
	create := func(i int) model.CreateInput {
		return model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: fmt.Sprintf("race-%02d", i), Title: "raced",
			Payload: raw(map[string]any{"i": i}), ShareInFlight: boolp(false)}
	}
	// Each key's first life, then every key expires: the storm below re-executes each once, while
	// the reaper deletes expired rows as fast as it can, one row per statement.
	for i := range keys {
		_, err := b.k.Create(ctx, create(i))
		require.NoError(t, err)
	}
	b.clock.Advance(idem.DefaultTTL + time.Minute)

	stop := make(chan struct{})
	var reaped, passes atomic.Int64
	var reapErr atomic.Value
	var reaper sync.WaitGroup
	reaper.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			res, err := reap.ReapExpired(ctx, b.db.DB, reap.ReapParams{Now: b.clock.Now(), Batch: 1})
			if err != nil {
				reapErr.Store(err)
				return
			}
			reaped.Add(res.Deleted)
			passes.Add(1)
		}
	})

	type result struct {
		key, outcome, recordID string
		err                    error
	}
	results := make(chan result, keys*perKey*rounds)
	release := make(chan struct{})
	var storm sync.WaitGroup
	for i := range keys {
		for range perKey {
			storm.Go(func() {
				<-release
				for range rounds {
					res, err := b.k.Create(ctx, create(i))
					r := result{key: create(i).Key, err: err}
					if err == nil {
						r.outcome, r.recordID = string(res.Outcome), res.Record.ID
					}
					results <- r
				}
			})
		}
	}
	close(release)
	storm.Wait()
	// Let the reaper run on past the storm, a few passes: it must find nothing more to delete.
	after := passes.Load()
	require.Eventually(t, func() bool { return passes.Load() >= after+5 }, 30*time.Second, time.Millisecond)
	close(stop)
	reaper.Wait()
	close(results)
	require.Nil(t, reapErr.Load(), "the reaper never failed")

	executed := map[string]int{}
	recordOf := map[string]map[string]bool{}
	for r := range results {
		require.NoError(t, r.err, "key %s", r.key)
		if r.outcome == string(idemtype.Executed) {
			executed[r.key]++
		}
		if recordOf[r.key] == nil {
			recordOf[r.key] = map[string]bool{}
		}
		recordOf[r.key][r.recordID] = true
	}
	for i := range keys {
		k := create(i).Key
		require.Equal(t, 1, executed[k], "key %s executed exactly once in its new life", k)
		require.Len(t, recordOf[k], 1, "every request of key %s got the same record", k)
		require.Equal(t, 2, b.count(t, `SELECT count(*) FROM record_revision WHERE idempotency_key = $1`, k), "one revision per life of key %s", k)
	}
	require.Equal(t, keys, b.count(t, `SELECT count(*) FROM idempotency_record WHERE status = 'SUCCEEDED' AND expires_at > $1`, b.clock.Now()))
	t.Logf("the reaper deleted %d expired rows during the storm", reaped.Load())
}
