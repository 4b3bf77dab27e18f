package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Options configures where and how the private cluster runs.
type Options struct {
	// DataDir is the cluster's PGDATA. It is created (with initdb) when it holds no PG_VERSION.
	DataDir string
	// BinDir forces a server installation (IDEMWORK_PG_BINDIR); empty searches (see FindBinaries).
	BinDir string
	// TCPPort: 0 listens on the private socket only; > 0 also listens on 127.0.0.1 at that port,
	// or at a free one if it is taken; -1 picks any free port.
	TCPPort int
	// Durable keeps fsync on. The persistent default is durable; the test cluster is not.
	Durable bool
	// Detached starts a server that outlives this process (idemwork db start).
	Detached bool
	// ServerUser is who runs initdb and postgres when this process is root; default "postgres".
	ServerUser string
	// Settings are extra server settings passed as -c name=value.
	Settings map[string]string
	// StartTimeout bounds the wait for readiness; default 60 s.
	StartTimeout time.Duration
}

// Cluster is a running server, started by this process or found running.
type Cluster struct {
	DataDir   string
	SocketDir string
	Port      int
	PID       int
	Version   string
	// Owned is true when this process started the server and must stop it.
	Owned bool

	listenTCP bool
	password  string // the postgres role's TCP password (when listening on TCP)
	logPath   string
	exited    chan struct{} // closed when an owned, attached server exits
}

const (
	pidFile      = "postmaster.pid"
	logFileName  = "idemwork-server.log"
	socketSubdir = "sockets"
	// A Unix socket path must fit in sun_path (108 bytes with the terminating NUL).
	maxSocketPath = 107
	defaultPort   = 5432
)

// DefaultDataDir is SPEC §10.1's default: $XDG_DATA_HOME/idemwork/pg, else ~/.local/share/idemwork/pg,
// and /var/lib/idemwork/pg for root (the server's own user cannot enter /root).
func DefaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/idemwork/pg"
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "idemwork", "pg")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "idemwork", "pg")
	}
	return filepath.Join(home, ".local", "share", "idemwork", "pg")
}

// DSN returns a libpq-style URL for database name on this cluster (socket, or TCP when listening).
func (c *Cluster) DSN(database string) string {
	q := url.Values{}
	q.Set("host", c.SocketDir)
	q.Set("port", strconv.Itoa(c.Port))
	q.Set("user", "postgres")
	q.Set("sslmode", "disable")
	return "postgres:///" + url.PathEscape(database) + "?" + q.Encode()
}

// TCPDSN returns a loopback TCP URL with the cluster's password, or "" when the server does
// not listen on TCP. It holds a secret: print it only where the user asked for it.
func (c *Cluster) TCPDSN(database string) string {
	if !c.listenTCP {
		return ""
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword(serverRole, c.password),
		Host: fmt.Sprintf("127.0.0.1:%d", c.Port), Path: "/" + database, RawQuery: "sslmode=disable"}
	return u.String()
}

// ListensTCP reports whether the server listens on loopback TCP.
func (c *Cluster) ListensTCP() bool { return c.listenTCP }

// Start returns a ready cluster for opts.DataDir: a server already running there is reused
// (never duplicated), otherwise one is created if needed and started.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.DataDir == "" {
		opts.DataDir = DefaultDataDir()
	}
	// Resolved before anything: the lock, the comparison with a running server's directory and
	// the server's -D all use the one real path, whatever symlink or ".." reached it.
	dataDir, err := ResolveDataDir(opts.DataDir)
	if err != nil {
		return nil, err
	}
	opts.DataDir = dataDir
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if err := os.MkdirAll(filepath.Dir(dataDir), 0o755); err != nil {
		return nil, fmt.Errorf("create the parent of data dir %s: %w", dataDir, err)
	}
	unlock, err := lockFile(ctx, dataDir+".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()

	if c, err := running(dataDir); err != nil {
		return nil, err
	} else if c != nil {
		return c, nil
	}

	cred, err := serverCredential(opts.ServerUser)
	if err != nil {
		return nil, err
	}
	wantMajor := 0
	if b, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION")); err == nil {
		wantMajor, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	bins, err := FindBinaries(ctx, opts.BinDir, wantMajor)
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := checkReachable(filepath.Dir(dataDir), cred); err != nil {
			return nil, err
		}
	}
	if wantMajor == 0 {
		if err := initCluster(ctx, bins, dataDir, cred, opts.Durable); err != nil {
			return nil, err
		}
	}
	if err := writeHBA(dataDir, cred); err != nil {
		return nil, err
	}
	// A loopback port found free a moment ago can be taken before the server binds it (another
	// process picked it too): then pick another and start again.
	for tries := 1; ; tries++ {
		c, err := launch(ctx, bins, opts, cred)
		if err == nil || !errors.Is(err, errPortTaken) || tries == 5 {
			return c, err
		}
	}
}

