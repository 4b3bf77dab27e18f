package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/storm"
	"github.com/idemwork/idemwork/storm/stormtypes"
	"github.com/idemwork/idemwork/wire"
)

// stormFlags are the flags of `storm` itself; its subcommands carry the request's flags.
type stormFlags struct {
	n, concurrency, processes, servers int
	via, token, tokenFile              string
	urls                               []string
	noShare, failFirst                 bool
	hold                               time.Duration
}

func newStormCmd(a *app) *cobra.Command {
	var sf stormFlags
	var svc serviceStormFlags
	cmd := &cobra.Command{Use: "storm --n N [flags] create|patch|action [request flags]",
		Short: "Fire N concurrent requests on one key and verify what the database holds",
		Long: "storm fires N requests of one operation on one owner and Idempotency-Key (--key; a generated one\n" +
			"when omitted) with --concurrency workers per process: in this process through one shared kernel,\n" +
			"across --processes child processes released together by a barrier, or over HTTP (--via http,\n" +
			"against --url servers, a loopback server it starts, or --servers N server processes of its own,\n" +
			"round-robin). It prints every request's outcome or error code (with one message per code), what\n" +
			"the lock sampler saw, and what the database holds for the key once every transaction of the storm\n" +
			"ended, then one verdict: exit 0 when every request got a SPEC answer and the database agrees, 3 when\n" +
			"every request was rejected (the code is named), 4 when requests failed (INTERNAL, NO_RESPONSE, a\n" +
			"transport error, a 5xx) or the database disagrees.\n\n" +
			"Against any HTTP service built on the runner library (a service storm), give the request instead of\n" +
			"an operation: --url (repeat it for several instances) --method --body --key --owner [--header 'N: v']\n" +
			"[--count-sql 'SELECT count(*) FROM … WHERE idempotency_key = $1'] with --dsn and --schema naming the\n" +
			"service's database: the outcomes come from the answers, the verdict from the runner's key table and\n" +
			"the service's rows of the key ($1 the key, $2 the owner; one row = executed once).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if svc.asked(cmd) {
				return a.runServiceStorm(cmd, &sf, &svc)
			}
			return usagef("storm needs an operation: create, patch or action (e.g. idemwork storm --n 100 create --owner o --module NOTE --key k --title t), " +
				"or, against any service built on the runner library, --url URL --method M --body JSON --owner O")
		}}
	svc.bind(cmd)
	pf := cmd.PersistentFlags()
	pf.IntVar(&sf.n, "n", 0, "number of requests (required)")
	pf.IntVar(&sf.concurrency, "concurrency", 0, fmt.Sprintf("concurrent workers per process (default min(requests per process, %d))", stormtypes.DefaultConcurrency))
	pf.IntVar(&sf.processes, "processes", 1, "child processes to fire from (1: this process)")
	pf.StringVar(&sf.via, "via", stormtypes.ViaInproc, "inproc (the kernel directly) or http")
	pf.StringArrayVar(&sf.urls, "url", nil, "with --via http: a running 'idemwork serve'; repeat it for several (round-robin; default: start one on 127.0.0.1)")
	pf.IntVar(&sf.servers, "servers", 0, fmt.Sprintf("with --via http: start this many server processes on loopback over the one database, round-robin (at most %d)", stormtypes.MaxServers))
	pf.StringVar(&sf.token, "token", "", "with --url: bearer token — other users can read a command line: prefer IDEMWORK_TOKEN or --token-file (default: config http.tokens for the owner)")
	pf.StringVar(&sf.tokenFile, "token-file", "", "with --url: read the bearer token from this file (mode 0600)")
	pf.BoolVar(&sf.noShare, "no-share", false, "no in-process sharing: every request goes to the database")
	pf.BoolVar(&sf.failFirst, "fail-first", false, "inject a failure into the first attempt's work (once): another request must execute")
	pf.DurationVar(&sf.hold, "hold", 0, fmt.Sprintf("the executing request keeps its transaction open this long after its work, before SUCCEEDED and COMMIT, so the queue on the unique index can be watched (at most %s)", stormtypes.MaxHold))
	cmd.AddCommand(newStormCreateCmd(a, &sf), newStormPatchCmd(a, &sf), newStormActionCmd(a, &sf))
	return cmd
}

