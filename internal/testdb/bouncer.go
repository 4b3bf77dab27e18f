package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemwork/idemwork/embedded"
	"github.com/idemwork/idemwork/store"
)

// Bouncer is a real pgbouncer (the machine's, Debian's package) in front of the test server,
// on a loopback port, with its own ini and auth file in a temp dir. Clients log in with
// scram-sha-256; pgbouncer reaches the server over its private socket.
type Bouncer struct {
	Mode store.Pooler
	Port int
	// PoolSize is the server connections per database and user (default_pool_size).
	PoolSize int
	user     string
	password string
	dir      string
	cmd      *exec.Cmd
	exited   chan struct{}
}

// Pool sizes of the test pgbouncers. In transaction pooling a server connection serves whoever
// has a transaction to run, so a storm opening more client connections than the pool queues in
// pgbouncer: the pool is kept small to prove it. In session pooling every client connection
// holds a server connection for its whole life, so the pool must be at least what all clients
// keep open (a storm's processes and their pools), or the surplus waits until one disconnects.
const (
	BouncerPoolSize        = 20
	SessionBouncerPoolSize = 150
)

// PgBouncer returns the pgbouncer of the test binary in mode (transaction or session), starting
// it on first use; Main stops it.
func PgBouncer(t testing.TB, mode store.Pooler) *Bouncer {
	t.Helper()
	shared.ensure(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if b := shared.bouncers[mode]; b != nil {
		return b
	}
	b, err := startBouncer(mode, BouncerOptions{})
	if err != nil {
		t.Fatalf("testdb: pgbouncer (%s pooling): %v", mode, err)
	}
	if shared.bouncers == nil {
		shared.bouncers = map[store.Pooler]*Bouncer{}
	}
	shared.bouncers[mode] = b
	return b
}

// BouncerOptions configure a test's own pgbouncer (NewBouncer).
type BouncerOptions struct {
	// PoolSize is default_pool_size; 0 takes the mode's shared size. A pool of 1 makes every
	// client of a database meet the same server connection, so what one leaves there, the next
	// one sees.
	PoolSize int
	// IgnoreStartupParameters is pgbouncer's ignore_startup_parameters: the startup parameters
	// it drops silently instead of refusing the connection ("options", say).
	IgnoreStartupParameters string
}

// NewBouncer starts a pgbouncer in mode for this test alone, configured by opts (a setting the
// shared ones must not have, or a pool no other test disturbs), and stops it when the test ends.
func NewBouncer(t testing.TB, mode store.Pooler, opts BouncerOptions) *Bouncer {
	t.Helper()
	shared.ensure(t)
	b, err := startBouncer(mode, opts)
	if err != nil {
		t.Fatalf("testdb: pgbouncer (%s pooling, %+v): %v", mode, opts, err)
	}
	t.Cleanup(func() {
		b.stop()
		_ = os.RemoveAll(b.dir)
	})
	return b
}

// DSN reaches database name through the pooler (as the test server's superuser, with its
// password). It names no pooler: the caller says how it talks to it.
func (b *Bouncer) DSN(name string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(b.user, b.password),
		Host: "127.0.0.1:" + strconv.Itoa(b.Port), Path: "/" + name, RawQuery: "sslmode=disable"}
	return u.String()
}

// Log is what pgbouncer wrote to its log so far (for failure messages).
func (b *Bouncer) Log() string {
	out, _ := os.ReadFile(filepath.Join(b.dir, "pgbouncer.log"))
	return string(out)
}

func findPgBouncer() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/local/sbin/pgbouncer", "/usr/local/bin/pgbouncer"} {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", errors.New("pgbouncer is not installed: install it (Debian/Ubuntu: apt-get install pgbouncer; .ci/run does)")
}

