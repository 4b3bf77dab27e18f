package idem_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
)

// How the runner batches its statements into round trips (plan.go) changes round trips and
// nothing else: SPEC §4.2's scenarios, run once with the batcher on and once with every
// statement sent in a round trip of its own, give the same outcomes and leave the same rows.
func TestBatchingStatementsChangesNoOutcomeAndNoRow(t *testing.T) {
	t.Parallel()
	batched, batchedRows := runFlowScenarios(t, false)
	unbatched, unbatchedRows := runFlowScenarios(t, true)
	require.Equal(t, batched, unbatched)
	require.Equal(t, batchedRows, unbatchedRows)

	// And both are SPEC §4.2's outcomes, not the same mistake twice.
	codes := make([]string, len(batched))
	for i, line := range batched {
		codes[i] = line[:strings.Index(line, " env=")]
	}
	require.Equal(t, []string{
		"no key: EXECUTED",
		"fresh key: EXECUTED",
		"fresh key again: REPLAYED",
		"fresh key from another runner: REPLAYED",
		"fresh key, ahead: EXECUTED",
		"taken key, ahead from another runner: REPLAYED",
		"leftover PROCESSING: IDEMPOTENCY_IN_PROGRESS",
		"leftover PROCESSING, ahead: IDEMPOTENCY_IN_PROGRESS",
		"holder: EXECUTED",
		"waited on the unique index: REPLAYED waited",
		"waited on the unique index, ahead: REPLAYED waited",
		"prepare fails after a won reservation: VALIDATION_FAILED",
		"prepare fails, ahead: VALIDATION_FAILED",
		"prepare fails on a taken key, ahead: REPLAYED",
		"a queued write refused: INTERNAL",
		"another body: IDEMPOTENCY_KEY_REUSED",
		"another body, ahead: IDEMPOTENCY_KEY_REUSED",
		"another body after a wait: IDEMPOTENCY_KEY_REUSED waited",
		"caller's transaction: EXECUTED",
		"caller's transaction, taken key: REPLAYED",
		"caller's transaction, work fails: VALIDATION_FAILED",
		"caller's transaction, work fails: commit answers ROLLBACK",
		"expired key: EXECUTED",
	}, codes)
	require.Equal(t, "key alice/fresh W:widget:create SUCCEEDED 1 day", batchedRows[1][:47], "the rows are there, not nothing twice")
	require.Contains(t, batchedRows, "widget alice/fresh-1 fresh#1 W", "prepare read the owner's one widget (the prefetch's read)")
	require.Len(t, batchedRows, 11, "%q", batchedRows)
	require.Contains(t, batched[14], "(SQLSTATE 23505)", "the refused write's own error, both ways")
}

// With the batcher off each statement takes a round trip of its own; on, a fresh key takes
// today's two (RunPrepared) or one (RunAhead) round trips, as roundtrips_test.go pins.
func TestUnbatchedEveryStatementTakesARoundTripOfItsOwn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pool, w := tracedPool(t, b.dsn)
	for _, oneByOne := range []bool{false, true} {
		r := idem.NewRunner(idem.PoolDriver(pool), idem.Options{Schema: runnerSchema})
		if oneByOne {
			idem.Unbatched(r)
		}
		s := &scenarios{b: b, r: r, ids: &widgetIDs{seq: map[string]int{}}}
		req := func(key string) idem.Request { return idem.Request{Owner: "alice", Key: key, Body: []byte(`{}`)} }
		suffix := fmt.Sprint(oneByOne)
		_, err := s.prepared(ctx, req("warm-"+suffix), "w", how{}) // the connection and its statement cache
		require.NoError(t, err)
		_, err = s.ahead(ctx, req("warm-ahead-"+suffix), "w", nil)
		require.NoError(t, err)
		w.Take()

		res, err := s.prepared(ctx, req("prepared-"+suffix), "l", how{})
		require.NoError(t, err)
		require.Equal(t, idemtype.Executed, res.Outcome)
		prepared := w.Take()
		res, err = s.ahead(ctx, req("ahead-"+suffix), "l", nil)
		require.NoError(t, err)
		require.Equal(t, idemtype.Executed, res.Outcome)
		ahead := w.Take()
		if !oneByOne {
			require.Equal(t, []string{
				`batch[begin; select operation, fingerprint,; with ins as; select count(*) from]`,
				`batch[insert into widget; with u as; commit]`,
			}, prepared)
			require.Equal(t, []string{`batch[begin; select operation, fingerprint,; with ins as; insert into widget; with u as; commit]`}, ahead)
			continue
		}
		require.Equal(t, []string{`begin`, `select operation, fingerprint,`, `with ins as`, `select count(*) from`,
			`insert into widget`, `with u as`, `batch[commit]`}, prepared)
		require.Equal(t, []string{`begin`, `select operation, fingerprint,`, `with ins as`, `insert into widget`, `with u as`, `commit`}, ahead)
	}
}

