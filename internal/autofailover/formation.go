package autofailover

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/embedded"
)

// Options configures Start.
type Options struct {
	// Dir holds everything of the formation (data dirs, sockets, pg_autoctl's configuration and
	// state, logs). It is created when missing; the server user must be able to reach it.
	Dir string
	// BinDir holds the PostgreSQL server binaries (default: as the embedded cluster finds them).
	BinDir string
	// Ports are the monitor's and the two nodes' loopback ports (zeros: free ports).
	Ports [3]int
	// Fast shortens the monitor's health checks and timeouts (a node is declared dead after
	// about 2 s, not 30–50 s): an unplanned failover then takes seconds, as a test needs. A
	// production formation keeps pg_auto_failover's defaults, which ride out a slow network.
	Fast bool
	// StartTimeout bounds Start (default 5 minutes: a loaded machine takes a minute for an initdb).
	StartTimeout time.Duration
}

// Node is one PostgreSQL node of a formation this process started.
type Node struct {
	Name   string
	Host   string
	Port   int
	PGData string

	mu     sync.Mutex
	keeper *proc
}

// Addr is the node's host:port.
func (n *Node) Addr() string { return n.Host + ":" + strconv.Itoa(n.Port) }

// Formation is a pg_auto_failover formation this process started and stops.
type Formation struct {
	Monitor
	dir     string
	bins    embedded.Binaries
	autoctl string
	cred    *syscall.Credential
	env     []string

	monitorPort int
	monitorData string
	monitor     *proc
	Nodes       [2]*Node
}

// ErrNoAutoctl is returned when pg_autoctl is not installed.
var ErrNoAutoctl = errors.New("pg_autoctl (pg_auto_failover) is not installed")

// Start creates a formation in opts.Dir — a monitor, then a first node (the primary), then a
// second node cloned from it (the synchronous secondary) — and returns once the secondary
// replicates synchronously. On error everything it started is stopped.
func Start(ctx context.Context, opts Options) (*Formation, error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	bins, err := embedded.FindBinaries(ctx, opts.BinDir, 0)
	if err != nil {
		return nil, err
	}
	autoctl, err := findAutoctl(bins)
	if err != nil {
		return nil, err
	}
	cred, err := embedded.ServerCredential("")
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	f := &Formation{dir: dir, bins: bins, autoctl: autoctl, cred: cred}
	if err := socketDir(cred); err != nil {
		return nil, err
	}
	for _, d := range []string{dir, f.path("home")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
		if cred != nil {
			if err := os.Chown(d, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, fmt.Errorf("chown %s to the server user: %w", d, err)
			}
		}
	}
	home := f.path("home")
	// pg_autoctl keeps its configuration and state under XDG directories: these keep them
	// inside the formation's directory, away from the server user's own.
	f.env = []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "config"), "XDG_DATA_HOME=" + filepath.Join(home, "data"),
		"XDG_RUNTIME_DIR=" + filepath.Join(home, "run"), "LC_ALL=C",
		"PATH=" + bins.Dir + ":/usr/local/bin:/usr/bin:/bin"}
	ports, err := freePorts(opts.Ports)
	if err != nil {
		return nil, err
	}
	f.monitorPort, f.monitorData = ports[0], f.path("monitor")
	f.Monitor = Monitor{URL: fmt.Sprintf("postgres://autoctl_node@127.0.0.1:%d/pg_auto_failover?sslmode=disable", f.monitorPort)}
	for i := range f.Nodes {
		name := fmt.Sprintf("node%d", i+1)
		f.Nodes[i] = &Node{Name: name, Host: "127.0.0.1", Port: ports[i+1], PGData: f.path(name)}
	}
	if err := f.create(ctx, opts.Fast); err != nil {
		f.Stop()
		return nil, err
	}
	return f, nil
}

