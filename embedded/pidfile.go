package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type pidInfo struct {
	pid       int
	port      int
	socketDir string
	listen    string
	status    string
}

// readPidFile parses postmaster.pid: pid, data dir, start time, port, socket dir, listen
// address, shared memory key, status (see PostgreSQL's miscadmin.h LOCK_FILE_LINE_*).
func readPidFile(dataDir string) (pidInfo, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, pidFile))
	if err != nil {
		return pidInfo{}, err
	}
	lines := strings.Split(string(b), "\n")
	get := func(i int) string {
		if i < len(lines) {
			return strings.TrimSpace(lines[i])
		}
		return ""
	}
	pid, err := strconv.Atoi(get(0))
	if err != nil {
		return pidInfo{}, fmt.Errorf("postmaster.pid: bad pid line %q", get(0))
	}
	port, _ := strconv.Atoi(get(3))
	return pidInfo{pid: pid, port: port, socketDir: get(4), listen: get(5), status: get(7)}, nil
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// A zombie is dead for our purposes.
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
			return false
		}
	}
	return true
}

// ResolveDataDir is dir as the kernel names it: absolute, with "..", "." and every symbolic link
// resolved (of the part of the path that exists; the rest, not created yet, is kept as given).
// Every comparison and every file idemwork derives from a data dir (its lock, its socket dir)
// uses this path, so two paths reaching one directory are one cluster.
func ResolveDataDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("data dir %q: %w", dir, err)
	}
	var rest []string
	for p := abs; ; {
		real, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("data dir %q: resolve %s: %w", dir, p, err)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return abs, nil
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// serverState is what a live pid named by postmaster.pid is to a data dir.
type serverState int

const (
	// notAServer: the pid is gone, a zombie, or a process that is not a postgres (a recycled
	// pid): the pid file is stale.
	notAServer serverState = iota
	// ourServer: a postgres whose working directory is the data dir.
	ourServer
	// anotherServer: a live postgres serving another directory. Its pid file is not ours to
	// judge, and never removed.
	anotherServer
)

// serverOf says what pid is to dataDir. The postmaster chdirs into its data dir, so its
// /proc/PID/cwd is the same directory (compared as a file: device and inode, so a symlink, a
// bind mount or another path to it is the same directory), whatever path reached it.
func serverOf(pid int, dataDir string) serverState {
	if !alive(pid) {
		return notAServer
	}
	if !isPostgres(pid) {
		return notAServer
	}
	cwd, err := os.Stat(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		// Not allowed to look (another user's process): a live postgres named by our pid file is
		// taken for ours, never removed.
		return ourServer
	}
	dir, err := os.Stat(dataDir)
	if err == nil && os.SameFile(cwd, dir) {
		return ourServer
	}
	return anotherServer
}

// isPostgres reports whether pid runs a postgres (or postmaster) binary. When that cannot be
// read, the answer is yes: removing a live server's pid file kills it, keeping a stale one only
// refuses a start.
func isPostgres(pid int) bool {
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil {
		base := filepath.Base(strings.TrimSuffix(exe, " (deleted)"))
		return base == "postgres" || base == "postmaster"
	}
	if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
		return strings.Contains(string(cmd), "postgres") || strings.Contains(string(cmd), "postmaster")
	}
	return true
}

