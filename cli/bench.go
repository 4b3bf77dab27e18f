package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/bench"
	"github.com/idemwork/idemwork/embedded"
	"github.com/idemwork/idemwork/store"
)

type benchFlags struct {
	duration, slice time.Duration
	rtt             time.Duration
	clients, rows   string
	noStorm         bool
	stormRounds     int
	noFairness      bool
	quiet           bool
	verifyEvents    string
}

func newBenchCmd(a *app) *cobra.Command {
	var bf benchFlags
	cmd := &cobra.Command{Use: "bench [--duration D] [--clients 1,4,16] [--rows 0,100k,1M] [--rtt 500us]",
		Short: "Measure the idempotency runner against hand-written SQL and the physical limit, side by side",
		Long: "bench measures what the runner costs per request against the naive SQL a user would write\n" +
			"instead (raw: the same statements with pgx, one per round trip) and against the physical limit\n" +
			"(the runner's own statements in as few pipelined round trips as the write allows: one for a create,\n" +
			"read-then-write two for a feature run, one read of the key and its rows for a replay), on\n" +
			"the same database: a fresh key (create a NOTE), a feature run (MEM-001 F01 on fresh records) and a\n" +
			"replay hit, at each --clients count. The three sides alternate in short slices so machine noise\n" +
			"hits all; compare the ratio (runner ops/s ÷ raw ops/s) and the efficiency (runner ÷ limit), not\n" +
			"absolute numbers. Then storms of same-key requests (1,000 in process with and without sharing,\n" +
			"4 processes × 100) against one lone request, and growth: the fresh-key and replay workloads again\n" +
			"after bulk-loading each further --rows level of other owners' rows. Then fairness (issue 28): one\n" +
			"owner's 2,000 concurrent GETs of a 60-revision record through the HTTP API serve runs, against\n" +
			"another owner's GETs meanwhile: that owner's p99 under the flood ÷ its p99 alone (--no-fairness skips it).\n" +
			"With --verify-events N, last, an owner with N audit events (keys, records, revisions with their digest\n" +
			"chain, executions) is loaded and `idemwork verify --owner` of it is timed.\n\n" +
			"--rtt puts every connection of the run (all sides, the storms and their worker processes) behind a\n" +
			"loopback proxy that delays each direction by half the round trip, as a network between the\n" +
			"application and PostgreSQL does; the embedded cluster is then reached over loopback TCP.\n\n" +
			"It writes only into a scratch database it creates and drops: in the embedded cluster by default\n" +
			"(durable, fsync on, as idemwork runs), or on the server of --dsn with --allow-writes (the user\n" +
			"needs CREATEDB). The defaults take about two minutes.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runBench(cmd, bf) }}
	f := cmd.Flags()
	f.DurationVar(&bf.duration, "duration", bench.DefaultDuration, "measured time per cell (workload × clients × rows), split between runner and raw")
	f.DurationVar(&bf.slice, "slice", bench.DefaultSlice, "how long one side runs before the other takes over")
	f.StringVar(&bf.clients, "clients", joinInts(bench.DefaultClients), "client counts, comma-separated")
	f.StringVar(&bf.rows, "rows", joinInts(bench.DefaultRows), "filler levels (rows of other owners per table), comma-separated; k and M suffixes allowed")
	f.DurationVar(&bf.rtt, "rtt", 0, "round trip a loopback proxy adds to every connection, e.g. 500us (0: none, the server's own endpoint)")
	f.BoolVar(&bf.noStorm, "no-storm", false, "skip the storms")
	f.IntVar(&bf.stormRounds, "storm-rounds", bench.DefaultStormRound, "how many times each storm runs (the median is reported), 1-20")
	f.BoolVar(&bf.noFairness, "no-fairness", false, "skip the fairness cell (one owner's 2,000 concurrent GETs against another owner's)")
	f.BoolVar(&bf.quiet, "quiet", false, "no progress lines on stderr")
	f.StringVar(&bf.verifyEvents, "verify-events", "0", "the verify cell: load an owner with this many audit events and time verify --owner of it (issue 22's goal: 1M in 60 s); 0 skips it")
	return cmd
}

// newBenchFloodCmd is the hidden client side of bench's fairness cell: one owner's flood of GETs
// from a process of its own, as a real client's is (bench.FloodMain; the job and its token come
// on stdin).
func newBenchFloodCmd(a *app) *cobra.Command {
	return &cobra.Command{Use: "bench-flood", Hidden: true, Args: cobra.NoArgs,
		Short: "Child process of idemwork bench's fairness cell (started by idemwork bench)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bench.FloodMain(cmd.Context(), cmd.InOrStdin(), a.stdout)
		}}
}

