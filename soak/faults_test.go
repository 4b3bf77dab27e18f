package soak

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// kill-child strikes only the worker processes of this soak: a test binary (or any program)
// may run other storms with worker processes of their own at the same time, and killing those
// made unrelated storms fail ("worker process 2 … signal: killed").
func TestKillChildFindsOnlyThisSoaksOwnWorkers(t *testing.T) {
	t.Parallel()
	spawn := func(env ...string) *exec.Cmd {
		// A shell that stays (the trailing `:`) under a command line holding "storm-worker",
		// as a storm's worker process has.
		cmd := exec.Command("/bin/sh", "-c", "sleep 30; :", "storm-worker")
		cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	ours := spawn(childMarkVar + "=aaaa")
	spawn(childMarkVar + "=bbbb") // another soak's
	spawn()                       // another storm's, unmarked

	require.Equal(t, []int{ours.Process.Pid}, stormChildren(childMarkVar+"=aaaa"))
	require.Empty(t, stormChildren(childMarkVar+"=cccc"))
}