func startBouncer(mode store.Pooler, opts BouncerOptions) (*Bouncer, error) {
	bin, err := findPgBouncer()
	if err != nil {
		return nil, err
	}
	cred, err := embedded.ServerCredential("")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(shared.tmpDir, "pgbouncer-"+string(mode)+"-")
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	admin, err := pgconn.ParseConfig(shared.adminDSN)
	if err != nil {
		return nil, err
	}
	server := fmt.Sprintf("host=%s port=%d", admin.Host, admin.Port)
	if admin.Password != "" {
		server += " password=" + admin.Password
	}
	secret := make([]byte, 12)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	size := BouncerPoolSize
	if mode == store.PoolerSession {
		size = SessionBouncerPoolSize
	}
	if opts.PoolSize > 0 {
		size = opts.PoolSize
	}
	var extra string
	if opts.IgnoreStartupParameters != "" {
		extra = "ignore_startup_parameters = " + opts.IgnoreStartupParameters + "\n"
	}
	b := &Bouncer{Mode: mode, PoolSize: size, user: admin.User, password: hex.EncodeToString(secret), dir: dir,
		exited: make(chan struct{})}
	for tries := 0; ; tries++ {
		if b.Port, err = freePort(); err != nil {
			return nil, err
		}
		ini := fmt.Sprintf(`[databases]
* = %s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = scram-sha-256
auth_file = %s
pool_mode = %s
max_client_conn = 1000
default_pool_size = %d
reserve_pool_size = 0
server_reset_query = DISCARD ALL
server_login_retry = 1
query_wait_timeout = 120
logfile = %s
pidfile = %s
log_connections = 0
log_disconnections = 0
%s`, server, b.Port, filepath.Join(dir, "userlist.txt"), mode, b.PoolSize, filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"), extra)
		if err := writeOwned(filepath.Join(dir, "pgbouncer.ini"), ini, cred); err != nil {
			return nil, err
		}
		if err := writeOwned(filepath.Join(dir, "userlist.txt"), fmt.Sprintf("%q %q\n", b.user, b.password), cred); err != nil {
			return nil, err
		}
		err = b.launch(bin, cred)
		if err == nil {
			return b, nil
		}
		if tries == 3 || !strings.Contains(b.Log(), "in use") {
			return nil, fmt.Errorf("%w; its log says:\n%s", err, b.Log())
		}
	}
}

func (b *Bouncer) launch(bin string, cred *syscall.Credential) error {
	cmd := exec.Command(bin, filepath.Join(b.dir, "pgbouncer.ini"))
	cmd.Dir = b.dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGTERM}
	// Linux sends Pdeathsig when the thread that forked dies, not the process: start and wait
	// from a goroutine locked to its thread, so that thread lives exactly as long as pgbouncer.
	b.cmd = cmd
	b.exited = make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			close(b.exited)
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(b.exited)
	}()
	if err := <-started; err != nil {
		b.cmd = nil
		return fmt.Errorf("start %s: %w", bin, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-b.exited:
			return errors.New("pgbouncer exited during start-up")
		default:
		}
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(b.Port), 200*time.Millisecond); err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.stop()
	return errors.New("pgbouncer did not listen within 20 s")
}

func (b *Bouncer) stop() {
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM) // immediate shutdown
	select {
	case <-b.exited:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
}

func writeOwned(path, content string, cred *syscall.Credential) error {
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return err
	}
	if cred != nil {
		return os.Chown(path, int(cred.Uid), int(cred.Gid))
	}
	return nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// PoolerDSN is dsn through b for database name, with pooler=<mode> so store.Open (and child
// processes) know what they talk to.
func (b *Bouncer) PoolerDSN(name string) string {
	return store.WithDSNParams(b.DSN(name), [][2]string{{"pooler", string(b.Mode)}})
}

// ServerBackends counts the server connections open to database name (to show a pooler keeps
// them to its pool size).
func ServerBackends(t testing.TB, name string) int {
	t.Helper()
	shared.ensure(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, shared.adminDSN)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	defer conn.Close(ctx)
	res := conn.ExecParams(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'`,
		[][]byte{[]byte(name)}, nil, nil, nil).Read()
	if res.Err != nil {
		t.Fatalf("testdb: %v", res.Err)
	}
	n, _ := strconv.Atoi(string(res.Rows[0][0]))
	return n
}
