package cli

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/kernel"
)

func newVerifyCmd(a *app) *cobra.Command {
	var owner string
	var all bool
	var batch int
	cmd := &cobra.Command{Use: "verify", Short: "Check the invariants of the stored rows (exit 4 on violations)",
		Long: "verify reads every idempotency row, record, revision, execution, outbox message and audit event (of one\n" +
			"owner with --owner, of all with --all) in keyset pages inside one read-only snapshot and checks the\n" +
			"invariants of SPEC §4, §6 and §7: envelopes restore exactly, revisions are dense and consistent, every\n" +
			"revision and execution is audited, the outbox agrees with its executions and was settled once, and no\n" +
			"stored text holds a token, a connection string or MEM-001 content. Each invariant reports a count and up\n" +
			"to 10 examples. It never writes, so it runs against a read-only session too. Exit 0 clean, 4 with violations.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (owner == "") == !all {
				return usagef("verify needs --owner O or --all")
			}
			if batch < 1 || batch > 10_000 {
				return usagef("--batch: want 1-10000 rows per page, got %d", batch)
			}
			k, err := a.kernel(cmd.Context())
			if err != nil {
				return err
			}
			svc, err := a.service(cmd.Context())
			if err != nil {
				return err
			}
			check := k.VerifyInvariants
			if svc != nil {
				check = svc.VerifyInvariants // a service's database: the runner's invariants over its keys
			}
			rep, err := check(cmd.Context(), kernel.VerifyOptions{Owner: owner, Batch: batch,
				Secrets: slices.Collect(maps.Keys(a.cfg.HTTP.Tokens))})
			if err != nil {
				return err
			}
			var verdict error
			if !rep.OK {
				verdict = apperr.New(kernel.CodeInvariantViolations, "%d violation(s) of %d invariant(s)", rep.Violations, len(rep.Failed()))
			}
			if a.flags.json {
				writeJSON(a.stdout, rep)
				if verdict != nil {
					return &reportedError{verdict}
				}
				return nil
			}
			scope := "every owner"
			if owner != "" {
				scope = "owner " + owner
			}
			if svc != nil {
				fmt.Fprintf(a.stdout, "verify %s of a service's keys (schema %s): %d keys in %d pages (%.0f ms)\n",
					scope, k.DB().Connection().Schema, rep.Checked["keys"], rep.Batches, rep.TookMs)
			} else {
				fmt.Fprintf(a.stdout, "verify %s: %d keys, %d records, %d revisions, %d executions, %d outbox messages, %d audit events in %d pages (%.0f ms)\n",
					scope, rep.Checked["keys"], rep.Checked["records"], rep.Checked["revisions"], rep.Checked["executions"],
					rep.Checked["outboxMessages"], rep.Checked["auditEvents"], rep.Batches, rep.TookMs)
			}
			for _, inv := range rep.Invariants {
				mark := "✓"
				if inv.Count > 0 {
					mark = "✗"
				}
				fmt.Fprintf(a.stdout, "%s %-26s %6d  %s\n", mark, inv.Name, inv.Count, inv.Description)
				for _, ex := range inv.Examples {
					fmt.Fprintf(a.stdout, "    %s\n", escaped(ex.String()))
				}
			}
			return verdict
		}}
	f := cmd.Flags()
	f.StringVar(&owner, "owner", "", "check one owner's rows")
	f.BoolVar(&all, "all", false, "check every owner's rows")
	f.IntVar(&batch, "batch", kernel.DefaultVerifyBatch, "rows per keyset page")
	return cmd
}

// escaped quotes control characters, so stored text cannot move the terminal's cursor.
func escaped(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
