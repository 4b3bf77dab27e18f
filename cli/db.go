package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"idemwork/apperr"
	"idemwork/embedded"
	"idemwork/migrations"
)

func newDBCmd(a *app) *cobra.Command {
	db := &cobra.Command{Use: "db", Short: "Manage the embedded PostgreSQL cluster", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("db needs a subcommand: start, stop, status or url")
		}}

	start := &cobra.Command{Use: "start", Short: "Start the embedded cluster and leave it running", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.loadConfig(); err != nil {
				return err
			}
			c, err := embedded.Start(cmd.Context(), a.embeddedOptions(true))
			if err != nil {
				return &setupError{fmt.Errorf("embedded PostgreSQL: %w", err)}
			}
			if err := ensureEmbeddedSchema(cmd, a, c); err != nil {
				return err
			}
			return printStatus(a, c.DataDir)
		}}

	stop := &cobra.Command{Use: "stop", Short: "Stop the embedded cluster", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.loadConfig(); err != nil {
				return err
			}
			was, err := embedded.StopDataDir(cmd.Context(), a.dataDir())
			if err != nil {
				return &setupError{err}
			}
			if a.flags.json {
				writeJSON(a.stdout, map[string]any{"stopped": was, "dataDir": a.dataDir()})
			} else if was {
				fmt.Fprintf(a.stdout, "stopped the cluster in %s\n", a.dataDir())
			} else {
				fmt.Fprintf(a.stdout, "no cluster was running in %s\n", a.dataDir())
			}
			return nil
		}}

	status := &cobra.Command{Use: "status", Short: "Show whether the embedded cluster runs", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.loadConfig(); err != nil {
				return err
			}
			return printStatus(a, a.dataDir())
		}}

	urlCmd := &cobra.Command{Use: "url", Short: "Print the connection URL of the running embedded cluster", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.loadConfig(); err != nil {
				return err
			}
			c, err := embedded.Attach(a.dataDir())
			if err != nil {
				return &setupError{err}
			}
			if c == nil {
				return apperr.New(apperr.NotRunning, "no cluster runs in %s: start one with 'idemwork db start'", a.dataDir())
			}
			if a.flags.json {
				writeJSON(a.stdout, map[string]any{"url": c.DSN(embeddedDatabase), "tcpUrl": nullable(c.TCPDSN(embeddedDatabase))})
			} else {
				fmt.Fprintln(a.stdout, c.DSN(embeddedDatabase))
			}
			return nil
		}}
	db.AddCommand(start, stop, status, urlCmd)
	return db
}

// ensureEmbeddedSchema creates and migrates the idemwork database of a cluster just started.
func ensureEmbeddedSchema(cmd *cobra.Command, a *app, _ *embedded.Cluster) error {
	// The detached server is found running, so a.cluster is not owned and close leaves it up.
	_, err := a.openDB(cmd.Context(), true)
	return err
}

func printStatus(a *app, dataDir string) error {
	st, err := embedded.Inspect(dataDir)
	if err != nil {
		return &setupError{err}
	}
	if a.flags.json {
		writeJSON(a.stdout, st)
		return nil
	}
	if st.Running {
		fmt.Fprintf(a.stdout, "running: pid %d, PostgreSQL %s\ndata dir: %s\nsocket dir: %s (port %d)\n",
			st.PID, st.Version, st.DataDir, st.SocketDir, st.Port)
	} else {
		fmt.Fprintf(a.stdout, "not running (data dir %s)\n", st.DataDir)
	}
	return nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func newMigrateCmd(a *app) *cobra.Command {
	var statusOnly bool
	cmd := &cobra.Command{Use: "migrate", Short: "Apply pending schema migrations (or show them with --status)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := a.openDB(cmd.Context(), false)
			if err != nil {
				return err
			}
			applied := 0
			if !statusOnly {
				if db.ReadOnly {
					return apperr.New(apperr.ReadOnly, "migrating needs writes: pass --allow-writes")
				}
				if applied, err = migrations.Up(cmd.Context(), db.SQL()); err != nil {
					return err
				}
			}
			list, err := migrations.List(cmd.Context(), db.SQL())
			if err != nil {
				return err
			}
			pending := 0
			for _, m := range list {
				if !m.Applied {
					pending++
				}
			}
			if a.flags.json {
				out := map[string]any{"migrations": list, "pending": pending}
				if !statusOnly {
					out["applied"] = applied
				}
				writeJSON(a.stdout, out)
				return nil
			}
			for _, m := range list {
				state := "pending"
				if m.Applied {
					state = "applied"
				}
				fmt.Fprintf(a.stdout, "%04d  %-8s %s\n", m.Version, state, m.Name)
			}
			if !statusOnly {
				fmt.Fprintf(a.stdout, "applied %d migration(s)\n", applied)
			}
			return nil
		}}
	cmd.Flags().BoolVar(&statusOnly, "status", false, "only show which migrations are applied")
	return cmd
}
