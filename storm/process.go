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
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// child is one worker process as the parent sees it.
type child struct {
	index  int
	base   int
	n      int
	cmd    *exec.Cmd
	stderr *tailBuffer
	// Set by the reader goroutine; read after it finished (url once ready was signalled).
	pid  int
	url  string
	msg  string
	code apperr.Code // the code of the child's error line, if it sent one
	done bool
	bad  int // events outside this child's index range
}

type childSignal struct {
	index int
	ready bool // false: its stdout closed
}

// procGroup is a set of child processes of this binary sharing one pipe on their fd 3: the
// barrier of firing children, or the lifeline of serving ones.
type procGroup struct {
	env      Env
	exe      string
	args     []string
	pipeR    *os.File
	pipeW    *os.File
	ctx      context.Context
	cancel   context.CancelFunc
	signals  chan childSignal
	readers  sync.WaitGroup
	children []*child
	tee      io.Writer
}

// newProcGroup prepares up to n children; ctx ending interrupts them.
func newProcGroup(ctx context.Context, env Env, n int) (*procGroup, error) {
	exe := env.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("storm: find this binary for the worker processes: %w", err)
		}
	}
	args := env.WorkerArgs
	if args == nil {
		args = []string{"storm-worker"}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("storm: worker pipe: %w", err)
	}
	g := &procGroup{env: env, exe: exe, args: args, pipeR: r, pipeW: w, signals: make(chan childSignal, 2*n)}
	g.ctx, g.cancel = context.WithCancel(ctx)
	if env.Stderr != nil {
		g.tee = &lockedWriter{w: env.Stderr} // the children write at the same time
	}
	return g, nil
}

// start launches one child with job; its events go to col (nil for serving children).
func (g *procGroup) start(job workerJob, col *collector) error {
	raw, err := json.Marshal(job)
	if err != nil {
		return err
	}
	c := &child{index: len(g.children), base: job.IndexBase, n: job.Spec.N, stderr: &tailBuffer{max: 8 << 10, tee: g.tee}}
	c.cmd = exec.CommandContext(g.ctx, g.exe, g.args...)
	// Stopped, a child is interrupted first: it cancels its requests and reports them.
	c.cmd.Cancel = func() error { return c.cmd.Process.Signal(os.Interrupt) }
	c.cmd.Env = append(append(os.Environ(), WorkerEnvVar+"=1"), g.env.WorkerEnv...)
	c.cmd.Stdin = bytes.NewReader(raw)
	c.cmd.Stderr = c.stderr
	c.cmd.ExtraFiles = []*os.File{g.pipeR}
	c.cmd.WaitDelay = 5 * time.Second
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("storm: start worker %s: %w", g.exe, err)
	}
	g.children = append(g.children, c)
	g.readers.Go(func() { readChild(c, stdout, col, g.signals) })
	return nil
}

// started hands the pipe's read end to the children alone (so EOF reaches them when the
// parent closes its end or dies).
func (g *procGroup) started() { _ = g.pipeR.Close() }

