package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// MinMajor is the oldest PostgreSQL server the schema is written for.
const MinMajor = 14

// Binaries is one PostgreSQL server installation.
type Binaries struct {
	Dir     string // holds postgres and initdb
	Version string // e.g. "15.18"
	Major   int
}

// ErrNoBinaries is returned (wrapped, with advice) when no usable server installation exists.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries found")

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)(?:\.(\d+))?`)

// candidateDirs lists where server binaries may live, in the order SPEC §10.1 gives.
func candidateDirs(ctx context.Context, explicit string) []string {
	var dirs []string
	if explicit != "" {
		return []string{explicit}
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	if p, err := exec.LookPath("pg_config"); err == nil {
		if out, err := exec.CommandContext(ctx, p, "--bindir").Output(); err == nil {
			dirs = append(dirs, strings.TrimSpace(string(out)))
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(matches, func(i, j int) bool { return versionOfPath(matches[i]) > versionOfPath(matches[j]) })
	dirs = append(dirs, matches...)
	seen := map[string]bool{}
	out := dirs[:0]
	for _, d := range dirs {
		if d != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// versionOfPath extracts the major version from /usr/lib/postgresql/<N>/bin for sorting.
func versionOfPath(p string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(p)), 64)
	return v
}

// probe checks that dir holds a usable server and reads its version.
func probe(ctx context.Context, dir string) (Binaries, error) {
	for _, name := range []string{"postgres", "initdb"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.IsDir() {
			return Binaries{}, fmt.Errorf("%s has no %s", dir, name)
		}
	}
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "postgres"), "--version").Output()
	if err != nil {
		return Binaries{}, fmt.Errorf("%s/postgres --version: %w", dir, err)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return Binaries{}, fmt.Errorf("%s/postgres --version printed %q", dir, bytes.TrimSpace(out))
	}
	major, _ := strconv.Atoi(string(m[1]))
	version := string(m[1])
	if len(m[2]) > 0 {
		version += "." + string(m[2])
	}
	return Binaries{Dir: dir, Version: version, Major: major}, nil
}

// FindBinaries returns the server installation to use. explicit (IDEMWORK_PG_BINDIR) wins;
// wantMajor (from an existing data dir's PG_VERSION, 0 when new) is preferred among the rest,
// and a data dir whose major version is not installed is a clear error rather than a silent
// upgrade attempt.
func FindBinaries(ctx context.Context, explicit string, wantMajor int) (Binaries, error) {
	var found []Binaries
	var problems []string
	for _, dir := range candidateDirs(ctx, explicit) {
		b, err := probe(ctx, dir)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if b.Major < MinMajor {
			problems = append(problems, fmt.Sprintf("%s is PostgreSQL %s, older than %d", dir, b.Version, MinMajor))
			continue
		}
		found = append(found, b)
	}
	if len(found) == 0 {
		msg := "install the PostgreSQL server (Debian/Ubuntu: apt-get install postgresql; any version >= 14) " +
			"or set IDEMWORK_PG_BINDIR to the directory holding postgres and initdb, " +
			"or point idemwork at an existing server with --dsn"
		if explicit != "" {
			msg = "IDEMWORK_PG_BINDIR=" + explicit + " does not hold a usable postgres and initdb"
		}
		if len(problems) > 0 {
			msg += " (looked at: " + strings.Join(problems, "; ") + ")"
		}
		return Binaries{}, fmt.Errorf("%w: %s", ErrNoBinaries, msg)
	}
	if wantMajor == 0 {
		return found[0], nil
	}
	var majors []string
	for _, b := range found {
		if b.Major == wantMajor {
			return b, nil
		}
		majors = append(majors, b.Version)
	}
	return Binaries{}, fmt.Errorf("%w: the data directory was created by PostgreSQL %d but only %s is installed; "+
		"install postgresql-%d, set IDEMWORK_PG_BINDIR, or use a new --data-dir",
		ErrNoBinaries, wantMajor, strings.Join(majors, ", "), wantMajor)
}
