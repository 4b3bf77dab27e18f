package replay_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/replay"
)

// TestAReplayNeverScansAllOfAnOwnersRows pins the plan of the one-statement replays: planned
// generically while the tables hold a handful of rows (as a connection's cached statement is, in
// a new database), every prefetched row is still looked up by its own key, never by the owner
// (or owner and module) prefix with a filter on the rest — that would read all of an owner's
// records of the module on every replay once the owner has many.
func TestAReplayNeverScansAllOfAnOwnersRows(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	k := kernel.New(db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
	ctx := context.Background()
	note, err := k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "note-1", Title: "t"})
	require.NoError(t, err)
	_, err = k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, FeatureID: "F01", Key: "run-1"})
	require.NoError(t, err)

	conn, err := db.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`)
	require.NoError(t, err)

	for i, c := range []struct {
		key  string
		sql  string
		scan []string // the relations the statement must look up by key
	}{
		{"note-1", replay.RevisionStatement(replayRefs).SQL(), []string{"record_revision", "record"}},
		{"run-1", replay.ExecutionStatement(replayRefs).SQL(), []string{"record_revision", "record", "feature_execution"}},
	} {
		stmt := fmt.Sprintf("plan_probe_%d", i)
		// The statement's parameters are ReplayParams in order: owner, key, module.
		_, err = conn.Exec(ctx, `PREPARE `+stmt+`(text, text, text) AS `+c.sql)
		require.NoError(t, err)
		rows, err := conn.Query(ctx, `EXPLAIN (COSTS OFF) EXECUTE `+stmt+`('alice', '`+c.key+`', 'NOTE')`)
		require.NoError(t, err)
		var lines []string
		for rows.Next() {
			var line string
			require.NoError(t, rows.Scan(&line))
			lines = append(lines, line)
		}
		require.NoError(t, rows.Err())
		plan := strings.Join(lines, "\n")
		require.NotContains(t, plan, "Join Filter", "a prefetched row is filtered after a wider scan:\n%s", plan)
		require.NotContains(t, plan, "Seq Scan", plan)
		for _, rel := range c.scan {
			cond := indexCondOf(lines, rel)
			require.NotEmpty(t, cond, "%s is not read through an index:\n%s", rel, plan)
			bound := false
			for _, cols := range replayLookupKeys[rel] {
				all := true
				for _, col := range cols {
					all = all && strings.Contains(cond, "("+col+" = ")
				}
				bound = bound || all
			}
			require.True(t, bound, "%s is not looked up by its own key (%v): %s\n%s", rel, replayLookupKeys[rel], cond, plan)
		}
	}
}

// replayRefs are where the kernel's policies keep their references (kernel/policies.go).
var replayRefs = store.ReplayRefs{RecordID: idem.ResultPath("recordId"), Revision: idem.ResultPath("revision"),
	ExecutionID: idem.ResultPath("executionId")}

// replayLookupKeys are the column sets an acceptable lookup of each prefetched relation binds (any one
// of them): its unique key, or for an execution its record (a scan of one record's executions).
var replayLookupKeys = map[string][][]string{
	"record_revision":   {{"owner_id", "record_id", "revision"}},
	"record":            {{"owner_id", "id"}},
	"feature_execution": {{"owner_id", "id"}, {"owner_id", "record_id"}},
}

// indexCondOf returns the Index Cond line under the scan of rel in an EXPLAIN text plan.
func indexCondOf(lines []string, rel string) string {
	for i, l := range lines {
		if !strings.Contains(l, " on "+rel+" ") {
			continue
		}
		for _, next := range lines[i+1:] {
			if strings.HasPrefix(strings.TrimSpace(next), "->") { // the next plan node
				break
			}
			if strings.Contains(next, "Index Cond:") {
				return next
			}
		}
	}
	return ""
}

// TestAReplayStatementFollowsTheReferencePathsItIsHanded: the store does not know where an
// envelope keeps its references; the statement follows the paths its caller hands in. A key row
// whose references sit elsewhere in the response is joined to its revision and execution by a
// statement built with those paths, and to nothing by one built with the envelope's.
func TestAReplayStatementFollowsTheReferencePathsItIsHanded(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	k := kernel.New(db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	note, err := k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "note-1", Title: "t"})
	require.NoError(t, err)
	run, err := k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: note.Record.ID, FeatureID: "F01", Key: "run-1"})
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, `UPDATE idempotency_record SET response = jsonb_build_object('elsewhere',
		jsonb_build_object('rec', response->'result'->'recordId', 'rev', response->'result'->'revision', 'exec', response->'result'->'executionId'))
		WHERE owner_id = 'alice' AND idempotency_key = 'run-1'`)
	require.NoError(t, err)

	p := idem.ReplayParams{Owner: "alice", Key: "run-1", Module: kernel.ModuleNote}
	moved := replay.ExecutionStatement(store.ReplayRefs{RecordID: []string{"elsewhere", "rec"}, Revision: []string{"elsewhere", "rev"},
		ExecutionID: []string{"elsewhere", "exec"}})
	r, found, err := moved.ReadExecution(ctx, db.Pool, p)
	require.NoError(t, err)
	require.True(t, found)
	require.NotNil(t, r.Revision, "the revision at the handed paths")
	require.Equal(t, run.Record.Revision, r.Revision.Revision.Revision)
	require.NotNil(t, r.Execution, "the execution at the handed paths")
	require.Equal(t, run.Execution.ID, r.Execution.ID)

	r, found, err = replay.ExecutionStatement(replayRefs).ReadExecution(ctx, db.Pool, p)
	require.NoError(t, err)
	require.True(t, found)
	require.Nil(t, r.Revision, "nothing where the envelope would keep the references")
	require.Nil(t, r.Execution)
	require.False(t, r.RevisionUnreadable || r.ExecutionUnreadable)

	require.Panics(t, func() {
		replay.RevisionStatement(store.ReplayRefs{RecordID: []string{"a'b"}, Revision: []string{"r"}})
	},
		"a path step is a plain name, never SQL")
}
