package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// FloodNice is the nice value the fairness cell's flood runs at. The cell asks how much one
// owner's reads take from another's on the server; on one machine the flood's own client (2,000
// goroutines opening, writing and reading 2,000 connections) competes for the same two cores,
// which no flood from a client on another machine does. At nice 19 its process still gets every
// idle cycle (the flood is not slowed when the server waits on the database), but the server and
// the other owner's client run first: what remains is what the server does with the flood.
const FloodNice = 19

// deprioritize sets every thread of process pid to nice (Linux's nice is per thread; a thread
// inherits its creator's). It lists the threads until a pass finds none left to change, so a
// thread created by one not yet lowered is caught on the next pass.
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
			if n, err := threadNice(pid, tid); err == nil && n == nice {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && err != syscall.ESRCH {
				return fmt.Errorf("bench: lower the flood's priority: %w", err)
			}
			changed++
		}
		if changed == 0 {
			return nil
		}
	}
	return fmt.Errorf("bench: lower the flood's priority: process %d kept starting threads", pid)
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
