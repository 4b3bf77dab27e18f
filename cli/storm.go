package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"idemwork/apperr"
	"idemwork/store"
	"idemwork/storm"
)

// stormFlags are the flags of `storm` itself; its subcommands carry the request's flags.
type stormFlags struct {
	n, concurrency, processes int
	via, url, token           string
	noShare, failFirst        bool
}

func newStormCmd(a *app) *cobra.Command {
	var sf stormFlags
	cmd := &cobra.Command{Use: "storm --n N [flags] create|patch|action [request flags]",
		Short: "Fire N concurrent requests on one key and verify what the database holds",
		Long: "storm fires N requests of one operation on one owner and Idempotency-Key (--key; a generated one\n" +
			"when omitted) with --concurrency workers per process: in this process through one shared kernel,\n" +
			"across --processes child processes released together by a barrier, or over HTTP (--via http,\n" +
			"against --url or a loopback server it starts). It prints outcome counts, distinct results,\n" +
			"latency percentiles and what the database holds for the key afterwards (verified), and exits 4\n" +
			"when the database disagrees with the responses.",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usagef("storm needs an operation: create, patch or action (e.g. idemwork storm --n 100 create --owner o --module NOTE --key k --title t)")
		}}
	pf := cmd.PersistentFlags()
	pf.IntVar(&sf.n, "n", 0, "number of requests (required)")
	pf.IntVar(&sf.concurrency, "concurrency", 0, fmt.Sprintf("concurrent workers per process (default min(requests per process, %d))", storm.DefaultConcurrency))
	pf.IntVar(&sf.processes, "processes", 1, "child processes to fire from (1: this process)")
	pf.StringVar(&sf.via, "via", storm.ViaInproc, "inproc (the kernel directly) or http")
	pf.StringVar(&sf.url, "url", "", "with --via http: a running 'idemwork serve' (default: start one on 127.0.0.1)")
	pf.StringVar(&sf.token, "token", "", "with --url: bearer token (prefer IDEMWORK_TOKEN; default: config http.tokens for the owner)")
	pf.BoolVar(&sf.noShare, "no-share", false, "no in-process sharing: every request goes to the database")
	pf.BoolVar(&sf.failFirst, "fail-first", false, "inject a failure into the first attempt's work (once): another request must execute")
	cmd.AddCommand(newStormCreateCmd(a, &sf), newStormPatchCmd(a, &sf), newStormActionCmd(a, &sf))
	return cmd
}

func newStormCreateCmd(a *app, sf *stormFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "create", Short: "Storm a create (operation <MODULE>:record:create)", Args: cobra.NoArgs}
	r := bindCreate(cmd, stormKeyHelp)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.runStorm(cmd, sf, storm.Spec{Op: storm.OpCreate, Create: r.input(cmd)})
	}
	return cmd
}

func newStormPatchCmd(a *app, sf *stormFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "patch", Short: "Storm a patch (operation <MODULE>:record:<id>:patch)", Args: cobra.NoArgs}
	r := bindPatch(cmd, stormKeyHelp)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.runStorm(cmd, sf, storm.Spec{Op: storm.OpPatch, Patch: r.input(cmd)})
	}
	return cmd
}

func newStormActionCmd(a *app, sf *stormFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "action", Short: "Storm a feature run (operation <MODULE>:record:<id>:feature:<featureId>)", Args: cobra.NoArgs}
	r := bindAction(cmd, stormKeyHelp)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.runStorm(cmd, sf, storm.Spec{Op: storm.OpAction, Action: r.request(cmd)})
	}
	return cmd
}

// stormKeyHelp is the --key help of the storm subcommands: a storm always has a key.
const stormKeyHelp = "Idempotency-Key (default: a generated storm-… key)"

// runStorm completes spec from the storm flags, runs it and prints the summary. The exit code
// is 0 when the database agrees with the responses, 4 when it disagrees, and the rejection's
// (3) when no request succeeded at all.
func (a *app) runStorm(cmd *cobra.Command, sf *stormFlags, spec storm.Spec) error {
	ctx := cmd.Context()
	if !cmd.Flags().Changed("n") {
		return usagef("storm needs --n, the number of requests")
	}
	if sf.processes < 1 {
		return usagef("--processes %d: at least 1 (1 fires from this process)", sf.processes)
	}
	spec.N, spec.Concurrency, spec.Processes = sf.n, sf.concurrency, sf.processes
	spec.Via, spec.URL, spec.Share, spec.FailFirst = sf.via, sf.url, !sf.noShare, sf.failFirst
	if err := a.loadConfig(); err != nil {
		return err
	}
	if spec.URL != "" {
		token, err := a.stormToken(sf.token, spec.Owner())
		if err != nil {
			return err
		}
		spec.Token = token
	}
	spec, err := spec.Normalized()
	if err != nil {
		return stormUsage(err)
	}
	if _, err := a.openDB(ctx, true); err != nil {
		return err
	}
	if spec.URL == "" {
		// Against a running server (--url) the writes are the server's and the local session only
		// reads the verdict; otherwise the storm writes through this session.
		k, err := a.kernel(ctx)
		if err != nil {
			return err
		}
		if err := k.RequireWritable(); err != nil {
			return err
		}
	}

	// A pool of its own, sized for the storm: the app's pool is sized for one command at a time.
	conns := 4
	switch {
	case spec.Via == storm.ViaHTTP && spec.URL == "":
		conns += spec.Concurrency * spec.Processes // the storm's own server serves every process
	case spec.Processes == 1 && spec.Via == storm.ViaInproc:
		conns += spec.Concurrency
	}
	conns = max(conns, a.cfg.Database.MaxConns)
	db, err := store.Open(ctx, a.conn.DSN, store.Options{ReadOnly: a.db.ReadOnly, MaxConns: int32(conns)})
	if err != nil {
		return &setupError{err}
	}
	defer db.Close()
	k := a.kernelOver(db)

	env := storm.Env{Kernel: k, DSN: a.conn.DSN, HTTP: a.cfg.HTTP, Stderr: a.stderr}
	sum, runErr := storm.Run(ctx, env, spec, nil)
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
	printStorm(a.stdout, sum)
	return verdict
}