// scenarios runs widget calls on r, each widget's id its key and the count of works run for the
// key (the same in any run of the same scenarios), its label the label given and the owner's
// widget count prepare read (through a Prefetch when it travelled with the reservation).
type scenarios struct {
	b   *testBundle
	r   *idem.Runner
	ids *widgetIDs
}

// widgetIDs numbers the works run for each key.
type widgetIDs struct {
	mu  sync.Mutex
	seq map[string]int
}

func (s *scenarios) id(key string) string {
	s.ids.mu.Lock()
	defer s.ids.mu.Unlock()
	s.ids.seq[key]++
	return fmt.Sprintf("%s-%d", key, s.ids.seq[key])
}

// how a scenario's call fails or waits: prepare fails (after the reservation), or work holds
// on hold (when set) and then fails with failWork (when set).
type how struct {
	failPrepare, failWork error
	hold                  *gate
	// refused queues, behind the widget, a write the server refuses (the id of widget fresh-1).
	refused bool
}

func (s *scenarios) request(req idem.Request, label string) idem.Request {
	req.Module, req.Operation = "W", "W:widget:create"
	if req.Body == nil {
		req.Body = []byte(`{"label":` + string(mustJSON(label)) + `}`)
	}
	return req
}

// prepared is a RunPrepared call.
func (s *scenarios) prepared(ctx context.Context, req idem.Request, label string, h how) (idem.Result[widget], error) {
	req = s.request(req, label)
	count := &widgetCount{table: s.r.Table()}
	req.Prefetch = []idem.Prefetch{count}
	prepare := func(ctx context.Context, q idem.Querier) (string, error) {
		if h.failPrepare != nil {
			return "", h.failPrepare
		}
		if !count.read {
			if err := q.QueryRow(ctx, `SELECT count(*) FROM widget WHERE owner_id = $1`, req.Owner).Scan(&count.n); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("%s#%d", label, count.n), nil
	}
	work := func(ctx context.Context, tx *idem.Tx, l string) (widget, error) {
		w := widget{ID: s.id(req.Key), Owner: req.Owner, Module: req.Module, Label: l}
		tx.Queue(`INSERT INTO widget (owner_id, id, module, label) VALUES ($1, $2, $3, $4)`, w.Owner, w.ID, w.Module, w.Label)
		if h.refused {
			tx.Queue(`INSERT INTO widget (owner_id, id, module, label) VALUES ($1, 'fresh-1', 'W', 'again')`, w.Owner)
		}
		if h.hold != nil {
			h.hold.Hold()
		}
		return w, h.failWork
	}
	return idem.RunPrepared(ctx, s.r, req, idem.ResultPolicy[widget](s.b.policy), prepare, work)
}

// ahead is a RunAhead call whose write is guarded on the reservation; fail fails its prepare.
func (s *scenarios) ahead(ctx context.Context, req idem.Request, label string, fail error) (idem.Result[widget], error) {
	req = s.request(req, label)
	guarded := `INSERT INTO widget (owner_id, id, module, label) SELECT $1, $2, $3, $4 WHERE ` + idem.HeldGuard(s.r.Table(), 1, 5)
	return idem.RunAhead(ctx, s.r, req, idem.ResultPolicy[widget](s.b.policy),
		func(context.Context) (string, error) { return label, fail },
		func(ctx context.Context, tx *idem.Tx, l string) (widget, error) {
			w := widget{ID: s.id(req.Key), Owner: req.Owner, Module: req.Module, Label: l}
			owner, key, _ := tx.HeldBy()
			tx.Queue(guarded, owner, w.ID, w.Module, w.Label, key)
			return w, nil
		})
}

// widgetCount is a Prefetch: the owner's widget count, read in the reservation's round trip.
type widgetCount struct {
	table string
	n     int
	read  bool
}

func (p *widgetCount) QueueHeld(b *pgx.Batch, owner, key string) {
	b.Queue(`SELECT count(*) FROM widget WHERE owner_id = $1 AND `+idem.HeldGuard(p.table, 1, 2), owner, key)
}

func (p *widgetCount) TakeHeld(br pgx.BatchResults, held bool) error {
	var n int
	if err := br.QueryRow().Scan(&n); err != nil {
		return err
	}
	if held {
		p.n, p.read = n, true
	}
	return nil
}

// runFlowScenarios runs SPEC §4.2's scenarios on a database of their own, the runners batching
// or not, and returns what each call answered and the rows left, one line each.
func runFlowScenarios(t *testing.T, oneByOne bool) (answers, rows []string) {
	t.Helper()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	newRunner := func() *idem.Runner {
		r := idem.NewRunner(idem.PoolDriver(b.pool), idem.Options{Schema: runnerSchema, Clock: b.clock})
		if oneByOne {
			idem.Unbatched(r)
		}
		return r
	}
	ids := &widgetIDs{seq: map[string]int{}}
	s := &scenarios{b: b, r: newRunner(), ids: ids}
	other := func() *scenarios { return &scenarios{b: b, r: newRunner(), ids: ids} }
	note := func(what string, res idem.Result[widget], err error) {
		line := what + ": "
		switch {
		case err != nil:
			line += string(apperr.CodeOf(err))
			if idem.WaitedOnIndex(err) {
				line += " waited"
			}
		default:
			line += string(res.Outcome)
			if res.Waited {
				line += " waited"
			}
		}
		answers = append(answers, fmt.Sprintf("%s env=%s value=%+v err=%v", line, res.Envelope, res.Value, err))
	}
	alice := func(key string) idem.Request { return idem.Request{Owner: "alice", Key: key} }
	invalid := apperr.New(apperr.ValidationFailed, "label: refused")
	noShare := func(key string) idem.Request {
		return idem.Request{Owner: "alice", Key: key, ShareInFlight: boolp(false)}
	}

	res, err := s.prepared(ctx, alice(""), "nokey", how{})
	note("no key", res, err)
	res, err = s.prepared(ctx, alice("fresh"), "fresh", how{})
	note("fresh key", res, err)
	res, err = s.prepared(ctx, alice("fresh"), "fresh", how{})
	note("fresh key again", res, err)
	res, err = other().prepared(ctx, alice("fresh"), "fresh", how{})
	note("fresh key from another runner", res, err)
	res, err = s.ahead(ctx, alice("ahead"), "ahead", nil)
	note("fresh key, ahead", res, err)
	res, err = other().ahead(ctx, alice("fresh"), "fresh", nil)
	note("taken key, ahead from another runner", res, err)

	now := b.clock.Now()
	b.exec(t, `INSERT INTO idem.idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, created_at,
		expires_at, updated_at) VALUES ('alice', 'stuck', 'W:widget:create', 'x', 'PROCESSING', $1, $2, $1)`,
		now, now.Add(time.Hour))
	res, err = other().prepared(ctx, alice("stuck"), "stuck", how{})
	note("leftover PROCESSING", res, err)
	res, err = other().ahead(ctx, alice("stuck"), "stuck", nil)
	note("leftover PROCESSING, ahead", res, err)

	// A holder keeps the key reserved while three calls of other runners queue behind it on
	// the unique index: the same request twice (one ahead) and another body.
	g := newGate(t)
	type answer struct {
		res idem.Result[widget]
		err error
	}
	holder := make(chan answer, 1)
	go func() {
		res, err := s.prepared(ctx, alice("held"), "held", how{hold: g})
		holder <- answer{res, err}
	}()
	g.AwaitHeld(t)
	queued := make([]chan answer, 3)
	for i := range queued {
		queued[i] = make(chan answer, 1)
		go func() {
			var res idem.Result[widget]
			var err error
			switch i {
			case 0:
				res, err = other().prepared(ctx, noShare("held"), "held", how{})
			case 1:
				res, err = other().ahead(ctx, noShare("held"), "held", nil)
			default:
				res, err = other().prepared(ctx, noShare("held"), "another", how{})
			}
			queued[i] <- answer{res, err}
		}()
		require.Eventually(t, func() bool {
			return b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == i+1
		}, 30*time.Second, 5*time.Millisecond, "call %d queues on the unique index", i)
	}
	g.Open()
	h := <-holder
	note("holder", h.res, h.err)
	waited := make([]answer, len(queued))
	for i, c := range queued {
		waited[i] = <-c
	}
	note("waited on the unique index", waited[0].res, waited[0].err)
	note("waited on the unique index, ahead", waited[1].res, waited[1].err)

	res, err = s.prepared(ctx, alice("refused"), "refused", how{failPrepare: invalid})
	note("prepare fails after a won reservation", res, err)
	res, err = s.ahead(ctx, alice("refused-ahead"), "refused", invalid)
	note("prepare fails, ahead", res, err)
	res, err = other().ahead(ctx, alice("fresh"), "fresh", invalid)
	note("prepare fails on a taken key, ahead", res, err)
	res, err = s.prepared(ctx, alice("refused-write"), "refused", how{refused: true})
	note("a queued write refused", res, err)

	res, err = other().prepared(ctx, alice("fresh"), "another", how{})
	note("another body", res, err)
	res, err = other().ahead(ctx, alice("fresh"), "another", nil)
	note("another body, ahead", res, err)
	note("another body after a wait", waited[2].res, waited[2].err)

	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		in := alice("in-tx")
		in.Tx = tx
		res, err := s.prepared(ctx, in, "in-tx", how{})
		note("caller's transaction", res, err)
		taken := alice("fresh")
		taken.Tx = tx
		res, err = s.prepared(ctx, taken, "fresh", how{})
		note("caller's transaction, taken key", res, err)
		return nil
	}))
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	failing := alice("in-tx-fails")
	failing.Tx = tx
	res, err = s.prepared(ctx, failing, "fails", how{failWork: invalid})
	note("caller's transaction, work fails", res, err)
	if errors.Is(tx.Commit(ctx), pgx.ErrTxCommitRollback) {
		answers = append(answers, "caller's transaction, work fails: commit answers ROLLBACK env=")
	}

	b.clock.Advance(idem.DefaultTTL + time.Minute)
	res, err = s.prepared(ctx, alice("fresh"), "fresh", how{})
	note("expired key", res, err)

	return answers, rowsOf(t, b)
}

// rowsOf is every key row and widget b's database holds, one line each, without the times the
// clock stamped (only a key's lifetime).
func rowsOf(t *testing.T, b *testBundle) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		SELECT 'key ' || owner_id || '/' || idempotency_key || ' ' || operation || ' ' || status || ' ' || (expires_at - created_at)::text
			|| ' ' || fingerprint || ' ' || coalesce(response::text, 'NULL')
		FROM idem.idempotency_record
		UNION ALL SELECT 'widget ' || owner_id || '/' || id || ' ' || label || ' ' || module FROM widget
		ORDER BY 1`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}