// running returns the server already serving dataDir (resolved: ResolveDataDir), or nil. A
// postmaster.pid whose process is gone (a SIGKILLed run), or is not a postgres at all (a
// recycled pid), is removed so the next start is not refused; the pid file of a live postgres is
// never removed, whatever path reached it (PostgreSQL shuts down within a minute once its
// postmaster.pid is gone).
func running(dataDir string) (*Cluster, error) {
	pf, err := readPidFile(dataDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	state := notAServer
	if err == nil {
		state = serverOf(pf.pid, dataDir)
	}
	switch {
	case state == anotherServer:
		return nil, fmt.Errorf("%s names pid %d, a running postgres that serves another directory; if no server runs on %s, remove %s",
			filepath.Join(dataDir, pidFile), pf.pid, dataDir, filepath.Join(dataDir, pidFile))
	case err != nil || state == notAServer:
		if rmErr := os.Remove(filepath.Join(dataDir, pidFile)); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
			return nil, fmt.Errorf("remove stale %s: %w", pidFile, rmErr)
		}
		return nil, nil
	}
	// A server that is still starting or stopping: wait briefly for it to settle.
	for i := 0; i < 2000 && !accepting(pf.status); i++ {
		if pf.status == "stopping" || !alive(pf.pid) {
			for alive(pf.pid) && i < 2000 {
				time.Sleep(5 * time.Millisecond)
				i++
			}
			return nil, nil
		}
		time.Sleep(5 * time.Millisecond)
		if pf, err = readPidFile(dataDir); err != nil {
			return nil, nil
		}
	}
	if !accepting(pf.status) {
		return nil, fmt.Errorf("the server on %s (pid %d) is not ready (status %q)", dataDir, pf.pid, pf.status)
	}
	version := ""
	if b, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION")); err == nil {
		version = strings.TrimSpace(string(b))
	}
	c := &Cluster{
		DataDir: dataDir, SocketDir: pf.socketDir, Port: pf.port, PID: pf.pid, Version: version,
		listenTCP: pf.listen != "",
		logPath:   filepath.Join(dataDir, logFileName),
	}
	if c.listenTCP {
		c.password, _ = readPassword(dataDir)
	}
	return c, nil
}

// accepting reports whether a postmaster.pid status means the server takes connections: a
// primary says "ready", a hot standby "standby".
func accepting(status string) bool { return status == "ready" || status == "standby" }

// Status describes the cluster in a data dir without starting it.
type Status struct {
	Running   bool   `json:"running"`
	DataDir   string `json:"dataDir"`
	SocketDir string `json:"socketDir"`
	Port      int    `json:"port"`
	PID       int    `json:"pid"`
	Version   string `json:"version"`
}

// Inspect reports whether a server is running on dataDir.
func Inspect(dataDir string) (Status, error) {
	if dataDir == "" {
		dataDir = DefaultDataDir()
	}
	dataDir, err := ResolveDataDir(dataDir)
	if err != nil {
		return Status{}, err
	}
	st := Status{DataDir: dataDir}
	if b, err := os.ReadFile(filepath.Join(dataDir, "PG_VERSION")); err == nil {
		st.Version = strings.TrimSpace(string(b))
	}
	c, err := running(dataDir)
	if err != nil {
		return st, err
	}
	if c != nil {
		st.Running, st.SocketDir, st.Port, st.PID = true, c.SocketDir, c.Port, c.PID
		if v := c.serverVersion(); v != "" {
			st.Version = v
		}
	}
	return st, nil
}

// serverVersion reads the full version of the running server's binary.
func (c *Cluster) serverVersion() string {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", c.PID))
	if err != nil {
		return ""
	}
	b, err := probe(context.Background(), filepath.Dir(exe))
	if err != nil {
		return ""
	}
	return b.Version
}

// Attach returns the running server of dataDir without starting one (nil when none runs).
func Attach(dataDir string) (*Cluster, error) {
	dataDir, err := ResolveDataDir(dataDir)
	if err != nil {
		return nil, err
	}
	return running(dataDir)
}

// StopDataDir stops whatever server of ours runs on dataDir (idemwork db stop). It reports
// whether one was running.
func StopDataDir(ctx context.Context, dataDir string) (bool, error) {
	if dataDir == "" {
		dataDir = DefaultDataDir()
	}
	dataDir, err := ResolveDataDir(dataDir)
	if err != nil {
		return false, err
	}
	unlock, err := lockFile(ctx, dataDir+".lock")
	if err != nil {
		return false, err
	}
	defer unlock()
	c, err := running(dataDir)
	if err != nil || c == nil {
		return false, err
	}
	if err := stopPID(ctx, c.PID, nil); err != nil {
		return true, err
	}
	return true, nil
}

// lockFile serialises start and stop of one data dir across processes.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}
