package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/apperr"
)

// inject waits until the fault is due (dropping it if the storm ended first, but for a
// failover, which a round that drew one always gets) and injects it. It reports whether the
// fault happened.
func (e *engine) inject(ctx, storm context.Context, s scheduled) bool {
	select {
	case <-time.After(s.after):
	case <-storm.Done():
		if !slices.Contains(FailoverFaults, s.fault) {
			return false
		}
	}
	switch s.fault {
	case Terminate:
		n, err := e.ctl.terminate(ctx, s.count)
		if err != nil {
			return false // the server is restarting: there is nothing to terminate
		}
		e.countFault(Terminate, n)
		return n > 0
	case KillChild:
		pids := stormChildren(e.mark)
		if len(pids) == 0 {
			return false
		}
		if syscall.Kill(pids[s.count%len(pids)], syscall.SIGKILL) != nil {
			return false
		}
		e.countFault(KillChild, 1)
		return true
	case KillServer:
		if !e.srv.kill() {
			return false
		}
		e.countFault(KillServer, 1)
		return true
	case Restart:
		// Once begun, a restart finishes whatever the storm does (ctx, not the storm's context).
		if err := e.opts.Restart(ctx); err != nil {
			e.problem("restart: %v", err)
		}
		e.countFault(Restart, 1)
		return true
	case Failover, KillPrimary:
		// Like a restart, a failover once begun runs to its end: the round then retries its key
		// against the new primary.
		move := e.opts.Failover.PlannedFailover
		if s.fault == KillPrimary {
			move = e.opts.Failover.KillPrimary
		}
		if err := move(ctx); err != nil {
			e.problem("%s: %v", s.fault, err)
			return false
		}
		e.countFault(s.fault, 1)
		return true
	}
	return false
}

// childMarkVar names the environment variable that marks a soak's own worker processes.
const childMarkVar = "IDEMWORK_SOAK_CHILD"

// stormChildren lists this process's live `storm-worker` children that carry mark (NAME=value)
// in their environment (Linux /proc).
func stormChildren(mark string) []int {
	self := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so read after its closing paren.
		rest := stat[bytes.LastIndexByte(stat, ')')+1:]
		f := strings.Fields(string(rest))
		if len(f) < 2 || f[0] == "Z" || f[1] != strconv.Itoa(self) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte("storm-worker")) {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "environ"))
		if err == nil && slices.ContainsFunc(bytes.Split(environ, []byte{0}), func(v []byte) bool { return string(v) == mark }) {
			out = append(out, pid)
		}
	}
	return out
}

// control is the soak's own session, used to terminate the others.
type control struct {
	dsn  string
	conn *pgx.Conn
}

const controlApp = "idemwork-soak-control"

// terminate ends up to n sessions of the database other than this one, those inside a
// statement or a transaction first, and returns how many it ended.
func (c *control) terminate(ctx context.Context, n int) (int, error) {
	var lastErr error
	for range 2 {
		if c.conn == nil || c.conn.IsClosed() {
			cfg, err := pgx.ParseConfig(c.dsn)
			if err != nil {
				return 0, err
			}
			cfg.RuntimeParams["application_name"] = controlApp
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			c.conn, err = pgx.ConnectConfig(cctx, cfg)
			cancel()
			if err != nil {
				c.conn = nil
				return 0, err
			}
		}
		var ended int
		lastErr = c.conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM (
				SELECT pid FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
					AND usename = current_user AND application_name <> $2
				ORDER BY state = 'idle', random() LIMIT $1) s`, n, controlApp).Scan(&ended)
		if lastErr == nil {
			return ended, nil
		}
		c.close()
	}
	return 0, lastErr
}

func (c *control) close() {
	if c.conn != nil {
		_ = c.conn.Close(context.Background())
		c.conn = nil
	}
}

// server is the `idemwork serve` child HTTP rounds go to.
type server struct {
	exe  string
	args []string
	env  []string

	mu     sync.Mutex
	pid    int
	base   string
	exited chan struct{}
}

func newServer(dir, exe, dsn string, env []string, tokens map[string]string) (*server, error) {
	var cfg strings.Builder
	cfg.WriteString("[http.tokens]\n")
	for tok, owner := range tokens {
		fmt.Fprintf(&cfg, "%q = %q\n", tok, owner)
	}
	path := filepath.Join(dir, "serve.toml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		return nil, fmt.Errorf("soak: write the serve config: %w", err)
	}
	// The DSN travels in the environment, not in the arguments other users can read in ps.
	return &server{exe: exe, env: append(slices.Clone(env), "IDEMWORK_DSN="+dsn),
		args: []string{"--allow-writes", "--config", path, "--json", "serve", "--addr", "127.0.0.1:0"}}, nil
}

func (s *server) url() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.base
}

func (s *server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exited == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// start runs a new serve process and waits until it listens, retrying while the database is
// not reachable yet (a restart in progress).
func (s *server) start(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := s.startOnce(ctx)
		if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *server) startOnce(ctx context.Context) error {
	cmd := exec.Command(s.exe, s.args...)
	cmd.Env = append(os.Environ(), s.env...)
	cmd.Stderr = io.Discard // the access log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	// The serve process must not outlive the soak, even a SIGKILLed one: Pdeathsig, from a
	// thread that lives exactly as long as the child (Linux ties it to the forking thread).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("soak: start serve: %w", err)
	}
	listening := make(chan string, 1)
	go func() {
		var m struct {
			Listening string `json:"listening"`
		}
		_ = json.NewDecoder(stdout).Decode(&m)
		listening <- m.Listening
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case url := <-listening:
		if url == "" {
			_ = cmd.Process.Kill()
			<-exited
			return apperr.New(apperr.Internal, "soak: serve exited before it listened")
		}
		s.mu.Lock()
		s.pid, s.base, s.exited = cmd.Process.Pid, url, exited
		s.mu.Unlock()
		return nil
	case <-time.After(time.Minute):
	case <-ctx.Done():
	}
	_ = cmd.Process.Kill()
	<-exited
	return apperr.New(apperr.Internal, "soak: serve did not listen within a minute")
}

// kill sends SIGKILL to a running serve process and waits until it is gone.
func (s *server) kill() bool {
	s.mu.Lock()
	pid, exited := s.pid, s.exited
	s.mu.Unlock()
	if exited == nil || !s.running() {
		return false
	}
	if syscall.Kill(pid, syscall.SIGKILL) != nil {
		return false
	}
	<-exited
	return true
}

// stop ends a running serve process gracefully (SIGKILL after 15 s).
func (s *server) stop() {
	s.mu.Lock()
	pid, exited := s.pid, s.exited
	s.mu.Unlock()
	if exited == nil || !s.running() {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(pid, syscall.SIGKILL)
		<-exited
	}
}
