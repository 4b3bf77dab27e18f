package kernel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"idemwork/idem"
	"idemwork/kernel"
)

// A fault injected after any step of the commit unit rolls back every row of the request — the
// reservation included — and leaves the key free: the same key then executes.

type faultCase struct {
	name  string
	steps []string
	// prepare writes the preconditions (without faults) and returns the write to fault.
	prepare func(t *testing.T, b *testBundle) func(ctx context.Context, key string) (idem.Outcome, error)
}

var allSteps = []string{idem.StepReserved, idem.StepRecord, idem.StepRevision, idem.StepExecution, idem.StepAudit, idem.StepSucceeded}

func faultCases() []faultCase {
	recordSteps := []string{idem.StepReserved, idem.StepRecord, idem.StepRevision, idem.StepAudit, idem.StepSucceeded}
	executionOnlySteps := []string{idem.StepReserved, idem.StepExecution, idem.StepAudit, idem.StepSucceeded}
	return []faultCase{
		{name: "create", steps: recordSteps, prepare: func(t *testing.T, b *testBundle) func(context.Context, string) (idem.Outcome, error) {
			return func(ctx context.Context, key string) (idem.Outcome, error) {
				res, err := b.k.Create(ctx, kernel.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: key, Title: "t",
					Payload: raw(map[string]any{"a": 1})})
				return res.Outcome, err
			}
		}},
		{name: "patch", steps: recordSteps, prepare: func(t *testing.T, b *testBundle) func(context.Context, string) (idem.Outcome, error) {
			rec := b.createNote(t, "alice", "base", "base")
			return func(ctx context.Context, key string) (idem.Outcome, error) {
				res, err := b.k.Patch(ctx, kernel.PatchInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, Key: key,
					ExpectRevision: 1, Title: str("patched")})
				return res.Outcome, err
			}
		}},
		{name: "internal feature (NOTE F01)", steps: allSteps, prepare: func(t *testing.T, b *testBundle) func(context.Context, string) (idem.Outcome, error) {
			rec := b.createNote(t, "alice", "base", "base")
			return func(ctx context.Context, key string) (idem.Outcome, error) {
				res, err := b.k.RunFeature(ctx, kernel.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: rec.Record.ID, FeatureID: "F01", Key: key})
				return res.Outcome, err
			}
		}},
		{name: "blocked external feature (MEM-001 F02)", steps: executionOnlySteps, prepare: func(t *testing.T, b *testBundle) func(context.Context, string) (idem.Outcome, error) {
			rec := b.createMem(t, "alice", "base", "text")
			return func(ctx context.Context, key string) (idem.Outcome, error) {
				res, err := b.k.RunFeature(ctx, kernel.FeatureInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: rec.Record.ID, FeatureID: "F02", Key: key})
				return res.Outcome, err
			}
		}},
		{name: "outbox feature (COMMITMENT F02)", steps: executionOnlySteps, prepare: func(t *testing.T, b *testBundle) func(context.Context, string) (idem.Outcome, error) {
			rec := b.createCommitment(t, "alice", "base")
			return func(ctx context.Context, key string) (idem.Outcome, error) {
				res, err := b.k.RunFeature(ctx, kernel.FeatureInput{Owner: "alice", Module: kernel.ModuleCommitment, RecordID: rec.Record.ID, FeatureID: "F02", Key: key})
				return res.Outcome, err
			}
		}},
		{name: "review", steps: []string{idem.StepReserved, idem.StepAudit, idem.StepSucceeded}, prepare: func(t *testing.T, b *testBundle) func(context.Context, string) (idem.Outcome, error) {
			rec := b.createCommitment(t, "alice", "base")
			return func(ctx context.Context, key string) (idem.Outcome, error) {
				res, err := b.k.CreateReview(ctx, kernel.ReviewInput{Owner: "alice", RecordID: rec.Record.ID, Key: key, Verdict: "kept", Comment: "c"})
				return res.Outcome, err
			}
		}},
	}
}

func TestAFaultAfterAnyStepLeavesZeroRowsInEveryTableAndTheKeyFreeForARetry(t *testing.T) {
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
				ctx := idem.WithFault(context.Background(), func(s string) error {
					if s == step {
						fired++
						return injected
					}
					return nil
				})
				_, err := write(ctx, "k")
				require.ErrorIs(t, err, injected)
				require.Equal(t, 1, fired, "the step %q was reached exactly once", step)
				require.Equal(t, before, b.counts(t), "nothing of the failed request is visible in any table")
				require.Zero(t, b.count(t, `SELECT count(*) FROM idempotency_record WHERE idempotency_key = 'k'`), "no failure is cached")

				outcome, err := write(context.Background(), "k")
				require.NoError(t, err)
				require.Equal(t, idem.Executed, outcome, "the same key executes on retry")
				require.Equal(t, 1, b.count(t, `SELECT count(*) FROM idempotency_record WHERE idempotency_key = 'k' AND status = 'SUCCEEDED'`))
				after := b.counts(t)
				require.Equal(t, before["idempotency_record"]+1, after["idempotency_record"])
				require.Equal(t, before["audit_event"]+1, after["audit_event"])
			})
		}
	}
}

// Every step of every write is listed above: a step the kernel reaches but the table above
// forgot would leave a fault path untested.
func TestTheFaultTableCoversEveryStepEachWriteReaches(t *testing.T) {
	t.Parallel()
	for _, fc := range faultCases() {
		t.Run(fc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			write := fc.prepare(t, b)
			var reached []string
			ctx := idem.WithFault(context.Background(), func(s string) error { reached = append(reached, s); return nil })
			outcome, err := write(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, idem.Executed, outcome)
			require.Equal(t, fc.steps, reached)
		})
	}
}
