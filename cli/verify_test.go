package cli_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/cli"
)

func TestVerifyCommandExits0CleanAnd4WithViolations(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	created := c.ok("create", "--owner", "alice", "--module", "NOTE", "--key", "v1", "--title", "t")
	id := obj(t, created["record"])["id"].(string)
	c.ok("action", "--owner", "alice", "--module", "NOTE", "--record", id, "--feature", "F01", "--key", "v2")

	rep := c.ok("verify", "--all")
	require.Equal(t, []string{"batches", "checked", "invariants", "ok", "owner", "tookMs", "violations"}, sortedKeys(rep))
	require.Equal(t, true, rep["ok"])
	invs := rep["invariants"].([]any)
	require.Len(t, invs, 12)
	require.Equal(t, []string{"count", "description", "examples", "name"}, sortedKeys(obj(t, invs[0])))

	_, err := c.db.Pool.Exec(t.Context(), `UPDATE record SET revision = 5 WHERE id = $1`, id)
	require.NoError(t, err)
	code, out, errOut := c.exec("verify", "--owner", "alice")
	require.Equal(t, cli.ExitInternal, code, out)
	rep = c.object(out)
	require.Equal(t, false, rep["ok"])
	require.Equal(t, "alice", rep["owner"])
	require.EqualValues(t, 2, rep["violations"], "revisions_dense and record_is_latest_revision")
	require.Contains(t, errOut, "INVARIANT_VIOLATIONS")
	var dense map[string]any
	for _, inv := range rep["invariants"].([]any) {
		if obj(t, inv)["name"] == "revisions_dense" {
			dense = obj(t, inv)
		}
	}
	require.EqualValues(t, 1, dense["count"])
	ex := obj(t, dense["examples"].([]any)[0])
	require.Equal(t, "alice", ex["owner"])
	require.Equal(t, id, ex["record"])
	require.Contains(t, ex["detail"], "record.revision is 5 but it has 2 revision(s) numbered 1..2")

	// Another owner is clean.
	require.Equal(t, true, c.ok("verify", "--owner", "bob")["ok"])

	c.fails(cli.ExitUsage, "verify")
	c.fails(cli.ExitUsage, "verify", "--owner", "alice", "--all")
}
