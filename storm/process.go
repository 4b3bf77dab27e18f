package storm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// child is one worker process as the parent sees it.
type child struct {
	index  int
	base   int
	n      int
	cmd    *exec.Cmd
	stderr *tailBuffer
	// Set by the reader goroutine; read after it finished.
	pid  int
	msg  string
	done bool
	bad  int // events outside this child's index range
}

type childSignal struct {
	index int
	ready bool // false: its stdout closed
}

// runChildren fires the storm from spec.Processes child processes released together.
func runChildren(ctx context.Context, env Env, spec Spec, t httpTarget, col *collector) (time.Time, error) {
	exe := env.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return time.Time{}, fmt.Errorf("storm: find this binary for the worker processes: %w", err)
		}
	}
	args := env.WorkerArgs
	if args == nil {
		args = []string{"storm-worker"}
	}
	if spec.Via == ViaInproc && env.DSN == "" {
		return time.Time{}, errors.New("storm: Env.DSN is required for a multi-process storm")
	}
	readyTimeout := env.ReadyTimeout
	if readyTimeout <= 0 {
		readyTimeout = time.Minute
	}

	var claim string
	if spec.FailFirst && spec.Via == ViaInproc {
		dir, err := os.MkdirTemp("", "idemwork-storm-")
		if err != nil {
			return time.Time{}, err
		}
		defer os.RemoveAll(dir)
		claim = filepath.Join(dir, "fault.claim")
	}

	barrierR, barrierW, err := os.Pipe()
	if err != nil {
		return time.Time{}, fmt.Errorf("storm: barrier pipe: %w", err)
	}
	defer barrierW.Close()

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	signals := make(chan childSignal, 2*spec.Processes)
	var readers sync.WaitGroup
	children := make([]*child, 0, spec.Processes)
	// Whatever happens below, no reader outlives this call (the collector closes after it) and
	// every started child is reaped.
	defer func() {
		if children == nil {
			return
		}
		cancel()
		readers.Wait()
		for _, c := range children {
			_ = c.cmd.Wait()
		}
	}()

	var tee io.Writer
	if env.Stderr != nil {
		tee = &lockedWriter{w: env.Stderr} // the children write at the same time
	}
	base := 0
	for i := range spec.Processes {
		n := spec.perProcess(i)
		job := newWorkerJob(spec)
		job.IndexBase, job.DSN, job.FaultClaim, job.URL, job.Token = base, env.DSN, claim, t.url, t.token
		job.Spec.N, job.Spec.Processes = n, 1
		job.Spec.Concurrency = min(spec.Concurrency, n)
		if k := env.Kernel; k != nil {
			job.ReadOnly = k.DB().ReadOnly
			job.TTL = k.Runner().TTL()
			job.MemMaxContentLength = k.Registry.Rules.Snapshot().MemMaxContentLength
			if c, ok := k.Runner().Clock().(interface{ Offset() time.Duration }); ok {
				job.ClockOffset = c.Offset()
			}
		}
		raw, err := json.Marshal(job)
		if err != nil {
			barrierR.Close()
			return time.Time{}, err
		}
		c := &child{index: i, base: base, n: n, stderr: &tailBuffer{max: 8 << 10, tee: tee}}
		c.cmd = exec.CommandContext(cctx, exe, args...)
		c.cmd.Env = append(append(os.Environ(), WorkerEnvVar+"=1"), env.WorkerEnv...)
		c.cmd.Stdin = bytes.NewReader(raw)
		c.cmd.Stderr = c.stderr
		c.cmd.ExtraFiles = []*os.File{barrierR}
		c.cmd.WaitDelay = 5 * time.Second
		stdout, err := c.cmd.StdoutPipe()
		if err != nil {
			barrierR.Close()
			return time.Time{}, err
		}
		if err := c.cmd.Start(); err != nil {
			barrierR.Close()
			return time.Time{}, fmt.Errorf("storm: start worker %s: %w", exe, err)
		}
		children = append(children, c)
		readers.Go(func() { readChild(c, stdout, col, signals) })
		base += n
	}
	barrierR.Close() // the children hold it now

	// Wait until every child is connected, warmed up and parked at the barrier.
	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	for ready := 0; ready < len(children); {
		select {
		case s := <-signals:
			if s.ready {
				ready++
				continue
			}
			cancel()
			readers.Wait()
			return time.Time{}, childError(children[s.index], "exited before it was ready")
		case <-timer.C:
			return time.Time{}, fmt.Errorf("storm: the worker processes were not ready within %s", readyTimeout)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}

	// Release: one write wakes every child blocked on the pipe at the same moment.
	released := time.Now()
	if _, err := barrierW.Write(bytes.Repeat([]byte{'G'}, len(children))); err != nil {
		return time.Time{}, fmt.Errorf("storm: release the barrier: %w", err)
	}
	_ = barrierW.Close()

	readers.Wait()
	var errs []error
	for _, c := range children {
		werr := c.cmd.Wait()
		switch {
		case werr != nil && ctx.Err() == nil:
			errs = append(errs, childError(c, werr.Error()))
		case !c.done && ctx.Err() == nil:
			errs = append(errs, childError(c, "ended without reporting done"))
		case c.bad > 0:
			errs = append(errs, childError(c, fmt.Sprintf("reported %d events outside its requests", c.bad)))
		}
	}
	children = nil // reaped
	if err := ctx.Err(); err != nil {
		return released, err
	}
	return released, errors.Join(errs...)
}

// readChild parses one child's lines until its stdout closes.
func readChild(c *child, stdout io.Reader, col *collector, signals chan<- childSignal) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var m workerMsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			continue // not ours (a stray print); the protocol lines are all JSON
		}
		switch m.T {
		case "ready":
			c.pid = m.PID
			signals <- childSignal{index: c.index, ready: true}
		case "event":
			if m.Event == nil || m.Event.Index < c.base || m.Event.Index >= c.base+c.n {
				c.bad++
				continue
			}
			col.add(*m.Event)
		case "error":
			c.msg = m.Msg
		case "done":
			c.done = true
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	signals <- childSignal{index: c.index}
}

func childError(c *child, what string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "storm: worker process %d", c.index+1)
	if c.pid != 0 {
		fmt.Fprintf(&b, " (pid %d)", c.pid)
	}
	b.WriteString(" " + what)
	if c.msg != "" {
		b.WriteString(": " + c.msg)
	} else if tail := strings.TrimSpace(c.stderr.String()); tail != "" {
		b.WriteString(": " + oneLine(tail))
	}
	return errors.New(b.String())
}

// tailBuffer keeps the last max bytes written to it, optionally copying everything to tee.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
	tee io.Writer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tee != nil {
		_, _ = t.tee.Write(p)
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// lockedWriter serialises writes to a writer several children share.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