func (f *Formation) create(ctx context.Context, fast bool) error {
	common := []string{"--pgctl", filepath.Join(f.bins.Dir, "pg_ctl"), "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--run"}
	m, err := f.spawn("monitor", append([]string{"create", "monitor", "--pgdata", f.monitorData, "--pgport", strconv.Itoa(f.monitorPort),
		"--listen", "127.0.0.1"}, common...)...)
	if err != nil {
		return err
	}
	f.monitor = m
	if err := f.waitMonitor(ctx); err != nil {
		return err
	}
	if fast {
		if err := f.tuneMonitor(ctx); err != nil {
			return err
		}
	}
	for i, n := range f.Nodes {
		p, err := f.spawn(n.Name, append([]string{"create", "postgres", "--pgdata", n.PGData, "--pgport", strconv.Itoa(n.Port),
			"--listen", "127.0.0.1", "--name", n.Name, "--monitor", f.URL}, common...)...)
		if err != nil {
			return err
		}
		n.setKeeper(p)
		// The first node must be registered (single) before the second joins as its standby.
		if i == 0 {
			if _, err := f.Wait(ctx, n.Name+" initialised as the primary", func(s State) bool {
				p, ok := s.Primary()
				return ok && p.Name == n.Name
			}); err != nil {
				return f.explain(err, n)
			}
		}
	}
	if _, err := f.WaitSynchronous(ctx); err != nil {
		return f.explain(err, f.Nodes[1])
	}
	return nil
}

// explain adds the tail of a node's pg_autoctl log to err.
func (f *Formation) explain(err error, n *Node) error {
	return fmt.Errorf("%w; %s's pg_autoctl log ends with:\n%s", err, n.Name, f.LogTail(n.Name, 1500))
}