func (a *app) runBench(cmd *cobra.Command, bf benchFlags) error {
	ctx := cmd.Context()
	clients, err := parseCounts("--clients", bf.clients)
	if err != nil {
		return err
	}
	rows, err := parseCounts("--rows", bf.rows)
	if err != nil {
		return err
	}
	events, err := parseCounts("--verify-events", bf.verifyEvents)
	if err != nil {
		return err
	}
	if len(events) != 1 {
		return usagef("--verify-events wants one count, got %q", bf.verifyEvents)
	}
	if bf.stormRounds < 1 || bf.stormRounds > 20 {
		return usagef("--storm-rounds wants 1 to 20, got %d", bf.stormRounds)
	}
	opts, err := bench.Options{StormRounds: bf.stormRounds, Duration: bf.duration, Slice: bf.slice, Clients: clients, Rows: rows, NoStorm: bf.noStorm,
		NoFairness: bf.noFairness, RTT: bf.rtt, VerifyEvents: events[0]}.Normalized()
	if err != nil {
		return usagef("%s", strings.TrimPrefix(err.Error(), "bench: "))
	}
	if err := a.loadConfig(); err != nil {
		return err
	}

	var progress io.Writer = a.stderr
	if bf.quiet {
		progress = nil
	}
	var adminDSN, display string
	// measured turns the scratch database's name into the URL the run measures through.
	measured := func(s *bench.Scratch) string { return s.DSN }
	if url := a.cfg.Database.URL; url != "" {
		if !a.cfg.Database.AllowWrites {
			return usagef("bench writes into a scratch database it creates (and drops) on the server of the URL; pass --allow-writes")
		}
		where, _ := store.DescribeDSN(url)
		adminDSN, display = url, where
	} else {
		eo := a.embeddedOptions(false)
		if opts.RTT > 0 && eo.TCPPort == 0 {
			// Behind the proxy the server is reached as over a network: on loopback TCP (any free
			// port, with the cluster's password), not its private socket.
			eo.TCPPort = -1
		}
		c, err := embedded.Start(ctx, eo)
		if err != nil {
			return &setupError{fmt.Errorf("embedded PostgreSQL: %w", err)}
		}
		a.cluster = c // a.close stops it if this command started it
		adminDSN, display = c.DSN("postgres"), "embedded "+c.DataDir
		if opts.RTT > 0 {
			if c.ListensTCP() {
				tcp := c.TCPDSN("postgres")
				measured = func(s *bench.Scratch) string { return bench.WithDatabase(tcp, s.Name) }
			} else if progress != nil {
				fmt.Fprintf(progress, "bench: the cluster already running in %s does not listen on TCP: the proxy forwards to its socket\n", c.DataDir)
			}
		}
	}
	scratch, err := bench.CreateScratch(ctx, adminDSN)
	if err != nil {
		return &setupError{err}
	}
	defer func() {
		if err := scratch.Drop(ctx); err != nil {
			fmt.Fprintf(a.stderr, "idemwork: %v\n", err)
		}
	}()
	if progress != nil {
		fmt.Fprintf(progress, "bench: scratch database %s (dropped at the end)\n", scratch.Name)
	}

	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: find this binary for the storm's worker processes: %w", err)
	}
	// The storm's worker processes take their session from their own command line: the scratch
	// database (through the proxy under --rtt), which this session may write (it created it).
	rep, err := bench.Run(ctx, bench.Env{DSN: measured(scratch), Display: display + " (scratch database " + scratch.Name + ")",
		Executable: exe, WorkerArgs: []string{"storm-worker", "--allow-writes"}, WorkerDSNVar: "IDEMWORK_DSN", Serve: serveStorm,
		FloodArgs: []string{"bench-flood"},
		Progress:  progress, MemMaxContentLength: a.cfg.Modules.MEM001.MaxContentLength}, opts)
	if err != nil {
		return err
	}
	if a.flags.json {
		writeJSON(a.stdout, rep)
		return nil
	}
	bench.Print(a.stdout, rep)
	return nil
}

// parseCounts reads "1,4,16" or "0,100k,1M".
func parseCounts(flag, s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		p := strings.TrimSpace(part)
		mult := 1
		switch {
		case strings.HasSuffix(p, "k"), strings.HasSuffix(p, "K"):
			mult, p = 1000, p[:len(p)-1]
		case strings.HasSuffix(p, "M"), strings.HasSuffix(p, "m"):
			mult, p = 1_000_000, p[:len(p)-1]
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, usagef("%s: %q is not a count (e.g. 1,4,16 or 0,100k,1M)", flag, part)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

func joinInts(v []int) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}