func newStormCreateCmd(a *app, sf *stormFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "create", Short: "Storm a create (operation <MODULE>:record:create)", Args: cobra.NoArgs}
	r := bindCreate(cmd, stormKeyHelp)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.runStorm(cmd, sf, stormtypes.Spec{Op: stormtypes.OpCreate, Create: r.input(cmd)})
	}
	return cmd
}

func newStormPatchCmd(a *app, sf *stormFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "patch", Short: "Storm a patch (operation <MODULE>:record:<id>:patch)", Args: cobra.NoArgs}
	r := bindPatch(cmd, stormKeyHelp)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.runStorm(cmd, sf, stormtypes.Spec{Op: stormtypes.OpPatch, Patch: r.input(cmd)})
	}
	return cmd
}

func newStormActionCmd(a *app, sf *stormFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "action", Short: "Storm a feature run (operation <MODULE>:record:<id>:feature:<featureId>)", Args: cobra.NoArgs}
	r := bindAction(cmd, stormKeyHelp)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.runStorm(cmd, sf, stormtypes.Spec{Op: stormtypes.OpAction, Action: r.request(cmd)})
	}
	return cmd
}

// stormKeyHelp is the --key help of the storm subcommands: a storm always has a key.
const stormKeyHelp = "Idempotency-Key (default: a generated storm-… key)"

// runStorm completes spec from the storm flags, runs it and prints the summary. The exit code
// follows the verdict: 0 agrees, 3 every request rejected (the rejection's code), 4 failed
// requests, a disagreeing database or a stopped storm.
func (a *app) runStorm(cmd *cobra.Command, sf *stormFlags, spec stormtypes.Spec) error {
	ctx := cmd.Context()
	if !cmd.Flags().Changed("n") {
		return usagef("storm needs --n, the number of requests")
	}
	if sf.processes < 1 {
		return usagef("--processes: want 1-%d, got %d", stormtypes.MaxProcesses, sf.processes)
	}
	spec.N, spec.Concurrency, spec.Processes, spec.Servers = sf.n, sf.concurrency, sf.processes, sf.servers
	spec.Via, spec.URLs, spec.Share, spec.FailFirst, spec.Hold = sf.via, sf.urls, !sf.noShare, sf.failFirst, sf.hold
	if err := a.loadConfig(); err != nil {
		return err
	}
	if cmd.Flags().Changed("token") {
		fmt.Fprintln(a.stderr, "idemwork storm: --token on the command line can be read by other local users (ps, /proc, shell history); idemwork hides it from its own process list at once, but set IDEMWORK_TOKEN or use --token-file FILE (mode 0600) instead")
	}
	if len(spec.URLs) > 0 {
		flagToken := sf.token
		if sf.tokenFile != "" {
			if flagToken != "" {
				return usagef("--token and --token-file: give one")
			}
			t, err := readSecretFile("--token-file", sf.tokenFile, a.flags.allowInsecureConfig)
			if err != nil {
				return err
			}
			flagToken = t
		}
		token, err := a.stormToken(flagToken, spec.Owner())
		if err != nil {
			return err
		}
		spec.Token = token
	}
	spec, err := spec.Normalized()
	if err != nil {
		return stormUsage(err)
	}
	k, err := a.kernel(ctx)
	if err != nil {
		return err
	}
	if len(spec.URLs) == 0 {
		// Against running servers (--url) the writes are theirs and this session only reads the
		// verdict; otherwise the storm writes through this session's rules.
		if err := k.RequireWritable(); err != nil {
			return err
		}
	}

	args, wenv := a.stormWorkerArgs()
	env := storm.Env{Kernel: k, DSN: a.conn.DSN, Serve: serveStorm, MaxBodyBytes: a.cfg.HTTP.MaxBodyBytes, Stderr: a.stderr,
		WorkerArgs: args, WorkerEnv: wenv, MaxConns: a.cfg.Database.MaxConns}
	stall := newStallReporter(a.stderr, spec.N, spec.Hold)
	env.OnLocks = stall.sample
	events := make(chan stormtypes.Event, 256)
	go stall.count(events)
	stopReporter := stall.start()
	sum, runErr := storm.Run(ctx, env, spec, events)
	close(events)
	stopReporter()
	return a.reportStorm(sum, runErr, printStorm)
}