// LogTail is the end of pg_autoctl's log of a node ("node1", "node2") or of the monitor.
func (f *Formation) LogTail(name string, n int) string {
	b, err := os.ReadFile(f.path(name + ".log"))
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func (f *Formation) path(name string) string { return filepath.Join(f.dir, name) }

// Dir is the formation's directory.
func (f *Formation) Dir() string { return f.dir }

// URI is what clients use to reach the formation's primary, as `pg_autoctl show uri
// --formation default` prints it: both nodes, target_session_attrs=read-write (libpq and pgx
// try the hosts in order and keep the one that accepts writes), here as the postgres role over
// loopback (trust) to database.
func (f *Formation) URI(database string) string {
	hosts := make([]string, len(f.Nodes))
	for i, n := range f.Nodes {
		hosts[i] = n.Addr()
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?target_session_attrs=read-write&sslmode=disable", strings.Join(hosts, ","), url.PathEscape(database))
}

// NodeDSN reaches database on one node directly.
func (f *Formation) NodeDSN(n *Node, database string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", n.Addr(), url.PathEscape(database))
}

// Node returns the node named name (nil when none is).
func (f *Formation) Node(name string) *Node {
	for _, n := range f.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Other is the node that is not n.
func (f *Formation) Other(n *Node) *Node {
	if f.Nodes[0] == n {
		return f.Nodes[1]
	}
	return f.Nodes[0]
}

// PrimaryNode waits for a settled primary and returns it.
func (f *Formation) PrimaryNode(ctx context.Context) (*Node, error) {
	st, err := f.Wait(ctx, "a settled primary", func(s State) bool { _, ok := s.Primary(); return ok })
	if err != nil {
		return nil, err
	}
	p, _ := st.Primary()
	return f.Node(p.Name), nil
}

// PerformFailover runs `pg_autoctl perform failover` against the monitor, as an operator
// would, and waits until the other node is the primary with a synchronous secondary. It
// returns the new primary.
func (f *Formation) PerformFailover(ctx context.Context) (*Node, error) {
	before, err := f.WaitSynchronous(ctx)
	if err != nil {
		return nil, err
	}
	old, _ := before.Primary()
	// --wait 0: the command only asks; the wait is ours, bounded by ctx, not by its 60 s (a
	// loaded machine can take longer to bring the old primary back as the secondary).
	if out, err := f.autoctlRun(ctx, "perform", "failover", "--pgdata", f.monitorData, "--wait", "0"); err != nil {
		return nil, fmt.Errorf("pg_autoctl perform failover: %v: %s", err, tailString(out, 1500))
	}
	st, err := f.WaitNewPrimary(ctx, old.Name, State.Synchronous)
	if err != nil {
		return nil, err
	}
	p, _ := st.Primary()
	return f.Node(p.Name), nil
}

// KillPostmaster sends SIGKILL to node n's postmaster, as a crash would. Its keeper sees
// Postgres gone and starts it again (crash recovery); the monitor does not fail over unless
// the node stays down past its timeouts.
func (f *Formation) KillPostmaster(n *Node) error {
	pid, err := postmasterPID(n.PGData)
	if err != nil {
		return err
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// KillNode sends SIGKILL to node n's keeper, its postmaster and every backend at once — the
// machine died. The monitor then fails over to the other node (if it was the primary, once the
// other node is promoted: WaitNewPrimary). The node stays down until RestartNode.
func (f *Formation) KillNode(n *Node) error {
	n.mu.Lock()
	k := n.keeper
	n.mu.Unlock()
	if k == nil || k.done() {
		return fmt.Errorf("%s is not running", n.Name)
	}
	// Every descendant, listed before any dies: a postmaster's orphaned backends would linger
	// (a stopped one forever) and hold its shared memory, so the node could never start again.
	pids := descendants(k.cmd.Process.Pid)
	k.killGroup()
	for _, p := range pids {
		p.kill()
	}
	<-k.exited
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range pids {
		for p.alive() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// procID names one process: its pid and its start time, so a pid the system gave to another
// process since is never signalled.
type procID struct {
	pid   int
	start string
}

func (p procID) alive() bool {
	st, ok := startTime(p.pid)
	return ok && st == p.start
}

func (p procID) kill() {
	if p.alive() {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// statFields reads /proc/<pid>/stat after the command name (which may hold spaces): state,
// ppid, … (field 3 onwards of proc(5)).
func statFields(pid int) ([]string, bool) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, false
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return f, len(f) >= 20
}

func startTime(pid int) (string, bool) {
	f, ok := statFields(pid)
	if !ok || f[0] == "Z" {
		return "", false
	}
	return f[19], true // starttime, field 22 of proc(5)
}

// descendants lists the live descendants of pid (Linux /proc), children before grandchildren.
func descendants(pid int) []procID {
	children := map[int][]procID{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, ok := statFields(p)
		if !ok || f[0] == "Z" {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], procID{pid: p, start: f[19]})
		}
	}
	var out []procID
	queue := []int{pid}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		for _, c := range children[next] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// RestartNode starts a killed node's keeper again (`pg_autoctl run`): it rejoins the formation
// as the secondary (rewinding what the old timeline had that the new primary has not).
func (f *Formation) RestartNode(n *Node) error {
	n.mu.Lock()
	running := n.keeper != nil && !n.keeper.done()
	n.mu.Unlock()
	if running {
		return fmt.Errorf("%s is running", n.Name)
	}
	p, err := f.spawn(n.Name, "run", "--pgdata", n.PGData)
	if err != nil {
		return err
	}
	n.setKeeper(p)
	return nil
}

// Running reports whether node n's keeper is running.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.keeper != nil && !n.keeper.done()
}

func (n *Node) setKeeper(p *proc) {
	n.mu.Lock()
	n.keeper = p
	n.mu.Unlock()
}

// Stop stops every keeper and the monitor (each stops its Postgres: SIGTERM, then SIGKILL of
// its whole process group after 30 s) and waits until every process is gone. The directory
// is left for the caller to remove.
func (f *Formation) Stop() {
	var wg sync.WaitGroup
	for _, n := range f.Nodes {
		if n == nil {
			continue
		}
		n.mu.Lock()
		k := n.keeper
		n.mu.Unlock()
		if k != nil {
			wg.Go(func() { k.stop(30 * time.Second) })
		}
	}
	wg.Wait()
	if f.monitor != nil {
		f.monitor.stop(30 * time.Second)
	}
}

func (f *Formation) waitMonitor(ctx context.Context) error {
	for {
		conn, err := f.connect(ctx)
		if err == nil {
			var ok bool
			err = conn.QueryRow(ctx, `SELECT count(*) > 0 FROM pgautofailover.formation`).Scan(&ok)
			conn.Close(context.Background())
			if err == nil && ok {
				return nil
			}
		}
		if f.monitor.done() {
			return fmt.Errorf("the pg_auto_failover monitor exited during start-up; its log ends with:\n%s", f.LogTail("monitor", 1500))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the pg_auto_failover monitor did not start: %w (last: %v); its log ends with:\n%s", ctx.Err(), err, f.LogTail("monitor", 1500))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// fastSettings make the monitor notice a dead node within about 2 s and promote its secondary
// after 10 s instead of the default 30 s it gives the old primary to demote itself. (Shorter
// than that, a planned failover on a loaded machine times out the draining primary, which then
// has to be rewound or copied anew before it is a secondary again.)
var fastSettings = [][2]string{
	{"pgautofailover.health_check_period", "1000"},
	{"pgautofailover.health_check_timeout", "1000"},
	{"pgautofailover.health_check_retry_delay", "200"},
	{"pgautofailover.health_check_max_retries", "1"},
	{"pgautofailover.node_considered_unhealthy_timeout", "2000"},
	{"pgautofailover.primary_demote_timeout", "10000"},
}

func (f *Formation) tuneMonitor(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", f.monitorPort))
	if err != nil {
		return fmt.Errorf("tune the monitor: %w", err)
	}
	defer conn.Close(context.Background())
	for _, s := range fastSettings {
		if _, err := conn.Exec(ctx, "ALTER SYSTEM SET "+s[0]+" = "+s[1]); err != nil {
			return fmt.Errorf("tune the monitor: %s: %w", s[0], err)
		}
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("tune the monitor: %w", err)
	}
	return nil
}

// autoctlRun runs one pg_autoctl command to its end and returns its output.
func (f *Formation) autoctlRun(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, f.autoctl, args...)
	cmd.Dir = "/"
	cmd.Env = f.env
	if f.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: f.cred}
	}
	return cmd.CombinedOutput()
}

// proc is a long-running pg_autoctl process (a monitor or a node's keeper) in a process group
// of its own, with its postmaster and backends.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

func (p *proc) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

func (p *proc) killGroup() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

// stop asks pg_autoctl to stop (SIGTERM: it stops its Postgres with a fast shutdown) and kills
// the whole process group after grace, and any descendant left outside it.
func (p *proc) stop(grace time.Duration) {
	if p.done() {
		p.killGroup() // a postmaster orphaned by a killed keeper
		return
	}
	pids := descendants(p.cmd.Process.Pid)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
	}
	p.killGroup()
	<-p.exited
	for _, p := range pids {
		p.kill() // gone already, unless stuck (a stopped backend)
	}
}

// spawn starts pg_autoctl with args as the server user, its output appended to <name>.log. The
// process leads a new process group (so a node's keeper, postmaster and backends can be killed
// together) and gets SIGTERM if this process dies first: Linux ties that to the forking thread,
// so a goroutine locked to its thread starts and waits for it.
func (f *Formation) spawn(name string, args ...string) (*proc, error) {
	logf, err := os.OpenFile(f.path(name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(f.autoctl, args...)
	cmd.Dir = "/"
	cmd.Env = f.env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: f.cred, Setpgid: true, Pdeathsig: syscall.SIGTERM}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		defer logf.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			close(p.exited)
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start pg_autoctl %s: %w", strings.Join(args[:2], " "), err)
	}
	return p, nil
}

// defaultSocketDir is where the PostgreSQL of Debian and Ubuntu puts its sockets unless told
// otherwise. pg_autoctl starts its servers with only a port and listen_addresses, so theirs go
// there too (under their own port numbers), and pg_autoctl reaches them there.
const defaultSocketDir = "/var/run/postgresql"

// socketDir makes sure the servers can create their sockets: postgresql-common creates the
// directory at install and at boot; a container that has neither rebooted nor kept /run may
// lack it. As root it is created as postgresql-common does (the server user's, 2775).
func socketDir(cred *syscall.Credential) error {
	if st, err := os.Stat(defaultSocketDir); err == nil && st.IsDir() {
		return nil
	}
	if cred == nil {
		return fmt.Errorf("%s does not exist: pg_autoctl's servers put their sockets there; create it for your user (or reinstall postgresql-common)", defaultSocketDir)
	}
	if err := os.MkdirAll(defaultSocketDir, 0o755); err != nil {
		return err
	}
	if err := os.Chown(defaultSocketDir, int(cred.Uid), int(cred.Gid)); err != nil {
		return err
	}
	return os.Chmod(defaultSocketDir, 0o775|os.ModeSetgid)
}

func findAutoctl(bins embedded.Binaries) (string, error) {
	if p := filepath.Join(bins.Dir, "pg_autoctl"); isExecutable(p) {
		return p, nil
	}
	if p, err := exec.LookPath("pg_autoctl"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%w: install postgresql-%d-auto-failover (Debian, Ubuntu) or pg_auto_failover for PostgreSQL %d", ErrNoAutoctl, bins.Major, bins.Major)
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// postmasterPID reads the first line of a data dir's postmaster.pid.
func postmasterPID(pgdata string) (int, error) {
	b, err := os.ReadFile(filepath.Join(pgdata, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("the postmaster of %s: %w", pgdata, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("the postmaster of %s: postmaster.pid starts with %q", pgdata, line)
	}
	return pid, nil
}

// freePorts returns want with each zero replaced by a free loopback port (all distinct).
func freePorts(want [3]int) ([3]int, error) {
	var out [3]int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for i, p := range want {
		if p != 0 {
			out[i] = p
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return out, fmt.Errorf("find a free loopback port: %w", err)
		}
		held = append(held, l)
		out[i] = l.Addr().(*net.TCPAddr).Port
	}
	return out, nil
}

func tailString(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
