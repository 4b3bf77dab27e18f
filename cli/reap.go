package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/store/reap"
)

func newReapCmd(a *app) *cobra.Command {
	var owner string
	var batch int
	var dryRun bool
	cmd := &cobra.Command{Use: "reap", Short: "Delete expired idempotency keys in bounded batches",
		Long: "reap deletes idempotency rows past their expiry (SUCCEEDED, and leftover PROCESSING rows) in batches of\n" +
			"--batch rows, oldest expiry first, through the expiry indexes; a key that is still valid is never\n" +
			"deleted. Records, revisions, executions and audit events are the history and are never reaped.\n" +
			"`idemwork serve` runs the same reap every idempotency.reap_interval (default 5m; 0 disables it).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if owner != "" {
				if err := idemtype.ValidateOwner(owner); err != nil {
					return err
				}
			}
			if batch < 1 || batch > reap.MaxReapBatch {
				return usagef("--batch: want 1-%d rows, got %d", reap.MaxReapBatch, batch)
			}
			k, err := a.kernel(cmd.Context())
			if err != nil {
				return err
			}
			if !dryRun {
				if err := k.RequireWritable(); err != nil {
					return err
				}
			}
			res, err := reap.ReapExpired(cmd.Context(), k.DB(), reap.ReapParams{Owner: owner, Now: k.Runner().Clock().Now(), Batch: batch, DryRun: dryRun})
			if err != nil {
				return err
			}
			if a.flags.json {
				writeJSON(a.stdout, res)
				return nil
			}
			verb := "deleted"
			if dryRun {
				verb = "would delete"
			}
			fmt.Fprintf(a.stdout, "reap: %s %d expired key(s) in %d batch(es) of at most %d (%.1f ms)\n", verb, res.Deleted, res.Batches, batch, res.TookMs)
			return nil
		}}
	f := cmd.Flags()
	f.StringVar(&owner, "owner", "", "reap only this owner's keys (default: every owner)")
	f.IntVar(&batch, "batch", reap.DefaultReapBatch, "rows per delete statement")
	f.BoolVar(&dryRun, "dry-run", false, "count the expired keys, delete nothing")
	return cmd
}