// reportStorm ends a storm command: a storm that sent nothing is a usage error; otherwise the
// summary (JSON with the error that decides the exit, or printed by print) and its verdict.
func (a *app) reportStorm(sum stormtypes.Summary, runErr error, print func(io.Writer, stormtypes.Summary)) error {
	if sum.Requests == 0 {
		return stormUsage(runErr)
	}
	verdict := stormVerdict(sum, runErr)
	if a.flags.json {
		out := stormJSON{Summary: sum}
		if verdict != nil {
			code, status, msg, _ := classify(verdict)
			out.Error = &errorDetail{Code: code, Status: status, Message: msg}
		}
		writeJSON(a.stdout, out)
		if verdict != nil {
			return &reportedError{verdict}
		}
		return nil
	}
	print(a.stdout, sum)
	return verdict
}

// stormJSON is the summary with the error that decided a non-zero exit, if any.
type stormJSON struct {
	stormtypes.Summary
	Error *errorDetail `json:"error,omitempty"`
}

type errorDetail struct {
	Code    apperr.Code `json:"code"`
	Status  int         `json:"status"`
	Message string      `json:"message"`
}

// verdictError is a storm's verdict other than agrees, with the exit code it decides.
type verdictError struct {
	code   apperr.Code
	status int
	msg    string
	exit   int
}

func (e *verdictError) Error() string { return string(e.code) + ": " + e.msg }

func (e *verdictError) Coded() (apperr.Code, int, string, int) {
	return e.code, e.status, e.msg, e.exit
}

// stormVerdict is the storm's error: the run's own failure (a worker process that died, a
// server that could not start), else the verdict's.
func stormVerdict(sum stormtypes.Summary, runErr error) error {
	if runErr != nil && !errors.Is(runErr, context.Canceled) && !errors.Is(runErr, context.DeadlineExceeded) {
		return runErr
	}
	v := sum.Verdict
	switch v.Verdict {
	case stormtypes.VerdictAgrees:
		return nil
	case stormtypes.VerdictRejected:
		status := sum.Errors[v.Code].Status
		if status == 0 {
			status = apperr.Code(v.Code).Status()
		}
		return &verdictError{code: apperr.Code(v.Code), status: status, msg: v.Text, exit: wire.ExitRejected}
	}
	status := sum.Errors[v.Code].Status
	if status < 500 {
		status = http.StatusInternalServerError
	}
	return &verdictError{code: apperr.Code(v.Code), status: status, msg: v.Text, exit: wire.ExitInternal}
}

// stormUsage turns the engine's USAGE errors into command-line usage errors (exit 2).
func stormUsage(err error) error {
	var ae *apperr.Error
	if errors.As(err, &ae) && ae.Code == apperr.Usage {
		return usagef("%s", ae.Message)
	}
	return err
}