// waitReady waits until every child is ready (parked at the barrier, or listening).
func (g *procGroup) waitReady(ctx context.Context) error {
	timeout := g.env.ReadyTimeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for ready := 0; ready < len(g.children); {
		select {
		case s := <-g.signals:
			if s.ready {
				ready++
				continue
			}
			g.cancel()
			g.readers.Wait()
			c := g.children[s.index]
			if c.code == "" {
				// No word from the child: say how it ended (a signal, an exit status).
				if werr := c.cmd.Wait(); werr != nil {
					return childError(c, "exited before it was ready ("+werr.Error()+")")
				}
			}
			return childError(c, "exited before it was ready")
		case <-timer.C:
			return apperr.New(apperr.Internal, "storm: the worker processes were not ready within %s", timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// release wakes every firing child at the same moment: one write of one byte per child.
func (g *procGroup) release() error {
	_, err := g.pipeW.Write(bytes.Repeat([]byte{'G'}, len(g.children)))
	_ = g.pipeW.Close()
	if err != nil {
		return fmt.Errorf("storm: release the barrier: %w", err)
	}
	return nil
}

// wait waits for every child to end and says what went wrong with them (nothing when ctx
// ended: they were interrupted on purpose).
func (g *procGroup) wait(ctx context.Context) error {
	g.readers.Wait()
	var problems []string
	for _, c := range g.children {
		werr := c.cmd.Wait()
		switch {
		case ctx.Err() != nil:
		case werr != nil:
			problems = append(problems, childProblem(c, werr.Error()))
		case !c.done:
			problems = append(problems, childProblem(c, "ended without reporting done"))
		case c.bad > 0:
			problems = append(problems, childProblem(c, fmt.Sprintf("reported %d events outside its requests", c.bad)))
		}
	}
	g.children = nil
	if len(problems) == 0 {
		return nil
	}
	return apperr.New(apperr.Internal, "%s", strings.Join(problems, "; "))
}

// close reaps whatever is still running: it interrupts the children, closes the pipe and
// waits; safe after wait.
func (g *procGroup) close() {
	_ = g.pipeW.Close()
	if g.children != nil {
		g.cancel()
		g.readers.Wait()
		for _, c := range g.children {
			_ = c.cmd.Wait()
		}
		g.children = nil
	}
	g.cancel()
}

// runChildren fires the storm from spec.Processes child processes released together.
func runChildren(ctx context.Context, r *stormRun) (time.Time, error) {
	spec, env := r.spec, r.env
	if spec.Via == stormtypes.ViaInproc && env.DSN == "" {
		return time.Time{}, errors.New("storm: Env.DSN is required for a multi-process storm")
	}
	claim, cleanup, err := r.faultClaim()
	if err != nil {
		return time.Time{}, err
	}
	defer cleanup()
	g, err := newProcGroup(ctx, env, spec.Processes)
	if err != nil {
		return time.Time{}, err
	}
	defer g.close()

	base := 0
	for i := range spec.Processes {
		n := spec.PerProcess(i)
		job := newWorkerJob(spec, env)
		job.IndexBase, job.FaultClaim, job.URLs, job.Token = base, claim, r.servers.urls, r.servers.token
		job.Spec.N, job.Spec.Processes = n, 1
		job.Spec.Concurrency = min(spec.Concurrency, n)
		job.AppName, job.MaxConns = appName(spec.ID, 'p', i+1), poolSize(job.Spec.Concurrency+2, env.MaxConns)
		if err := g.start(job, r.col); err != nil {
			g.started()
			return time.Time{}, err
		}
		base += n
	}
	g.started()
	if err := g.waitReady(ctx); err != nil {
		return time.Time{}, err
	}
	released := time.Now()
	if err := g.release(); err != nil {
		return time.Time{}, err
	}
	werr := g.wait(ctx)
	if err := ctx.Err(); err != nil {
		return released, err
	}
	return released, werr
}

// startServers starts spec.Servers serving children on loopback and returns their URLs; stop
// shuts them down gracefully (their in-flight requests finish) and reaps them.
func startServers(ctx context.Context, r *stormRun, token string) ([]string, func(), error) {
	spec, env := r.spec, r.env
	claim, cleanup, err := r.faultClaim()
	if err != nil {
		return nil, nil, err
	}
	// Not cut by the storm's stop: the clients are, and the servers then end their requests.
	g, err := newProcGroup(context.WithoutCancel(ctx), env, spec.Servers)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	stop := func() {
		_ = g.pipeW.Close() // EOF on the lifeline: each server shuts down
		g.readers.Wait()
		g.close()
		cleanup()
	}
	perServer := (spec.Concurrency*spec.Processes + spec.Servers - 1) / spec.Servers
	for i := range spec.Servers {
		job := newWorkerJob(spec, env)
		job.Role, job.FaultClaim, job.Token, job.MaxBodyBytes = roleServe, claim, token, env.MaxBodyBytes
		job.AppName, job.MaxConns = appName(spec.ID, 's', i+1), poolSize(perServer+2, env.MaxConns)
		if err := g.start(job, nil); err != nil {
			g.started()
			stop()
			return nil, nil, err
		}
	}
	g.started()
	if err := g.waitReady(ctx); err != nil {
		stop()
		return nil, nil, err
	}
	urls := make([]string, len(g.children))
	for i, c := range g.children {
		urls[i] = c.url
	}
	return urls, stop, nil
}

// faultClaim makes the claim file of a FailFirst storm spread over processes.
func (r *stormRun) faultClaim() (string, func(), error) {
	if !r.spec.FailFirst {
		return "", func() {}, nil
	}
	if r.claim != "" {
		return r.claim, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "idemwork-storm-")
	if err != nil {
		return "", nil, err
	}
	r.claim = filepath.Join(dir, "fault.claim")
	return r.claim, func() { _ = os.RemoveAll(dir) }, nil
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
		case "ready", "listening":
			c.pid, c.url = m.PID, m.URL
			signals <- childSignal{index: c.index, ready: true}
		case "event":
			if col == nil || m.Event == nil || m.Event.Index < c.base || m.Event.Index >= c.base+c.n {
				c.bad++
				continue
			}
			col.add(*m.Event)
		case "error":
			c.msg, c.code = m.Msg, m.Code
		case "done":
			c.done = true
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	signals <- childSignal{index: c.index}
}

// childError says what went wrong with a worker process, in words for the storm's user, with
// the code the child's own error carried (a worker whose database session was terminated while it
// got ready is DATABASE_UNAVAILABLE, as the same failure in this process would be), else
// INTERNAL. The child's message is already the coded one a client would be told (ServeWorker).
func childError(c *child, what string) error {
	code := apperr.Internal
	if _, known := slices.BinarySearch(apperr.Codes(), c.code); known {
		code = c.code
	}
	return apperr.New(code, "%s", childProblem(c, what))
}

func childProblem(c *child, what string) string {
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
	return b.String()
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
