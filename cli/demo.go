package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/oklog/ulid/v2"
	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/demo"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/outbox"
)

// outboxKeyPrefix is where `demo outbox` keeps its keys: the record's key is fixed, so a
// second run replays it and reuses the record (and says so); each run's notifications are new.
const outboxKeyPrefix = "demo-outbox"

func newDemoCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "demo", Short: "Demo data and guided demos", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usagef("demo needs a subcommand: seed, blocked-external or outbox")
		}}
	seed := &cobra.Command{Use: "seed", Short: "Write a small demo data set for alice and bob (idempotent)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := a.writer(cmd.Context())
			if err != nil {
				return err
			}
			rep, err := demo.Seed(cmd.Context(), k)
			if err != nil {
				return err
			}
			if a.flags.json {
				writeJSON(a.stdout, rep)
			} else if rep.Skipped {
				fmt.Fprintln(a.stdout, "demo data already present")
			} else {
				fmt.Fprintf(a.stdout, "demo seed: %d writes (%s), %d legacy receipt(s) added\n", rep.Writes, outcomeList(rep.Outcomes), rep.Legacy)
			}
			return nil
		}}
	var owner string
	blocked := &cobra.Command{Use: "blocked-external", Short: "Walk through a direct_external feature failing closed", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := a.writer(cmd.Context())
			if err != nil {
				return err
			}
			steps, err := demo.RunBlocked(cmd.Context(), k, owner, "demo-blocked:"+ulid.Make().String())
			if err != nil {
				return err
			}
			return a.printDemo(steps, nil, nil)
		}}
	blocked.Flags().StringVar(&owner, "owner", "alice", "owner id")
	var outboxOwner string
	outboxCmd := &cobra.Command{Use: "outbox", Short: "Walk through the outbox that replaces a direct provider call: queue, replay, deliver, retry, crash, FAILED",
		Long: "outbox runs COMMITMENT F02 (mode outbox) and a delivery worker of its own over its own simulated provider,\n" +
			"checking every claim against the database: the PENDING execution and its outbox message committed with the\n" +
			"audit event, a replay that writes nothing, a delivery with the message's idempotency id, a retry after a\n" +
			"backoff, a redelivery after a crash between the provider call and the settle (one effect at the provider),\n" +
			"and FAILED after the last attempt. The worker's settings come from [outbox] in the config; time passes on\n" +
			"this process's clock, which the walk-through moves to each due moment. The record is reused by later runs.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := a.writer(cmd.Context())
			if err != nil {
				return err
			}
			steps, reused, err := demo.RunOutbox(cmd.Context(), k, outboxOwner, outboxKeyPrefix, a.outboxSettings())
			if err != nil {
				return err
			}
			if reused == nil {
				reused = []string{}
			}
			return a.printDemo(steps, reused, func(w io.Writer) {
				if len(reused) == 0 {
					fmt.Fprintln(w, "reused: nothing (a first run: every row above is new)")
				}
				for _, r := range reused {
					fmt.Fprintf(w, "reused: %s\n", r)
				}
			})
		}}
	outboxCmd.Flags().StringVar(&outboxOwner, "owner", "alice", "owner id")
	cmd.AddCommand(seed, blocked, outboxCmd)
	return cmd
}

// printDemo writes a walk-through's steps (JSON: {"steps", "reused"?}) and fails with exit 4 when
// any check did not hold against the database. tail, when set, ends the text form.
func (a *app) printDemo(steps []model.DemoStep, reused []string, tail func(io.Writer)) error {
	failed := 0
	for _, s := range steps {
		failed += s.Failed()
	}
	var verdict error
	if failed > 0 {
		verdict = apperr.New(apperr.Internal, "%d check(s) of the demo failed against the database", failed)
	}
	if a.flags.json {
		out := map[string]any{"steps": steps}
		if reused != nil {
			out["reused"] = reused
		}
		writeJSON(a.stdout, out)
		if verdict != nil {
			return &reportedError{verdict}
		}
		return nil
	}
	for i, s := range steps {
		fmt.Fprintf(a.stdout, "%d. %s\n", i+1, s.Step)
		for _, n := range s.Notes {
			fmt.Fprintf(a.stdout, "   %s\n", n)
		}
		for _, c := range s.Checks {
			mark := "✓"
			if !c.OK {
				mark = "✗"
			}
			fmt.Fprintf(a.stdout, "   %s %s: %s\n", mark, c.Claim, c.Text)
		}
	}
	if tail != nil {
		tail(a.stdout)
	}
	return verdict
}

// outboxSettings are the delivery worker's settings from [outbox].
func (a *app) outboxSettings() outbox.Options {
	o := a.cfg.Outbox
	return outbox.Options{MaxAttempts: o.MaxAttempts, BaseBackoff: o.BaseBackoff.Duration, MaxBackoff: o.MaxBackoff.Duration,
		Lease: o.Lease.Duration, CallTimeout: o.CallTimeout.Duration, Concurrency: o.Concurrency}
}

// outcomeList says counts by outcome as "EXECUTED 16, REPLAYED 2", in name order.
func outcomeList(counts map[string]int) string {
	parts := make([]string, 0, len(counts))
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", name, counts[name]))
	}
	return strings.Join(parts, ", ")
}