// errPortTaken: the server could not bind the loopback port picked for it.
var errPortTaken = errors.New("the loopback port was taken before the server could bind it")

// ServerCredential returns nil when a server may run as this process's user, or, when this
// process is root, the credential of the unprivileged user (name, default "postgres") to run it
// as: PostgreSQL and pgbouncer both refuse root.
func ServerCredential(name string) (*syscall.Credential, error) { return serverCredential(name) }

// serverCredential returns nil when the server may run as this process's user, or the
// credential of the unprivileged user to run it as when this process is root.
func serverCredential(name string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if name == "" {
		name = "postgres"
	}
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("running as root, the embedded PostgreSQL must run as the unprivileged user %q, "+
			"which does not exist: install the postgresql package (it creates that user), create the user, "+
			"or run idemwork as a normal user", name)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// checkReachable verifies that the server user can traverse every directory down to dir;
// without this a root-only parent surfaces as a useless "fork/exec: permission denied".
func checkReachable(dir string, cred *syscall.Credential) error {
	path := "/"
	for _, part := range strings.Split(strings.TrimPrefix(filepath.Clean(dir), "/"), "/") {
		if part != "" {
			path = filepath.Join(path, part)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			if errors.Is(err, syscall.ENOENT) {
				return nil // created below by us; MkdirAll made the parents 0755
			}
			return fmt.Errorf("stat %s: %w", path, err)
		}
		var bit uint32
		switch {
		case st.Uid == cred.Uid:
			bit = 0o100
		case st.Gid == cred.Gid:
			bit = 0o010
		default:
			bit = 0o001
		}
		if st.Mode&bit == 0 {
			return fmt.Errorf("the embedded PostgreSQL runs as uid %d, which cannot enter %s (mode %04o, owner uid %d): "+
				"choose a --data-dir outside it (as root the default is %s) or grant it search permission",
				cred.Uid, path, st.Mode&0o7777, st.Uid, "/var/lib/idemwork/pg")
		}
	}
	return nil
}

func initCluster(ctx context.Context, bins Binaries, dataDir string, cred *syscall.Credential, durable bool) error {
	if entries, err := os.ReadDir(dataDir); err == nil && len(entries) > 0 {
		return fmt.Errorf("data dir %s is not empty but holds no PostgreSQL cluster (no PG_VERSION): "+
			"empty it or choose another --data-dir", dataDir)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if err := chownIfRoot(dataDir, cred); err != nil {
		return err
	}
	args := []string{"-D", dataDir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-instructions"}
	if !durable {
		args = append(args, "--no-sync")
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bins.Dir, "initdb"), args...)
	cmd.Dir = "/"
	cmd.Env = []string{"LC_ALL=C", "PATH=" + os.Getenv("PATH")}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(dataDir) // a half-made cluster would block every later start
		return fmt.Errorf("initdb failed (%v): %s", err, tail(out.Bytes(), 2000))
	}
	return nil
}

func chownIfRoot(path string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	if err := os.Chown(path, int(cred.Uid), int(cred.Gid)); err != nil {
		return fmt.Errorf("chown %s to the server user: %w", path, err)
	}
	return nil
}

// socketDirFor picks a private socket directory, inside the data dir when its path is short
// enough for sun_path, else under the temp dir with a name derived from the data dir.
func socketDirFor(dataDir string, port int) string {
	dir := filepath.Join(dataDir, socketSubdir)
	if len(dir)+len("/.s.PGSQL.")+len(strconv.Itoa(port)) <= maxSocketPath {
		return dir
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("idemwork-%x", fnv32(dataDir)))
}

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// pickPort returns port if 127.0.0.1:port is free, else any free loopback port.
func pickPort(port int) (int, error) {
	if port > 0 {
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			_ = l.Close()
			return port, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func launch(ctx context.Context, bins Binaries, opts Options, cred *syscall.Credential) (*Cluster, error) {
	dataDir := opts.DataDir
	c := &Cluster{DataDir: dataDir, Version: bins.Version, Owned: true, logPath: filepath.Join(dataDir, logFileName)}
	listen := ""
	c.Port = defaultPort
	if opts.TCPPort != 0 {
		p, err := pickPort(opts.TCPPort)
		if err != nil {
			return nil, err
		}
		c.Port, listen, c.listenTCP = p, "127.0.0.1", true
	}
	c.SocketDir = socketDirFor(dataDir, c.Port)
	if err := os.MkdirAll(c.SocketDir, 0o700); err != nil {
		return nil, fmt.Errorf("create socket dir: %w", err)
	}
	if err := chownIfRoot(c.SocketDir, cred); err != nil {
		return nil, err
	}
	if err := checkPrivateDir(c.SocketDir, cred); err != nil {
		return nil, err
	}
	if c.listenTCP {
		pw, err := ensurePassword(dataDir, cred)
		if err != nil {
			return nil, err
		}
		c.password = pw
	}
	logf, err := openLog(c.logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	// The log lives in the data dir: the server must be able to read it (pg_basebackup copies it).
	if err := chownIfRoot(c.logPath, cred); err != nil {
		return nil, err
	}
	logStart, _ := logf.Seek(0, io.SeekEnd)

	args := []string{"-D", dataDir, "-k", c.SocketDir, "-p", strconv.Itoa(c.Port), "-c", "listen_addresses=" + listen,
		"-c", "max_connections=300", "-c", "unix_socket_permissions=0700"}
	if !opts.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	for k, v := range opts.Settings {
		args = append(args, "-c", k+"="+v)
	}
	cmd := exec.Command(filepath.Join(bins.Dir, "postgres"), args...)
	cmd.Dir = "/"
	cmd.Env = []string{"LC_ALL=C", "PATH=" + os.Getenv("PATH")}
	cmd.Stdout, cmd.Stderr = logf, logf
	attr := &syscall.SysProcAttr{Credential: cred}
	if opts.Detached {
		attr.Setsid = true // no controlling terminal: closing it must not stop the server
	} else {
		attr.Setpgid = true             // Ctrl-C in the terminal reaches us, not the server first
		attr.Pdeathsig = syscall.SIGINT // backstop if we die without stopping it (fast shutdown)
	}
	cmd.SysProcAttr = attr

	if err := c.spawn(cmd, opts.Detached); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	err = c.waitReady(ctx, opts.StartTimeout, logStart)
	// After a SIGKILLed postmaster its backends take a moment to notice and exit; until then
	// the server refuses to start over their shared memory. Wait for them instead of failing.
	for tries := 0; err != nil && tries < 100 && strings.Contains(c.logTail(logStart), "pre-existing shared memory block"); tries++ {
		time.Sleep(50 * time.Millisecond)
		logStart, _ = logf.Seek(0, io.SeekEnd)
		cmd = rebuild(cmd)
		if err = c.spawn(cmd, opts.Detached); err != nil {
			return nil, fmt.Errorf("start postgres: %w", err)
		}
		err = c.waitReady(ctx, opts.StartTimeout, logStart)
	}
	if err == nil && c.listenTCP {
		err = setRolePassword(ctx, c.DSN("postgres"), c.password)
	}
	if err != nil {
		if !opts.Detached {
			_ = c.Stop(context.Background())
		}
		// Another process may have won the race to start this data dir: reuse its server.
		if other, rerr := running(dataDir); rerr == nil && other != nil {
			return other, nil
		}
		if c.listenTCP && strings.Contains(c.logTail(logStart), "Address already in use") {
			return nil, fmt.Errorf("%w (port %d): %v", errPortTaken, c.Port, err)
		}
		return nil, err
	}
	if opts.Detached {
		c.Owned = false // it belongs to nobody now; db stop ends it
	}
	return c, nil
}

// rebuild copies a used exec.Cmd so the same server command can be started again.
func rebuild(old *exec.Cmd) *exec.Cmd {
	cmd := exec.Command(old.Path, old.Args[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = old.Dir, old.Env, old.Stdout, old.Stderr
	attr := *old.SysProcAttr
	cmd.SysProcAttr = &attr
	return cmd
}

// spawn starts the server. An attached server is started from a goroutine locked to its OS
// thread which then waits for it: Linux ties Pdeathsig to the thread that forked, so that thread
// must live exactly as long as the server does.
func (c *Cluster) spawn(cmd *exec.Cmd, detached bool) error {
	if detached {
		if err := cmd.Start(); err != nil {
			return err
		}
		c.PID = cmd.Process.Pid
		c.exited = make(chan struct{})
		go func() { _ = cmd.Wait(); close(c.exited) }()
		return nil
	}
	started := make(chan error, 1)
	c.exited = make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		c.PID = cmd.Process.Pid
		started <- nil
		_ = cmd.Wait()
		close(c.exited)
	}()
	return <-started
}

func (c *Cluster) waitReady(ctx context.Context, timeout time.Duration, logStart int64) error {
	deadline := time.Now().Add(timeout)
	for {
		if pf, err := readPidFile(c.DataDir); err == nil && pf.pid == c.PID && accepting(pf.status) {
			return nil
		}
		select {
		case <-c.exited:
			return fmt.Errorf("postgres exited during start-up; its log says:\n%s", c.logTail(logStart))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(3 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres was not ready after %s; its log says:\n%s", timeout, c.logTail(logStart))
		}
	}
}

func (c *Cluster) logTail(from int64) string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if from > 0 && from <= int64(len(b)) {
		b = b[from:]
	}
	return tail(b, 3000)
}

func openLog(path string) (*os.File, error) {
	if st, err := os.Stat(path); err == nil && st.Size() > 16<<20 {
		_ = os.Truncate(path, 0)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open server log: %w", err)
	}
	return f, nil
}

// Stop ends a server this process started; a reused server is left alone.
func (c *Cluster) Stop(ctx context.Context) error {
	if c == nil || !c.Owned {
		return nil
	}
	c.Owned = false
	return stopPID(ctx, c.PID, c.exited)
}

// stopPID asks for a fast shutdown (SIGINT), escalates to SIGQUIT after 10 s and SIGKILL after
// 15 s. exited may be nil when the server is not our child; then the pid is polled.
func stopPID(ctx context.Context, pid int, exited <-chan struct{}) error {
	gone := func() bool {
		if exited != nil {
			select {
			case <-exited:
				return true
			default:
				return false
			}
		}
		return !alive(pid)
	}
	if gone() {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGINT)
	start := time.Now()
	signalled := syscall.SIGINT
	for !gone() {
		switch {
		case time.Since(start) > 15*time.Second && signalled != syscall.SIGKILL:
			_ = syscall.Kill(pid, syscall.SIGKILL)
			signalled = syscall.SIGKILL
		case time.Since(start) > 10*time.Second && signalled == syscall.SIGINT:
			_ = syscall.Kill(pid, syscall.SIGQUIT)
			signalled = syscall.SIGQUIT
		case time.Since(start) > 30*time.Second:
			return fmt.Errorf("postgres (pid %d) did not stop", pid)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}

func tail(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