// stormJSON is the summary with the error that decided a non-zero exit, if any.
type stormJSON struct {
	storm.Summary
	Error *errorDetail `json:"error,omitempty"`
}

type errorDetail struct {
	Code    apperr.Code `json:"code"`
	Status  int         `json:"status"`
	Message string      `json:"message"`
}

// stormVerdict decides the storm's error: the run's own failure, else the rejection every
// request got, else the database's disagreement.
func stormVerdict(sum storm.Summary, runErr error) error {
	if errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded) {
		done := sum.Requests - sum.Outcomes[string(storm.CodeNoResponse)]
		return apperr.Wrap(storm.CodeCancelled, runErr, "the storm was interrupted: %d of %d requests finished (the verdict covers what the database holds now)", done, sum.Requests)
	}
	if runErr != nil {
		return runErr
	}
	if sum.Verified.Agrees {
		return nil
	}
	if sum.Successes() == 0 {
		code, n := sum.TopError()
		if code == "" {
			code = string(storm.CodeNoResponse)
		}
		return apperr.New(apperr.Code(code), "no request of the storm succeeded (%d of %d: %s)", n, sum.Requests, code)
	}
	return apperr.New(storm.CodeDisagrees, "the database disagrees with the responses: %s", strings.Join(sum.Verified.Problems, "; "))
}

// stormUsage turns the engine's USAGE errors into command-line usage errors (exit 2).
func stormUsage(err error) error {
	var ae *apperr.Error
	if errors.As(err, &ae) && ae.Code == apperr.Usage {
		return usagef("%s", ae.Message)
	}
	return err
}

// stormToken picks the bearer token for --url: the flag, IDEMWORK_TOKEN, else the first (by
// token order) config http.tokens entry mapped to the storm's owner.
func (a *app) stormToken(flag, owner string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if t := a.getenv("IDEMWORK_TOKEN"); t != "" {
		return t, nil
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

// printStorm writes the human summary: a small table.
func printStorm(w io.Writer, s storm.Summary) {
	st := s.Storm
	share := "on"
	if !st.Share {
		share = "off"
	}
	fmt.Fprintf(w, "storm %s  key %s  owner %s\n", st.Operation, st.Key, st.Owner)
	fmt.Fprintf(w, "%d requests  %d process(es) x %d workers  via %s  sharing %s", s.Requests, st.Processes, st.Concurrency, st.Via, share)
	if st.FailFirst {
		fmt.Fprint(w, "  fail-first")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	codes := make([]string, 0, len(s.Outcomes))
	for c := range s.Outcomes {
		codes = append(codes, c)
	}
	rank := map[string]int{"EXECUTED": 0, "REPLAYED": 1, "JOINED": 2}
	sort.Slice(codes, func(i, j int) bool {
		ri, oki := rank[codes[i]]
		rj, okj := rank[codes[j]]
		switch {
		case oki && okj:
			return ri < rj
		case oki != okj:
			return oki
		}
		return codes[i] < codes[j]
	})
	fmt.Fprintf(w, "  %-28s %8s\n", "OUTCOME", "COUNT")
	for _, c := range codes {
		fmt.Fprintf(w, "  %-28s %8d\n", c, s.Outcomes[c])
	}
	fmt.Fprintf(w, "  %-28s %8d\n", "(waited on the unique index)", s.Waited)
	fmt.Fprintln(w)
	l := s.LatencyMs
	fmt.Fprintf(w, "  latency ms   p50 %.2f  p95 %.2f  p99 %.2f  max %.2f   wall %.1f ms\n", l.P50, l.P95, l.P99, l.Max, s.WallMs)
	d := s.Distinct
	fmt.Fprintf(w, "  distinct     records %d  revisions %d  executions %d\n", d.RecordIDs, d.Revisions, d.ExecutionIDs)
	v := s.Verified
	verdict := "AGREES"
	if !v.Agrees {
		verdict = "DISAGREES"
	}
	fmt.Fprintf(w, "  database     key %s  executions %d  revisions %d  audit events %d  -> %s\n", v.KeyStatus, v.Executions, v.Revisions, v.AuditEvents, verdict)
	if v.EarlierRows > 0 {
		fmt.Fprintf(w, "               (%d older rows carry the key from before it expired and ran again; not counted)\n", v.EarlierRows)
	}
	for _, p := range v.Problems {
		fmt.Fprintf(w, "               ! %s\n", p)
	}
	if len(s.ByProcess) > 1 {
		fmt.Fprintln(w)
		for _, p := range s.ByProcess {
			parts := make([]string, 0, len(p.Outcomes))
			for c, n := range p.Outcomes {
				parts = append(parts, fmt.Sprintf("%s %d", c, n))
			}
			sort.Strings(parts)
			fmt.Fprintf(w, "  pid %-8d %4d requests  %s\n", p.PID, p.Requests, strings.Join(parts, ", "))
		}
	}
}
