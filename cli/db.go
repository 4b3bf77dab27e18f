package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/embedded"
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

	var tcp bool
	urlCmd := &cobra.Command{Use: "url", Short: "Print the connection URL of the running embedded cluster", Args: cobra.NoArgs,
		Long: "url prints the cluster's private-socket URL (for psql \"$(idemwork db url)\"). With --tcp it prints the\n" +
			"loopback TCP URL instead, which carries the cluster's generated password (database.tcp_port must be set).",
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
			if tcp && !c.ListensTCP() {
				return apperr.New(apperr.NotRunning, "the cluster in %s does not listen on TCP: set database.tcp_port (e.g. -1 for any free port) and restart it", a.dataDir())
			}
			switch {
			case a.flags.json:
				writeJSON(a.stdout, map[string]any{"url": c.DSN(embeddedDatabase), "tcpUrl": nullable(c.TCPDSN(embeddedDatabase))})
			case tcp:
				fmt.Fprintln(a.stdout, c.TCPDSN(embeddedDatabase))
			default:
				fmt.Fprintln(a.stdout, c.DSN(embeddedDatabase))
			}
			return nil
		}}
	urlCmd.Flags().BoolVar(&tcp, "tcp", false, "print the loopback TCP URL (with the cluster's password)")
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
		Long: "migrate applies this binary's pending migrations. A database given by URL is migrated only here, and\n" +
			"only with --allow-writes, by a role that may create tables in the schema ([database] schema), over a\n" +
			"direct connection or a session pooler. --status only reads, on any session.",
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := a.openDB(cmd.Context(), false)
			if err != nil {
				return err
			}
			applied := 0
			if !statusOnly {
				if applied, err = db.Migrate(cmd.Context()); err != nil {
					return err
				}
			}
			st, err := db.ReadSchemaState(cmd.Context())
			if err != nil {
				return err
			}
			list := st.Statuses()
			if a.flags.json {
				out := map[string]any{"migrations": list, "pending": len(st.Pending), "schema": st.Schema, "unknown": st.Unknown}
				if len(st.Elsewhere) > 0 {
					// The schemas holding idemwork's tables when this session's holds none.
					out["elsewhere"] = st.Elsewhere
				}
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
			for _, v := range st.Unknown {
				fmt.Fprintf(a.stdout, "%04d  applied  (unknown to this idemwork: a newer one migrated the database)\n", v)
			}
			if p := st.Problem(); p != "" && statusOnly {
				fmt.Fprintf(a.stdout, "%s\n", p)
			}
			if !statusOnly {
				fmt.Fprintf(a.stdout, "applied %d migration(s) in schema %q\n", applied, st.Schema)
			}
			return nil
		}}
	cmd.Flags().BoolVar(&statusOnly, "status", false, "only show which migrations are applied (reads only)")
	return cmd
}
