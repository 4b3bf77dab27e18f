package kernel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// A failure at any step of the commit unit rolls back every row of the request — the
// reservation included — and leaves the key free: the same key then executes. The failures are
// the server's own (a constraint the step's row violates, a statement that outlives
// statement_timeout), so they happen where the step's write reaches PostgreSQL: for the queued
// writes, in the round trip that carries the COMMIT.

// writeFunc fires the write under test through k with key.
type writeFunc func(ctx context.Context, k *kernel.Kernel, key string) (idemtype.Outcome, error)

type faultCase struct {
	name string
	// steps are the checkpoints the write reaches, in order.
	steps []string
	// writes are the rows the write sends, each with its step, in order.
	writes []stepWrite
	// prepare writes the preconditions (without faults) and returns the write to fault.
	prepare func(t *testing.T, b *testBundle) writeFunc
}

// stepWrite is a row a step writes: to table, and for the success update only the row that
// turns SUCCEEDED.
type stepWrite struct {
	step  string
	table string
}

var (
	reservationWrite = stepWrite{kernel.StepReserved, "idempotency_record"}
	recordWrite      = stepWrite{kernel.StepRecord, "record"}
	revisionWrite    = stepWrite{kernel.StepRevision, "record_revision"}
	executionWrite   = stepWrite{kernel.StepExecution, "feature_execution"}
	auditWrite       = stepWrite{kernel.StepAudit, "audit_event"}
	successWrite     = stepWrite{idem.StepSuccess, "idempotency_record"}
)

func faultCases() []faultCase {
	recordSteps := []string{kernel.StepReserved, kernel.StepRecord, kernel.StepRevision, kernel.StepAudit, kernel.StepSucceeded}
	recordWrites := []stepWrite{reservationWrite, recordWrite, revisionWrite, auditWrite, successWrite}
	executionOnlySteps := []string{kernel.StepReserved, kernel.StepExecution, kernel.StepAudit, kernel.StepSucceeded}
	return []faultCase{
		{name: "create", steps: recordSteps, writes: recordWrites, prepare: func(t *testing.T, b *testBundle) writeFunc {
			return func(ctx context.Context, k *kernel.Kernel, key string) (idemtype.Outcome, error) {
				res, err := k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: key, Title: "t",
					Payload: raw(map[string]any{"a": 1})})
				return res.Outcome, err
			}
		}},
		{name: "patch", steps: recordSteps, writes: recordWrites, prepare: func(t *testing.T, b *testBundle) writeFunc {
			rec := b.createNote(t, "alice", "base", "base")
			return func(ctx context.Context, k *kernel.Kernel, key string) (idemtype.Outcome, error) {
				res, err := k.Patch(ctx, model.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, Key: key,
					ExpectRevision: 1, Title: str("patched")})
				return res.Outcome, err
			}
		}},
		{name: "internal feature (NOTE F01)",
			steps:  []string{kernel.StepReserved, kernel.StepRecord, kernel.StepRevision, kernel.StepExecution, kernel.StepAudit, kernel.StepSucceeded},
			writes: []stepWrite{reservationWrite, recordWrite, revisionWrite, executionWrite, auditWrite, successWrite},
			prepare: func(t *testing.T, b *testBundle) writeFunc {
				rec := b.createNote(t, "alice", "base", "base")
				return func(ctx context.Context, k *kernel.Kernel, key string) (idemtype.Outcome, error) {
					res, err := k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, FeatureID: "F01", Key: key})
					return res.Outcome, err
				}
			}},
		{name: "blocked external feature (MEM-001 F02)", steps: executionOnlySteps,
			writes: []stepWrite{reservationWrite, executionWrite, auditWrite, successWrite},
			prepare: func(t *testing.T, b *testBundle) writeFunc {
				rec := b.createMem(t, "alice", "base", "text")
				return func(ctx context.Context, k *kernel.Kernel, key string) (idemtype.Outcome, error) {
					res, err := k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: rec.Record.ID, FeatureID: "F02", Key: key})
					return res.Outcome, err
				}
			}},
		{name: "outbox feature (COMMITMENT F02)", steps: executionOnlySteps,
			writes: []stepWrite{reservationWrite, executionWrite, {kernel.StepExecution, "outbox_message"}, auditWrite, successWrite},
			prepare: func(t *testing.T, b *testBundle) writeFunc {
				rec := b.createCommitment(t, "alice", "base")
				return func(ctx context.Context, k *kernel.Kernel, key string) (idemtype.Outcome, error) {
					res, err := k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleCommitment, RecordID: rec.Record.ID, FeatureID: "F02", Key: key})
					return res.Outcome, err
				}
			}},
		{name: "review", steps: []string{kernel.StepReserved, kernel.StepReview, kernel.StepAudit, kernel.StepSucceeded},
			writes: []stepWrite{reservationWrite, {kernel.StepReview, "commitment_review"}, auditWrite, successWrite},
			prepare: func(t *testing.T, b *testBundle) writeFunc {
				rec := b.createCommitment(t, "alice", "base")
				return func(ctx context.Context, k *kernel.Kernel, key string) (idemtype.Outcome, error) {
					res, err := k.CreateReview(ctx, kernel.ReviewInput{Owner: "alice", RecordID: rec.Record.ID, Key: key, Verdict: "kept", Comment: "c"})
					return res.Outcome, err
				}
			}},
	}
}

