package cli

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/bench"
	"github.com/idemwork/idemwork/embedded"
	"github.com/idemwork/idemwork/internal/autofailover"
	"github.com/idemwork/idemwork/soak"
	"github.com/idemwork/idemwork/store"
)

// codeSoakFailed is the error of a soak that saw a duplicate execution or a violation.
const codeSoakFailed apperr.Code = "SOAK_FAILED"

func newSoakCmd(a *app) *cobra.Command {
	var rounds int
	var faults string
	var seed uint64
	var scratch bool
	var rates string
	var failover bool
	var monitor string
	cmd := &cobra.Command{Use: "soak", Short: "Storms with injected faults, then verify (exit 0 only with no duplicate and no violation)",
		Long: "soak runs --rounds short storms on fresh keys (in process with and without in-flight sharing, over HTTP\n" +
			"against an `idemwork serve` child, and from child processes) while it injects faults at random moments:\n" +
			"kill-child (SIGKILL of a storm's child process), terminate (pg_terminate_backend of the database's\n" +
			"sessions), restart (immediate restart of the embedded PostgreSQL) and kill-server (SIGKILL of the serve\n" +
			"process). After each round it retries the round's key until it gets an answer and asks the database how\n" +
			"often the key's work committed; at the end it runs verify on every owner. --faults defaults to every kind\n" +
			"this database allows (restart needs the embedded cluster). It writes to the embedded cluster's database,\n" +
			"or with --scratch to a new database it creates on the same server (needed for a database given by URL).\n" +
			"With --failover it soaks a pg_auto_failover formation and adds failover (a planned failover, pg_autoctl\n" +
			"perform failover) and kill-primary (the primary's node killed: the monitor promotes the secondary, and the\n" +
			"killed node rejoins): on the formation --dsn names (its monitor given by --monitor; kill-primary needs the\n" +
			"primary's processes on this machine), or on one it starts in a temp dir and stops at the end.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if rounds < 1 || rounds > soak.MaxRounds {
				return usagef("--rounds: want 1-%d, got %d", soak.MaxRounds, rounds)
			}
			kinds, err := soak.ParseFaults(faults)
			if err != nil {
				return usagef("%s", apperr.As(err).Message)
			}
			rateOf, err := soak.ParseRates(rates)
			if err != nil {
				return usagef("%s", apperr.As(err).Message)
			}
			if !failover && slices.ContainsFunc(kinds, func(f soak.Fault) bool { return slices.Contains(soak.FailoverFaults, f) }) {
				return usagef("--faults failover and kill-primary move a pg_auto_failover formation's primary: run soak with --failover")
			}
			var control soak.FailoverControl
			var formationURI string
			if failover {
				if err := a.loadConfig(); err != nil {
					return err
				}
				given := a.cfg.Database.URL != ""
				if err := failoverUsage(given, monitor); err != nil {
					return usagef("%s", apperr.As(err).Message)
				}
				if !slices.ContainsFunc(kinds, func(f soak.Fault) bool { return slices.Contains(soak.FailoverFaults, f) }) {
					kinds = append(kinds, soak.FailoverFaults...)
				}
				if given {
					control = givenFormation{m: autofailover.Monitor{URL: monitor}, logDir: os.TempDir()}
				} else {
					f, uri, stop, err := a.startSoakFormation(ctx)
					if err != nil {
						return err
					}
					defer stop()
					db, err := store.Open(ctx, uri, store.Options{Migrate: true, MaxConns: int32(max(a.cfg.Database.MaxConns, defaultEmbeddedConns))})
					if err != nil {
						return &setupError{err}
					}
					defer db.Close()
					a.k, a.conn = a.kernelOver(db), ConnInfo{Display: "pg_auto_failover formation " + f.Dir(), Database: embeddedDatabase, DSN: uri}
					control, formationURI, scratch = ownFormation{f: f}, uri, false
				}
			}
			k, err := a.kernel(ctx)
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("faults") {
				kinds = []soak.Fault{soak.KillChild, soak.Terminate, soak.KillServer}
				if a.cluster != nil {
					kinds = soak.AllFaults
				}
				if failover {
					kinds = append(kinds, soak.FailoverFaults...)
				}
			}
			if err := k.RequireWritable(); err != nil {
				return err
			}
			if a.cluster == nil && slices.Contains(kinds, soak.Restart) {
				return usagef("--faults restart restarts the server: it needs the embedded cluster (drop --dsn, or leave restart out)")
			}
			if a.cluster == nil && !scratch && formationURI == "" {
				return usagef("soak writes thousands of records: run it on the embedded cluster, or pass --scratch to run it in a new database on this server")
			}
			database, dsn := a.conn.Database, a.conn.DSN
			if scratch {
				database = fmt.Sprintf("idemwork_soak_%s", time.Now().UTC().Format("20060102_150405"))
				if dsn, err = a.scratchDatabase(ctx, database); err != nil {
					return err
				}
				db, err := store.Open(ctx, dsn, store.Options{Migrate: true, MaxConns: int32(max(a.cfg.Database.MaxConns, defaultEmbeddedConns))})
				if err != nil {
					return &setupError{err}
				}
				defer db.Close()
				k = a.kernelOver(db)
			}
			opts := soak.Options{Rounds: rounds, Faults: kinds, Rates: rateOf, Seed: seed, Kernel: k, DSN: dsn, Progress: a.stderr, Failover: control}
			if a.cluster != nil {
				opts.Restart = a.restartCluster
			}
			res, err := soak.Run(ctx, opts)
			if err != nil {
				return err
			}
			var verdict error
			if !res.OK() {
				verdict = apperr.New(codeSoakFailed, "%d duplicate execution(s) and %d violation(s) in %d rounds; e.g. %v", res.Duplicates, res.Violations, res.Rounds, res.Problems)
			}
			if a.flags.json {
				writeJSON(a.stdout, struct {
					soak.Result
					Database string `json:"database"`
				}{res, database})
				if verdict != nil {
					return &reportedError{verdict}
				}
				return nil
			}
			printSoak(a, res, database)
			return verdict
		}}
	f := cmd.Flags()
	f.IntVar(&rounds, "rounds", 0, "storm rounds to run (required)")
	f.StringVar(&faults, "faults", "", "comma-separated faults: kill-child,terminate,restart,kill-server, or none (default: every kind available)")
	f.Uint64Var(&seed, "seed", 0, "seed of the rounds' random choices, to repeat a run (default: random, printed)")
	f.StringVar(&rates, "rates", "", "chances per round, e.g. restart=0.01,terminate=0.5 (default kill-child=0.7 of process rounds, terminate=0.35, restart=0.004, kill-server=0.08 of HTTP rounds)")
	f.BoolVar(&scratch, "scratch", false, "run in a new database created on the server (kept afterwards, for verify)")
	f.BoolVar(&failover, "failover", false, "soak a pg_auto_failover formation (--dsn, or one soak starts) and add the failover and kill-primary faults")
	f.StringVar(&monitor, "monitor", "", "with --failover and --dsn: the formation's monitor URL (pg_autoctl show uri --formation monitor)")
	_ = cmd.MarkFlagRequired("rounds")
	return cmd
}