// readSecretFile reads a secret (its first line, trimmed) from a file only its owner may read.
func readSecretFile(flag, path string, allowInsecure bool) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", usagef("%s: %v", flag, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", usagef("%s: %v", flag, err)
	}
	if st.Mode().Perm()&0o044 != 0 && !allowInsecure {
		return "", usagef("%s %s: other users can read it (mode %04o): run chmod 600 %s (or pass --allow-insecure-config)", flag, path, st.Mode().Perm(), path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return "", usagef("%s: %v", flag, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "", usagef("%s %s is empty", flag, path)
	}
	return line, nil
}

// stormToken picks the bearer token for --url: the flag, IDEMWORK_TOKEN, else the first (by
// token order) config http.tokens entry mapped to the storm's owner. A token the config maps to
// another owner is refused here; the storm then asks each server too (GET /v1/whoami).
func (a *app) stormToken(flag, owner string) (string, error) {
	given := flag
	if given == "" {
		given = a.getenv("IDEMWORK_TOKEN")
	}
	if given != "" {
		if other, ok := a.cfg.HTTP.Tokens[given]; ok && other != owner {
			return "", usagef("the token is mapped to owner %s in config [http.tokens], not to --owner %s: the storm's writes would be %s's; use a token of %s", other, owner, other, owner)
		}
		return given, nil
	}
	var tokens []string
	for t, o := range a.cfg.HTTP.Tokens {
		if o == owner {
			tokens = append(tokens, t)
		}
	}
	if len(tokens) == 0 {
		return "", usagef("--url needs a bearer token for owner %s: set IDEMWORK_TOKEN, pass --token, or map one in config [http.tokens]", owner)
	}
	sort.Strings(tokens)
	return tokens[0], nil
}

// printStorm writes the human summary: a small table, then the verdict in its three parts.
func printStorm(w io.Writer, s stormtypes.Summary) {
	st := s.Storm
	share := "on"
	if !st.Share {
		share = "off"
	}
	fmt.Fprintf(w, "storm %s  key %s  owner %s  (sessions \"%s…\")\n", st.Operation, st.Key, st.Owner, stormtypes.AppNamePrefix(st.ID))
	fmt.Fprintf(w, "%d requests  %d process(es) x %d workers  via %s  sharing %s", s.Requests, st.Processes, st.Concurrency, st.Via, share)
	if len(s.ByServer) > 1 {
		fmt.Fprintf(w, "  %d servers", len(s.ByServer))
	}
	if st.FailFirst {
		fmt.Fprint(w, "  fail-first")
	}
	if st.HoldMs > 0 {
		fmt.Fprintf(w, "  hold %s", time.Duration(st.HoldMs*float64(time.Millisecond)))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  %-28s %8s  %s\n", "OUTCOME", "COUNT", "SAMPLE (one request's message)")
	for _, c := range stormtypes.OrderedOutcomes(s.Outcomes) {
		label := c
		if es := s.Verified.ExecutionStatus; c == string(idemtype.Executed) && es != "" && es != "SUCCEEDED" {
			label = c + " (execution " + es + ")" // never a bare EXECUTED for a BLOCKED run
		}
		fmt.Fprintf(w, "  %-28s %8d", label, s.Outcomes[c])
		if e, ok := s.Errors[c]; ok {
			fmt.Fprintf(w, "  %q", e.Sample)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  %-28s %8d\n", "(waited on the unique index)", s.Waited)
	fmt.Fprintln(w)
	l := s.LatencyMs
	fmt.Fprintf(w, "  latency ms   p50 %.2f  p95 %.2f  p99 %.2f  max %.2f   wall %.1f ms\n", l.P50, l.P95, l.P99, l.Max, s.WallMs)
	d := s.Distinct
	fmt.Fprintf(w, "  distinct     records %d  revisions %d  executions %d\n", d.RecordIDs, d.Revisions, d.ExecutionIDs)
	if lk := s.Locks; lk.Samples > 0 {
		at := ""
		if lk.PeakAt != nil {
			at = " at " + lk.PeakAt.Local().Format("15:04:05.000")
		}
		fmt.Fprintf(w, "  locks        peak %d of the storm's sessions waiting%s (%d samples, every %.0f ms)\n", lk.PeakWaiting, at, lk.Samples, lk.EveryMs)
	}
	v := s.Verified
	if v.EarlierRows > 0 {
		fmt.Fprintf(w, "               (%d older rows carry the key from before it expired and ran again; not counted)\n", v.EarlierRows)
	}
	if len(s.ByServer) > 1 {
		for _, sv := range s.ByServer {
			fmt.Fprintf(w, "  server %-22s %5d requests  %s\n", sv.URL, sv.Requests, countsText(sv.Outcomes))
		}
	}
	if len(s.ByProcess) > 1 {
		for _, p := range s.ByProcess {
			fmt.Fprintf(w, "  pid %-8d %4d requests  %s\n", p.PID, p.Requests, countsText(p.Outcomes))
		}
	}
	fmt.Fprintln(w)
	vd := s.Verdict
	fmt.Fprintf(w, "  answers   %s %s\n", mark(vd.Answers.OK), vd.Answers.Text)
	fmt.Fprintf(w, "  database  %s %s\n", mark(vd.Database.OK), vd.Database.Text)
	fmt.Fprintf(w, "  verdict   %s %s\n", mark(vd.Verdict == stormtypes.VerdictAgrees), vd.Text)
}

func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

func countsText(outcomes map[string]int) string {
	parts := make([]string, 0, len(outcomes))
	for _, c := range stormtypes.OrderedOutcomes(outcomes) {
		parts = append(parts, fmt.Sprintf("%s %d", c, outcomes[c]))
	}
	return strings.Join(parts, ", ")
}

// stallReporter says on stderr what a storm that stopped making progress waits on: a storm
// stuck behind a lock (a psql transaction holding the key, a long --hold) otherwise looks hung.
type stallReporter struct {
	w        io.Writer
	n        int
	hold     time.Duration // the storm's --hold: its own winner keeps the key that long
	mu       sync.Mutex
	answered int
	progress time.Time
	last     stormtypes.LockSample
}

func newStallReporter(w io.Writer, n int, hold time.Duration) *stallReporter {
	return &stallReporter{w: w, n: n, hold: hold, progress: time.Now()}
}

// sample is the storm's OnLocks.
func (r *stallReporter) sample(s stormtypes.LockSample) {
	r.mu.Lock()
	r.last = s
	r.mu.Unlock()
}

// count consumes the storm's events until the channel closes.
func (r *stallReporter) count(events <-chan stormtypes.Event) {
	for range events {
		r.mu.Lock()
		r.answered++
		r.progress = time.Now()
		r.mu.Unlock()
	}
}

// stallLine says what a storm without an answer for quiet waits on. With --hold, the storm's
// own winner keeps its transaction open on purpose: when nothing but the storm's own sessions
// holds what they wait on, the line says so, so that a wait the user asked for is not read as
// something else holding the key (and one that is something else is never put on the hold).
func stallLine(answered, n int, elapsed, quiet time.Duration, sample stormtypes.LockSample, hold time.Duration) string {
	line := sample.WaitsOn()
	if line == "" {
		line = "none of its sessions waits on a lock"
	}
	own := true
	for _, b := range sample.Blockers {
		own = own && b.Storm
	}
	if hold > 0 && own {
		line += fmt.Sprintf(" — the executing request holds its transaction %s after its work (--hold), as asked", hold)
	}
	return fmt.Sprintf("idemwork storm: %d of %d answered after %.1f s, none for %.1f s; %s",
		answered, n, elapsed.Seconds(), quiet.Seconds(), line)
}

// stallAfter is how long a storm may go without an answer before the reporter speaks.
const stallAfter = 2 * time.Second

// start reports every stallAfter while the storm is stalled; the returned func stops it.
func (r *stallReporter) start() func() {
	done := make(chan struct{})
	stopped := make(chan struct{})
	began := time.Now()
	go func() {
		defer close(stopped)
		t := time.NewTicker(stallAfter)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			r.mu.Lock()
			answered, quiet, sample := r.answered, time.Since(r.progress), r.last
			r.mu.Unlock()
			if answered >= r.n || quiet < stallAfter || (sample.Waiting == 0 && quiet < 5*stallAfter) {
				continue
			}
			fmt.Fprintln(r.w, stallLine(answered, r.n, time.Since(began), quiet, sample, r.hold))
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}
