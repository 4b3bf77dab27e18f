package cli

import (
	"github.com/spf13/cobra"

	"idemwork/storm"
)

// newStormWorkerCmd is the hidden child side of `storm --processes P`: it reads its job from
// stdin, waits on the barrier pipe and streams one JSON line per request (see storm.WorkerMain).
// It never opens the app's database: the job carries the parent's DSN.
func newStormWorkerCmd(a *app) *cobra.Command {
	return &cobra.Command{Use: "storm-worker", Hidden: true, Args: cobra.NoArgs,
		Short: "Child process of a multi-process storm (started by idemwork storm)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return stormUsage(storm.WorkerMain(cmd.Context(), cmd.InOrStdin(), a.stdout))
		}}
}
