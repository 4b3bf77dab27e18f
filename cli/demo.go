package cli

import (
	"fmt"

	"github.com/oklog/ulid/v2"
	"github.com/spf13/cobra"

	"idemwork/apperr"
)

func newDemoCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "demo", Short: "Demo data and guided demos", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return usagef("demo needs a subcommand: seed or blocked-external")
		}}
	seed := &cobra.Command{Use: "seed", Short: "Write a small demo data set for alice and bob (idempotent)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := a.writer(cmd.Context())
			if err != nil {
				return err
			}
			rep, err := k.SeedDemo(cmd.Context())
			if err != nil {
				return err
			}
			if a.flags.json {
				writeJSON(a.stdout, rep)
			} else if rep.Skipped {
				fmt.Fprintln(a.stdout, "demo data already present")
			} else {
				fmt.Fprintf(a.stdout, "demo seed: %d writes %v, %d legacy receipt(s) added\n", rep.Writes, rep.Outcomes, rep.Legacy)
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
			steps, err := k.DemoBlockedExternal(cmd.Context(), owner, "demo-blocked:"+ulid.Make().String())
			if err != nil {
				return err
			}
			failed := 0
			for _, s := range steps {
				for _, c := range s.Checks {
					if !c.OK {
						failed++
					}
				}
			}
			var verdict error
			if failed > 0 {
				verdict = apperr.New(apperr.Internal, "%d check(s) of the demo failed against the database", failed)
			}
			if a.flags.json {
				writeJSON(a.stdout, map[string]any{"steps": steps})
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
					fmt.Fprintf(a.stdout, "   %s %s\n", mark, c.Text)
				}
			}
			return verdict
		}}
	blocked.Flags().StringVar(&owner, "owner", "alice", "owner id")
	cmd.AddCommand(seed, blocked)
	return cmd
}
