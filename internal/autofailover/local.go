package autofailover

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LocalKeeper is the pg_autoctl keeper of a node of a formation this process did not start,
// found running on this machine: enough to kill the node as a crash would and to start its
// keeper again as it was started (same user, environment and data directory).
type LocalKeeper struct {
	// PID is the keeper's supervisor process; PGData the node's data directory.
	PID    int
	PGData string
	uid    uint32
	gid    uint32
	env    []string
	exe    string
	tree   []procID
}

// FindLocalKeeper finds the keeper whose Postgres listens on port on this machine: the
// postmaster started with -p port, and the outermost pg_autoctl process above it.
func FindLocalKeeper(port int) (*LocalKeeper, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("find the node on port %d: %w", port, err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		args := cmdline(pid)
		if len(args) < 3 || filepath.Base(args[0]) != "postgres" || !hasArgPair(args, "-p", strconv.Itoa(port)) {
			continue
		}
		pgdata := argAfter(args, "-D")
		// Up from the postmaster to the last pg_autoctl ancestor: the supervisor `pg_autoctl
		// run` (or `create … --run`) started.
		keeper := 0
		for p := parentOf(pid); p > 1 && isAutoctl(p); p = parentOf(p) {
			keeper = p
		}
		if keeper == 0 {
			return nil, fmt.Errorf("the postmaster on port %d (pid %d) does not run under pg_autoctl", port, pid)
		}
		k := &LocalKeeper{PID: keeper, PGData: pgdata}
		if err := k.read(); err != nil {
			return nil, err
		}
		return k, nil
	}
	return nil, fmt.Errorf("no postmaster listens on port %d on this machine: the node must run here for an unplanned failover to be injected", port)
}

func (k *LocalKeeper) read() error {
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join("/proc", strconv.Itoa(k.PID)), &st); err != nil {
		return err
	}
	k.uid, k.gid = st.Uid, st.Gid
	env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(k.PID), "environ"))
	if err != nil {
		return fmt.Errorf("read the keeper's environment (pid %d): %w; run as its user or as root", k.PID, err)
	}
	for _, v := range bytes.Split(env, []byte{0}) {
		if len(v) > 0 {
			k.env = append(k.env, string(v))
		}
	}
	exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(k.PID), "exe"))
	if err != nil {
		return fmt.Errorf("read the keeper's executable (pid %d): %w", k.PID, err)
	}
	k.exe = exe
	start, ok := startTime(k.PID)
	if !ok {
		return fmt.Errorf("the keeper (pid %d) is gone", k.PID)
	}
	k.tree = append([]procID{{pid: k.PID, start: start}}, descendants(k.PID)...)
	return nil
}

// Kill sends SIGKILL to the keeper, its postmaster and every backend at once, and waits until
// they are gone.
func (k *LocalKeeper) Kill() error {
	for _, p := range k.tree {
		p.kill()
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range k.tree {
		for p.alive() {
			if time.Now().After(deadline) {
				return fmt.Errorf("pid %d survived SIGKILL for 30 s", p.pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// Restart starts the keeper again (`pg_autoctl run --pgdata`) as its user, with its
// environment, in a session of its own so that it outlives this process; its output goes to
// logPath. The node rejoins its formation as a secondary.
func (k *LocalKeeper) Restart(logPath string) error {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(k.exe, "run", "--pgdata", k.PGData)
	cmd.Dir = "/"
	cmd.Env = k.env
	cmd.Stdout, cmd.Stderr = logf, logf
	attr := &syscall.SysProcAttr{Setsid: true}
	if uint32(os.Geteuid()) != k.uid {
		attr.Credential = &syscall.Credential{Uid: k.uid, Gid: k.gid, NoSetGroups: true}
	}
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restart the keeper of %s: %w", k.PGData, err)
	}
	go func() { _ = cmd.Wait() }() // reap it if it exits while this process runs
	return nil
}

// isAutoctl reports whether pid runs pg_autoctl: its executable, or (where that cannot be read)
// its command line — which pg_autoctl's services rewrite to "pg_autoctl: start/stop postgres" and
// the like, a title whose base name would be "postgres".
func isAutoctl(pid int) bool {
	if exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe")); err == nil {
		return filepath.Base(exe) == "pg_autoctl"
	}
	a := cmdline(pid)
	return len(a) > 0 && strings.HasPrefix(a[0], "pg_autoctl")
}

func cmdline(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

func parentOf(pid int) int {
	f, ok := statFields(pid)
	if !ok {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

func hasArgPair(args []string, flag, value string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag && args[i+1] == value {
			return true
		}
	}
	return false
}

func argAfter(args []string, flag string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			return args[i+1]
		}
	}
	return ""
}

// LocalMonitorURL reads the monitor URL from the configuration of the keeper whose node listens
// on port on this machine (pg_autoctl keeps it in $XDG_CONFIG_HOME/pg_autoctl/<PGDATA>/
// pg_autoctl.cfg, "monitor = …"): the workbench finds a local formation's monitor by itself.
func LocalMonitorURL(port int) (string, error) {
	k, err := FindLocalKeeper(port)
	if err != nil {
		return "", err
	}
	cfgHome := ""
	for _, v := range k.env {
		if x, ok := strings.CutPrefix(v, "XDG_CONFIG_HOME="); ok && x != "" {
			cfgHome = x
		}
	}
	if cfgHome == "" {
		for _, v := range k.env {
			if x, ok := strings.CutPrefix(v, "HOME="); ok && x != "" {
				cfgHome = filepath.Join(x, ".config")
			}
		}
	}
	if cfgHome == "" || k.PGData == "" {
		return "", fmt.Errorf("the keeper of port %d has no configuration directory in its environment", port)
	}
	path := filepath.Join(cfgHome, "pg_autoctl", k.PGData, "pg_autoctl.cfg")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the keeper's configuration: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, value, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(name) == "monitor" {
			if v := strings.TrimSpace(value); v != "" {
				return v, nil
			}
		}
	}
	return "", fmt.Errorf("%s names no monitor", path)
}

// KillProcessTree sends SIGKILL to pid and to every descendant it has now — listed first: a
// PostgreSQL backend leads a process group of its own, so killing a postmaster's group leaves
// its backends running (a stopped one forever, holding the server's shared memory) — and waits
// until they are gone.
func KillProcessTree(pid int) error {
	start, ok := startTime(pid)
	if !ok {
		return nil
	}
	tree := append([]procID{{pid: pid, start: start}}, descendants(pid)...)
	for _, p := range tree {
		p.kill()
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range tree {
		for p.alive() {
			if time.Now().After(deadline) {
				return fmt.Errorf("pid %d survived SIGKILL for 30 s", p.pid)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// StartTime identifies the process pid now is (its start time since boot, in clock ticks), so a
// signal meant for it later is never sent to another process the system gave its pid; ok is
// false when it is gone.
func StartTime(pid int) (string, bool) { return startTime(pid) }
