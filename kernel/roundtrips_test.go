package kernel_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// tracedKernel is a kernel (with a runner of its own) over a pool on db's database whose round
// trips w records (each statement by its first three words).
func tracedKernel(t *testing.T, db *testdb.DB) (*kernel.Kernel, *testdb.Trips) {
	t.Helper()
	w := &testdb.Trips{Words: 3}
	sdb, err := store.Open(context.Background(), db.DSN, store.Options{MaxConns: 1, Tracer: w})
	require.NoError(t, err)
	t.Cleanup(sdb.Close)
	k := kernel.New(sdb, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
	w.Take()
	return k, w
}

// Round trips on the wire (issues 16 and 27): a fresh key's create takes one — BEGIN, the key
// read, the reservation, the writes (guarded on the reservation), SUCCEEDED and COMMIT — because
// its prepare reads nothing and runs before it; a feature run, whose prepare reads the record,
// takes two — BEGIN, the key read, the reservation and the record's locking read in the first;
// the writes, SUCCEEDED and COMMIT in the second; the replay of a key this process answered takes
// one, the key read alone. A replay of a create another process committed takes one too: the
// same round trip as a fresh key's, whose reservation finds the key taken, whose writes do
// nothing, and whose key read answers it.
func TestAFreshKeyTakesOneRoundTripAFeatureRunTwoAndAReplayOne(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	k, w := tracedKernel(t, db)
	ctx := context.Background()
	noShare := false
	create := func(key string) model.CreateInput {
		return model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: key, Title: "n", ShareInFlight: &noShare}
	}
	feature := func(id, key string) model.FeatureInput {
		return model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: id, FeatureID: "F01", Key: key, ShareInFlight: &noShare}
	}
	// Warm the connection's statement cache: every statement is prepared once.
	warm, err := k.Create(ctx, create("warm-c"))
	require.NoError(t, err)
	_, err = k.RunFeature(ctx, feature(warm.Record.ID, "warm-f"))
	require.NoError(t, err)
	_, err = k.Create(ctx, create("warm-c"))
	require.NoError(t, err)
	_, err = k.RunFeature(ctx, feature(warm.Record.ID, "warm-f"))
	require.NoError(t, err)
	w.Take()

	reserve := "batch[begin; settings; select k.operation, k.fingerprint,; with ins as"
	created, err := k.Create(ctx, create("fresh-c"))
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, created.Outcome)
	oneTrip := reserve + "; insert into record; insert into record_revision; insert into audit_event; with u as; commit]"
	require.Equal(t, []string{oneTrip}, w.Take())

	ran, err := k.RunFeature(ctx, feature(created.Record.ID, "fresh-f"))
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, ran.Outcome)
	require.Equal(t, []string{reserve + "; select id, owner_id,]",
		"batch[with u as; insert into record_revision; insert into feature_execution; insert into audit_event; with u as; commit]"}, w.Take())

	replayed, err := k.Create(ctx, create("fresh-c"))
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, replayed.Outcome)
	require.Equal(t, []string{"batch[begin; settings; select k.operation, k.fingerprint,; commit]"}, w.Take())
	replayedRun, err := k.RunFeature(ctx, feature(created.Record.ID, "fresh-f"))
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, replayedRun.Outcome)
	require.Len(t, w.Take(), 1)

	// Another process's runner has answered neither key.
	other, ow := tracedKernel(t, db)
	_, err = other.Create(ctx, create("warm-c")) // its statement cache
	require.NoError(t, err)
	ow.Take()
	fromOther, err := other.Create(ctx, create("fresh-c"))
	require.NoError(t, err)
	require.Equal(t, idemtype.Replayed, fromOther.Outcome)
	require.False(t, fromOther.Waited)
	require.Equal(t, *created.Record, *fromOther.Record)
	require.Equal(t, []string{oneTrip}, ow.Take())
	// Once it has answered the key, its next replay is the read alone.
	_, err = other.Create(ctx, create("fresh-c"))
	require.NoError(t, err)
	require.Equal(t, []string{"batch[begin; settings; select k.operation, k.fingerprint,; commit]"}, ow.Take())
}

