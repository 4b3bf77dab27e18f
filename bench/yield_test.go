package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The flood's process is lowered whole: every thread of a running multi-threaded process (this
// test binary, started again and parked on its stdin) ends at FloodNice and SCHED_IDLE.
func TestTheFloodsEveryThreadRunsAtTheFloodsNiceAndIdlePolicy(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestParkedOnStdin$")
	cmd.Env = append(os.Environ(), parkEnv+"=1")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() { _ = stdin.Close(); _ = cmd.Wait() }()
	_, err = bufio.NewReader(stdout).ReadString('\n') // parked: its runtime's threads are up
	require.NoError(t, err)
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "task"))
	require.NoError(t, err)
	require.Greater(t, len(tasks), 1, "the child is a Go process with several threads")
	ours, err := threadNice(os.Getpid(), os.Getpid())
	require.NoError(t, err)
	if ours == FloodNice {
		t.Skipf("this test runs at nice %d already: lowering a child to it would change nothing", ours)
	}
	n, err := threadNice(cmd.Process.Pid, cmd.Process.Pid)
	require.NoError(t, err)
	require.Equal(t, ours, n, "a child starts at its parent's nice")
	require.False(t, threadIdle(cmd.Process.Pid), "a child starts at its parent's policy")

	require.NoError(t, deprioritize(cmd.Process.Pid, FloodNice))
	tasks, err = os.ReadDir(filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "task"))
	require.NoError(t, err)
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		require.NoError(t, err)
		n, err := threadNice(cmd.Process.Pid, tid)
		require.NoError(t, err)
		require.Equal(t, FloodNice, n, "thread %d", tid)
		require.True(t, threadIdle(tid), "thread %d runs at SCHED_IDLE", tid)
	}
}

const parkEnv = "IDEMWORK_BENCH_TEST_PARK"

// TestParkedOnStdin is the child of the test above: it says it is parked, then waits for the end
// of its stdin. Run by itself, it has nothing to do.
func TestParkedOnStdin(t *testing.T) {
	if os.Getenv(parkEnv) == "" {
		t.Skip("the child of TestTheFloodsEveryThreadRunsAtTheFloodsNiceAndIdlePolicy")
	}
	fmt.Println("parked")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// The fairness table's header says where each client ran, and the flood's nice and policy with
// it: a reader comparing two runs sees whether the flood's client could take a CPU from the server.
func TestTheFairnessHeaderSaysWhereEachClientRanAndAtWhatPriority(t *testing.T) {
	t.Parallel()
	header := func(f FairnessReport) string {
		var out strings.Builder
		f.Floods = []FairnessFloodReport{}
		Print(&out, Report{Fairness: &f})
		return out.String()
	}
	require.Contains(t, header(FairnessReport{FloodProcess: "child", FloodNice: FloodNice, FloodPolicy: FloodPolicy, ProbeProcess: "child"}),
		"(the flood's client in a process of its own at nice 19 and SCHED_IDLE, standing in for another machine; the other owner's in a process of its own)")
	require.Contains(t, header(FairnessReport{FloodProcess: "this", ProbeProcess: "this"}),
		"(the flood's client in the server's process; the other owner's in the server's process)")
}
