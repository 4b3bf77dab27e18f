package cli

import "github.com/spf13/cobra"

// addMoreCommands registers storm, serve and their worker commands.
func addMoreCommands(root *cobra.Command, a *app) {
	root.AddCommand(newStormCmd(a), newStormWorkerCmd(a), newServeCmd(a))
	root.AddCommand(newBenchCmd(a), newBenchFloodCmd(a))
	root.AddCommand(newVerifyCmd(a), newReapCmd(a), newSoakCmd(a))
	root.AddCommand(newDoctorCmd(a))
}
