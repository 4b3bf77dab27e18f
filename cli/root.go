package cli

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/config"
	"github.com/idemwork/idemwork/libinspect"
	"github.com/idemwork/idemwork/wire"
)

// Main runs the command line with the process's arguments and returns the exit code.
func Main() int { return MainWith(Options{}) }

// Options extend the workbench built into a binary.
type Options struct {
	// Plugins restore the results of a service's policies, so that key, the Keys view and
	// verify show (and check) what a replay of a service's key returns, not only its stored
	// reference. A service builds its own workbench binary with them:
	//
	//	func main() { os.Exit(cli.MainWith(cli.Options{Plugins: []libinspect.Plugin{
	//		libinspect.PolicyPlugin("shop", func(q idem.Querier) idem.ResultPolicy[Order] { return orderPolicy{q: q, schema: "shop"} }),
	//
	// where orderPolicy is the service's policy built over an idem.Querier (the workbench's
	// read-only session), not over the service's own pool.
	//	}})) }
	Plugins []libinspect.Plugin
}

// MainWith is Main with options.
func MainWith(opts Options) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A secret on the command line was hidden from ps before main (package argvmask); the
	// command parses what was given and warns about it.
	args := commandLine()
	return RunWith(ctx, args[1:], os.Stdout, os.Stderr, os.Getenv, opts)
}

// Run executes one command line. It is what tests call: nothing is global.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv config.Getenv) int {
	return RunWith(ctx, args, stdout, stderr, getenv, Options{})
}

// RunWith is Run with options.
func RunWith(ctx context.Context, args []string, stdout, stderr io.Writer, getenv config.Getenv, opts Options) int {
	a := &app{stdout: stdout, stderr: stderr, getenv: getenv, plugins: opts.Plugins}
	defer a.close()
	root := newRoot(a)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		return printError(stdout, stderr, a.flags.json || askedForJSON(args), err)
	}
	return wire.ExitOK
}

// askedForJSON reports whether args carry --json. Flag parsing stops at the first bad flag, so
// a --json after it was never parsed; a script that asked for JSON still gets its error object.
func askedForJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "--json=true", "--json=1", "--json=t", "--json=TRUE", "--json=True":
			return true
		}
	}
	return false
}

func newRoot(a *app) *cobra.Command {
	var tuiOpts tuiOptions
	root := &cobra.Command{
		Use:   "idemwork",
		Short: "A terminal workbench for idempotent writes over PostgreSQL",
		Long: "idemwork embeds a record kernel and an idempotency runner over PostgreSQL (a private embedded\n" +
			"cluster by default). Run it bare for the TUI, or use the commands below from scripts (--json).",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTUI(cmd.Context(), a, tuiOpts)
		},
	}
	root.Flags().StringVar(&tuiOpts.owner, "owner", "", "owner the workbench opens on (default: config tui.owner, IDEMWORK_OWNER)")
	root.Flags().BoolVar(&tuiOpts.demo, "demo", false, "seed the demo data (idempotent) before opening the workbench")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usagef("%v", err) })
	pf := root.PersistentFlags()
	pf.StringVar(&a.flags.dsn, "dsn", "", "PostgreSQL URL (default: IDEMWORK_DSN, DATABASE_URL, config, else the embedded cluster)")
	pf.StringVar(&a.flags.configPath, "config", "", "config file (default: IDEMWORK_CONFIG or ~/.config/idemwork/config.toml)")
	pf.StringVar(&a.flags.dataDir, "data-dir", "", "embedded cluster directory (default: "+"$XDG_DATA_HOME/idemwork/pg; /var/lib/idemwork/pg as root)")
	pf.BoolVar(&a.flags.json, "json", false, "print exactly one JSON object on stdout")
	pf.BoolVar(&a.flags.allowWrites, "allow-writes", false, "allow writes to a database given by URL (read-only otherwise)")
	pf.BoolVar(&a.flags.allowInsecureConfig, "allow-insecure-config", false, "use a config file holding tokens or a database password although other users can read it (chmod 600 it instead)")
	pf.StringVar(&a.flags.schema, "schema", "", "schema of the tables (default: config [database] schema, IDEMWORK_SCHEMA; a service's: where idem.Migrate put its keys)")

	root.AddCommand(newDBCmd(a), newMigrateCmd(a))
	addCommands(root, a)
	return root
}
