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

// isOurServer reports whether pid is a postgres whose working directory is dataDir (the
// postmaster chdirs into its data dir), so a recycled pid is never mistaken for our server.
func isOurServer(pid int, dataDir string) bool {
	if !alive(pid) {
		return false
	}
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil {
		return filepath.Clean(cwd) == filepath.Clean(dataDir)
	}
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(cmd), "postgres")
}

// running returns the server already serving dataDir, or nil. A postmaster.pid whose process is
// gone (a SIGKILLed run) is removed so the next start is not refused.
func running(dataDir string) (*Cluster, error) {
	pf, err := readPidFile(dataDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil || !isOurServer(pf.pid, dataDir) {
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
	dataDir, _ = filepath.Abs(dataDir)
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
	dataDir, _ = filepath.Abs(dataDir)
	return running(dataDir)
}

// StopDataDir stops whatever server of ours runs on dataDir (idemwork db stop). It reports
// whether one was running.
func StopDataDir(ctx context.Context, dataDir string) (bool, error) {
	if dataDir == "" {
		dataDir = DefaultDataDir()
	}
	dataDir, _ = filepath.Abs(dataDir)
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