// A feature run's locking read travels with the reservation but runs only for the transaction
// that won it: a replay of a key committed by another process (whose reservation finds the key
// taken) reads the key and locks nothing — the record row keeps the xmax it had, where a row
// lock taken by the replay would have stamped its own transaction id there — and it writes
// nothing.
func TestAReplayWhoseReservationLostLocksNoRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	noShare := false
	note, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "n", Title: "n", ShareInFlight: &noShare})
	require.NoError(t, err)
	in := model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, FeatureID: "F01", Key: "f", ShareInFlight: &noShare}
	_, err = b.k.RunFeature(ctx, in)
	require.NoError(t, err)
	xmax := func() string {
		var x string
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT xmax::text FROM record WHERE id = $1`, note.Record.ID).Scan(&x))
		return x
	}
	before := xmax()
	for range 3 {
		other := kernel.New(b.db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
		res, err := other.RunFeature(ctx, in)
		require.NoError(t, err)
		require.Equal(t, idemtype.Replayed, res.Outcome)
	}
	require.Equal(t, before, xmax(), "a replay took a row lock on the record")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM feature_execution`))
}

// Feature runs on one record under the same key and under other keys, all at once, without
// sharing: the locks are always taken in one order — the key (the reservation INSERT, which
// waits on the unique index behind a transaction holding the key, holding no record lock while
// it waits) and then the record — so nothing deadlocks; each key executes exactly once, the
// record's revisions follow one another with one per executed key, and every same-key loser
// replays its key's first result, having waited for it.
func TestSameKeyAndOtherKeyFeatureRunsOnOneRecordNeitherDeadlockNorRunTwice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	noShare := false
	note, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "rec", Title: "n", ShareInFlight: &noShare})
	require.NoError(t, err)

	// The first run holds its key and the record's lock until let go.
	g := newGate(t)
	held := b.k.WithFaults(func(_ context.Context, step string) error {
		if step == kernel.StepSucceeded {
			g.Hold()
		}
		return nil
	})
	in := func(key string) model.FeatureInput {
		return model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, FeatureID: "F01", Key: key,
			ShareInFlight: &noShare}
	}
	type answer struct {
		key string
		res model.WriteResult
		err error
	}
	answers := make(chan answer, 32)
	var wg sync.WaitGroup
	run := func(k *kernel.Kernel, key string) {
		wg.Go(func() {
			res, err := k.RunFeature(ctx, in(key))
			answers <- answer{key, res, err}
		})
	}
	run(held, "k0")
	g.AwaitHeld(t)
	// Behind it: same-key runs wait on the unique index; other-key runs reserve their keys and
	// wait for the record's lock.
	const same, others = 4, 4
	for i := range same + others {
		key := "k0"
		if i >= same {
			key = "k" + string(rune('1'+i-same))
		}
		run(b.k, key)
	}
	waitForLockWaiters(t, b.db.DB, same+others)
	g.Open()
	wg.Wait()
	close(answers)

	executed := map[string]model.WriteResult{}
	var replays []answer
	for a := range answers {
		require.NoError(t, a.err, a.key)
		switch a.res.Outcome {
		case idemtype.Executed:
			require.NotContains(t, executed, a.key, "key %s executed twice", a.key)
			executed[a.key] = a.res
		case idemtype.Replayed:
			replays = append(replays, a)
		default:
			t.Fatalf("%s: outcome %s", a.key, a.res.Outcome)
		}
	}
	require.Len(t, executed, 1+others)
	require.Len(t, replays, same)
	for _, r := range replays {
		require.Equal(t, "k0", r.key)
		require.True(t, r.res.Waited, "a same-key run queued behind the first")
		require.Equal(t, executed["k0"].Record.Revision, r.res.Record.Revision)
		require.Equal(t, executed["k0"].Execution.ID, r.res.Execution.ID)
	}
	revisions := map[int]string{}
	for key, res := range executed {
		require.NotContains(t, revisions, res.Record.Revision, "two keys wrote one revision")
		revisions[res.Record.Revision] = key
	}
	for rev := 2; rev <= 2+others; rev++ {
		require.Contains(t, revisions, rev)
	}
	require.Equal(t, 2, executed["k0"].Record.Revision, "the first run's revision")
	require.Equal(t, 1+others, b.count(t, `SELECT count(*) FROM feature_execution`))
	require.Equal(t, 2+others, b.count(t, `SELECT revision FROM record WHERE id = $1`, note.Record.ID))
}
