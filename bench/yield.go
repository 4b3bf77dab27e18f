package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// FloodNice is the nice value the fairness cell's flood runs at, and FloodPolicy the scheduling
// policy. The cell asks how much one owner's reads take from another's on the server; on one
// machine the flood's own client (2,000 goroutines opening, writing and reading 2,000
// connections) competes for the same two cores, which no flood from a client on another machine
// does. Nice 19 alone did not remove it: the flood's child still took 60–90 % of a CPU beside a
// server that was never idle (measured from /proc during the 2,000-in-flight flood), and under
// Linux's EEVDF scheduler a task running on a CPU may keep it to the end of its slice
// (RUN_TO_PARITY) when a nice-0 task wakes, so each hop of the other owner's GET (its client,
// the server, its PostgreSQL backend) could wait behind the flood's client. SCHED_IDLE is the
// policy for exactly this: its threads run only on a CPU nothing else wants, and any other thread
// that wakes takes the CPU from them at once. The flood keeps every idle cycle (it is not slowed
// when the server waits on the database); what remains is what the server does with it.
const (
	FloodNice   = 19
	FloodPolicy = "idle"
)

// deprioritize sets every thread of process pid to nice and to SCHED_IDLE (Linux's nice and
// policy are per thread; a thread inherits its creator's). It lists the threads until a pass
// finds none left to change, so a thread created by one not yet lowered is caught on the next
// pass. Any process may lower its own threads so; a kernel that refuses (a seccomp filter)
// gets an error that says so, rather than a cell measured against a flood at full priority.
func deprioritize(pid, nice int) error {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	for pass := 0; pass < 10; pass++ {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("bench: lower the flood's priority: %w", err)
		}
		changed := 0
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if n, err := threadNice(pid, tid); err == nil && n == nice && threadIdle(tid) {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && err != syscall.ESRCH {
				return fmt.Errorf("bench: lower the flood's priority: %w", err)
			}
			attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
			if err := unix.SchedSetAttr(tid, &attr, 0); err != nil && err != unix.ESRCH {
				return fmt.Errorf("bench: run the flood's threads at SCHED_IDLE: %w", err)
			}
			changed++
		}
		if changed == 0 {
			return nil
		}
	}
	return fmt.Errorf("bench: lower the flood's priority: process %d kept starting threads", pid)
}

// threadIdle reports whether thread tid runs at SCHED_IDLE.
func threadIdle(tid int) bool {
	attr, err := unix.SchedGetAttr(tid, 0)
	return err == nil && attr.Policy == unix.SCHED_IDLE
}

// threadNice is the nice value of thread tid of process pid (field 19 of its stat line, counted
// after the command name, which may itself hold spaces and parentheses).
func threadNice(pid, tid int) (int, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(tid), "stat"))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: unreadable stat of thread %d", tid)
	}
	fields := strings.Fields(s[i+1:]) // fields[0] is field 3 (state)
	if len(fields) < 17 {
		return 0, fmt.Errorf("bench: short stat of thread %d", tid)
	}
	return strconv.Atoi(fields[16])
}