func printSoak(a *app, res soak.Result, database string) {
	fmt.Fprintf(a.stdout, "soak of database %s: %d rounds, %d requests in %.1f s (seed %d)\n", database, res.Rounds, res.Requests, res.TookMs/1000, res.Seed)
	kinds := make([]string, 0, len(res.Faults))
	for k := range res.Faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(a.stdout, "  fault %-12s %d\n", k, res.Faults[k])
	}
	fmt.Fprintf(a.stdout, "  executions %d, duplicates %d, violations %d (of the soak's own rows)\n", res.Executions, res.Duplicates, res.Violations)
	failed := func(s soak.VerifySummary) string {
		if len(s.Failed) == 0 {
			return "none"
		}
		var parts []string
		for _, inv := range s.Failed {
			parts = append(parts, fmt.Sprintf("%s %d", inv.Name, inv.Count))
		}
		return strings.Join(parts, ", ")
	}
	fmt.Fprintf(a.stdout, "  verify before (every owner, not the soak's): %d violation(s): %s\n", res.PreExisting.Violations, failed(res.PreExisting))
	fmt.Fprintf(a.stdout, "  verify after, the soak's own owners:        %d violation(s): %s\n", res.Verify.Violations, failed(res.Verify))
	fmt.Fprintf(a.stdout, "  verify after, every owner:                  %d violation(s): %s\n", res.AfterAll.Violations, failed(res.AfterAll))
	o, t := res.Outbox, res.OutboxMessages
	fmt.Fprintf(a.stdout, "  outbox: %d queued = %d delivered + %d failed + %d pending (%s); the worker claimed %d times: %d delivered, %d retried, %d failed, %d lost leases\n",
		t.Queued, t.Delivered, t.Failed, t.Pending, map[bool]string{true: "balanced", false: "NOT BALANCED"}[t.Balanced],
		o.Claimed, o.Delivered, o.Retried, o.Failed, o.Lost)
	if len(t.PendingIDs) > 0 {
		fmt.Fprintf(a.stdout, "    pending: %s\n", strings.Join(t.PendingIDs, ", "))
	}
	if len(t.FailedIDs) > 0 {
		fmt.Fprintf(a.stdout, "    failed: %s\n", strings.Join(t.FailedIDs, ", "))
	}
	for _, p := range res.Problems {
		fmt.Fprintf(a.stdout, "  ✗ %s\n", p)
	}
}

// scratchDatabase creates database name on the server the session is connected to and returns
// a DSN for it.
func (a *app) scratchDatabase(ctx context.Context, name string) (string, error) {
	admin := a.conn.DSN
	if a.cluster != nil {
		admin = a.cluster.DSN("postgres")
	}
	if err := store.EnsureDatabase(ctx, admin, name); err != nil {
		return "", &setupError{err}
	}
	if a.cluster != nil {
		return a.cluster.DSN(name), nil
	}
	return bench.WithDatabase(a.conn.DSN, name), nil
}

// restartCluster stops the embedded server immediately (SIGQUIT: no checkpoint, so the start
// runs crash recovery) and starts it again, as the same kind of server it was.
func (a *app) restartCluster(ctx context.Context) error {
	c := a.cluster
	if err := syscall.Kill(c.PID, syscall.SIGQUIT); err != nil {
		return fmt.Errorf("stop the server: %w", err)
	}
	deadline := time.Now().Add(time.Minute)
	for syscall.Kill(c.PID, 0) == nil {
		if time.Now().After(deadline) {
			return apperr.New(apperr.Internal, "the server (pid %d) did not stop", c.PID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	nc, err := embedded.Start(ctx, a.embeddedOptions(!c.Owned))
	if err != nil {
		return fmt.Errorf("start the server again: %w", err)
	}
	if !c.Owned {
		nc.Owned = false
	}
	a.cluster = nc
	return nil
}
