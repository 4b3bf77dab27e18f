package soak

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// The soak's accounting of one round, from a verdict the database gave.

func checked(t *testing.T, spec stormtypes.Spec, truth stormtypes.Summary, events ...stormtypes.Event) Result {
	t.Helper()
	ctx := testdb.Context(t)
	e := &engine{res: Result{Problems: []string{}}}
	ch := make(chan stormtypes.Event, len(events))
	for _, ev := range events {
		ch <- ev
	}
	close(ch)
	e.check(ctx, 7, plan{path: pathShared, op: opCreate}, spec, truth, ch)
	return e.res
}

var createSpec = stormtypes.Spec{Op: stormtypes.OpCreate, Create: model.CreateInput{Owner: "o", Module: kernel.ModuleNote, Key: "k"}}

func truthOf(revisions int, agrees bool, outcome string) stormtypes.Summary {
	return stormtypes.Summary{Outcomes: map[string]int{outcome: 1}, Verified: stormtypes.Verified{KeyStatus: "SUCCEEDED", Revisions: revisions, AuditEvents: revisions,
		Agrees: agrees, Envelope: &stormtypes.Reference{RecordID: "r", Revision: 1}}}
}

func TestARoundThatExecutedOnceCountsOneExecutionAndNothingElse(t *testing.T) {
	res := checked(t, createSpec, truthOf(1, true, "REPLAYED"),
		stormtypes.Event{Outcome: "EXECUTED", RecordID: "r", Revision: 1}, stormtypes.Event{Outcome: "COMMIT_UNKNOWN"}, stormtypes.Event{Outcome: "JOINED", RecordID: "r", Revision: 1})
	require.EqualValues(t, 1, res.Executions)
	require.Zero(t, res.Duplicates)
	require.Zero(t, res.Violations)
	require.Empty(t, res.Problems)
}

func TestAKeyWhoseWorkCommittedTwiceIsADuplicate(t *testing.T) {
	res := checked(t, createSpec, truthOf(2, false, "REPLAYED"))
	require.EqualValues(t, 2, res.Executions)
	require.EqualValues(t, 1, res.Duplicates)
	require.Contains(t, res.Problems[0], "executed 2 times")
}

func TestResponsesThatContradictTheDatabaseAreViolations(t *testing.T) {
	res := checked(t, createSpec, truthOf(1, true, "EXECUTED"), stormtypes.Event{Outcome: "EXECUTED", RecordID: "r", Revision: 1})
	require.EqualValues(t, 1, res.Violations, "two answers said EXECUTED for one execution")
	res = checked(t, createSpec, truthOf(1, true, "REPLAYED"), stormtypes.Event{Outcome: "REPLAYED", RecordID: "other", Revision: 1})
	require.EqualValues(t, 1, res.Violations, "an answer that is not the stored result")
	res = checked(t, createSpec, truthOf(1, false, "REPLAYED"))
	require.EqualValues(t, 1, res.Violations, "the verdict disagrees")
	require.Zero(t, res.Duplicates)
}

func TestFaultsAndRatesParse(t *testing.T) {
	f, err := ParseFaults("terminate, restart,terminate")
	require.NoError(t, err)
	require.Equal(t, []Fault{Terminate, Restart}, f)
	f, err = ParseFaults("none")
	require.NoError(t, err)
	require.Empty(t, f)
	_, err = ParseFaults("terminate,reboot")
	require.ErrorContains(t, err, `"reboot"`)
	r, err := ParseRates("restart=0.5")
	require.NoError(t, err)
	require.Equal(t, 0.5, r[Restart])
	require.Equal(t, DefaultRates[Terminate], r[Terminate])
	_, err = ParseRates("restart=2")
	require.Error(t, err)
}