// rowCondition is the condition a fault applies to: the row the step writes.
func (w stepWrite) rowCondition() string {
	if w.step == idem.StepSuccess {
		return "status = 'SUCCEEDED'"
	}
	return "true"
}

// injectViolation makes the server refuse the step's row: a CHECK constraint that only new and
// changed rows are held to (NOT VALID), so what the preconditions wrote stays.
func (b *testBundle) injectViolation(t *testing.T, w stepWrite) (undo func()) {
	t.Helper()
	b.exec(t, `ALTER TABLE `+w.table+` ADD CONSTRAINT injected_fault CHECK (NOT (`+w.rowCondition()+`)) NOT VALID`)
	return func() { b.exec(t, `ALTER TABLE `+w.table+` DROP CONSTRAINT injected_fault`) }
}

// injectStall makes the step's row take a minute to write, so that a session with a short
// statement_timeout gives up on it.
func (b *testBundle) injectStall(t *testing.T, w stepWrite) (undo func()) {
	t.Helper()
	b.exec(t, `CREATE OR REPLACE FUNCTION injected_stall() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_sleep(60); RETURN NEW; END $$`)
	cond := "NEW." + w.rowCondition()
	if w.rowCondition() == "true" {
		cond = "true"
	}
	b.exec(t, `CREATE TRIGGER injected_stall BEFORE INSERT OR UPDATE ON `+w.table+` FOR EACH ROW WHEN (`+cond+`) EXECUTE FUNCTION injected_stall()`)
	return func() { b.exec(t, `DROP TRIGGER injected_stall ON `+w.table) }
}

