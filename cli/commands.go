package cli

import "github.com/spf13/cobra"

// addCommands registers the kernel's commands (create, patch, action, …).
func addCommands(root *cobra.Command, a *app) {}