// requireRolledBackAndFree checks that the failed write left no row anywhere and no key, then
// that the same key executes once the fault is gone.
func requireRolledBackAndFree(t *testing.T, b *testBundle, before map[string]int, undo func(), write writeFunc, k *kernel.Kernel) {
	t.Helper()
	require.Equal(t, before, b.counts(t), "nothing of the failed request is visible in any table")
	require.Zero(t, b.count(t, `SELECT count(*) FROM idempotency_record WHERE idempotency_key = 'k'`), "no failure is cached")
	undo()
	outcome, err := write(context.Background(), k, "k")
	require.NoError(t, err)
	require.Equal(t, idemtype.Executed, outcome, "the same key executes on retry")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM idempotency_record WHERE idempotency_key = 'k' AND status = 'SUCCEEDED'`))
	after := b.counts(t)
	require.Equal(t, before["idempotency_record"]+1, after["idempotency_record"])
	require.Equal(t, before["audit_event"]+1, after["audit_event"])
}

func TestARowTheServerRefusesAtAnyStepRollsBackEveryRowAndIsThatStepsError(t *testing.T) {
	t.Parallel()
	for _, fc := range faultCases() {
		for _, w := range fc.writes {
			t.Run(fc.name+"/"+w.step+"/"+w.table, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				write := fc.prepare(t, b)
				before := b.counts(t)
				undo := b.injectViolation(t, w)
				_, err := write(context.Background(), b.k, "k")
				var se *idem.StepError
				require.ErrorAs(t, err, &se, "%v", err)
				require.Equal(t, w.step, se.Step, "the failure is the %s step's: %v", w.step, err)
				var pgErr *pgconn.PgError
				require.ErrorAs(t, err, &pgErr)
				require.Equal(t, "23514", pgErr.Code, "check_violation")
				require.Equal(t, w.table, pgErr.TableName)
				require.Equal(t, "injected_fault", pgErr.ConstraintName)
				requireRolledBackAndFree(t, b, before, undo, write, b.k)
			})
		}
	}
}

func TestAStepThatOutlivesTheStatementTimeoutRollsBackEveryRowAndIsThatStepsError(t *testing.T) {
	t.Parallel()
	for _, fc := range faultCases() {
		if fc.name != "internal feature (NOTE F01)" { // the write that reaches every step
			continue
		}
		for _, w := range fc.writes {
			t.Run(w.step+"/"+w.table, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				write := fc.prepare(t, b)
				// A kernel whose sessions give up on a statement after a second.
				db, err := store.Open(context.Background(), testdb.WithParam(b.db.DSN, "statement_timeout", "1000"), store.Options{MaxConns: 2})
				require.NoError(t, err)
				t.Cleanup(db.Close)
				k := kernel.New(db, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{Runner: idem.Options{Clock: b.clock}})
				before := b.counts(t)
				undo := b.injectStall(t, w)
				_, err = write(context.Background(), k, "k")
				var se *idem.StepError
				require.ErrorAs(t, err, &se, "%v", err)
				require.Equal(t, w.step, se.Step, "the failure is the %s step's: %v", w.step, err)
				var pgErr *pgconn.PgError
				require.ErrorAs(t, err, &pgErr)
				require.Equal(t, "57014", pgErr.Code, "query_canceled by statement_timeout")
				requireRolledBackAndFree(t, b, before, undo, write, k)
			})
		}
	}
}

func TestAFaultAfterAnyCheckpointLeavesZeroRowsInEveryTableAndTheKeyFreeForARetry(t *testing.T) {
	t.Parallel()
	for _, fc := range faultCases() {
		for _, step := range fc.steps {
			t.Run(fc.name+"/"+step, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				write := fc.prepare(t, b)
				before := b.counts(t)
				injected := errors.New("injected failure after " + step)
				fired := 0
				fk := b.k.WithFaults(func(_ context.Context, s string) error {
					if s == step {
						fired++
						return injected
					}
					return nil
				})
				_, err := write(context.Background(), fk, "k")
				require.ErrorIs(t, err, injected)
				require.Equal(t, 1, fired, "the step %q was reached exactly once", step)
				requireRolledBackAndFree(t, b, before, func() {}, write, b.k)
			})
		}
	}
}

// Every step of every write is listed above, and every table a write adds rows to is faulted:
// a step the kernel reaches or a row it writes that the table above forgot would leave a fault
// path untested.
func TestTheFaultTableCoversEveryStepAndEveryRowEachWriteReaches(t *testing.T) {
	t.Parallel()
	for _, fc := range faultCases() {
		t.Run(fc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			write := fc.prepare(t, b)
			before := b.counts(t)
			var reached []string
			fk := b.k.WithFaults(func(_ context.Context, s string) error { reached = append(reached, s); return nil })
			outcome, err := write(context.Background(), fk, "k")
			require.NoError(t, err)
			require.Equal(t, idemtype.Executed, outcome)
			require.Equal(t, fc.steps, reached)
			faulted := map[string]bool{}
			for _, w := range fc.writes {
				faulted[w.table] = true
			}
			for table, n := range b.counts(t) {
				if n != before[table] {
					require.True(t, faulted[table], "the write adds rows to %s, which no fault covers", table)
				}
			}
		})
	}
}
