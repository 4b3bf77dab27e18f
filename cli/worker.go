package cli

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/embedded"
	"github.com/idemwork/idemwork/httpapi"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/storm"
)

// newStormWorkerCmd is the hidden child side of `storm --processes P` and `--servers N`: it
// reads its job from stdin, waits on the pipe on fd 3 and streams JSON lines (see
// storm.WorkerMain). What it may do comes from this process's own session rules, resolved as
// every command resolves them (--dsn, IDEMWORK_DSN, config, --allow-writes, the embedded
// cluster of --data-dir), which the parent passes on its command line and in its environment;
// never from the job alone.
func newStormWorkerCmd(a *app) *cobra.Command {
	return &cobra.Command{Use: "storm-worker", Hidden: true, Args: cobra.NoArgs,
		Short: "Child process of a multi-process storm (started by idemwork storm)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if a.getenv(storm.WorkerEnvVar) != "1" {
				return usagef("storm-worker is started by 'idemwork storm --processes N', not by hand")
			}
			session, err := a.workerSession()
			if err != nil {
				return err
			}
			return stormUsage(storm.WorkerMain(cmd.Context(), cmd.InOrStdin(), a.stdout, session))
		}}
}

// workerSession is the database a worker may use and whether it may write, by the same rules
// as openDB: a database given by URL is read-only unless writes are allowed; the embedded
// cluster (which the parent started and keeps running) is writable. The worker never starts a
// cluster of its own.
func (a *app) workerSession() (storm.WorkerSession, error) {
	if err := a.loadConfig(); err != nil {
		return storm.WorkerSession{}, err
	}
	if u := a.cfg.Database.URL; u != "" {
		// The parent reached this database a moment ago: a worker waits longer for its connections
		// than a user's first command would (store.WithChildConnectTimeout).
		return storm.WorkerSession{DSN: store.WithChildConnectTimeout(u), ReadOnly: !a.cfg.Database.AllowWrites, Serve: serveStorm}, nil
	}
	c, err := embedded.Attach(a.dataDir())
	if err != nil {
		return storm.WorkerSession{}, &setupError{fmt.Errorf("storm-worker: embedded PostgreSQL: %w", err)}
	}
	if c == nil {
		return storm.WorkerSession{}, &setupError{fmt.Errorf("storm-worker: the embedded cluster of %s is not running (the storm that starts this worker keeps it running)", a.dataDir())}
	}
	dsn := c.DSN(embeddedDatabase)
	if s := a.cfg.Database.Schema; s != "" {
		dsn = store.WithDSNParams(dsn, [][2]string{{"search_path", pgx.Identifier{s}.Sanitize()}})
	}
	return storm.WorkerSession{DSN: store.WithChildConnectTimeout(dsn), Serve: serveStorm}, nil
}

// serveStorm is how a storm serves the HTTP API it fires at (its own server, or a serving
// child's): the adapter `idemwork serve` runs, over the storm's kernel.
func serveStorm(ctx context.Context, k *kernel.Kernel, ln net.Listener, o storm.ServeOptions) error {
	api := httpapi.New(k, httpapi.Options{Tokens: o.Tokens, MaxBodyBytes: o.MaxBodyBytes})
	return httpapi.Serve(ctx, httpapi.NewServer(api, nil), ln, 5*time.Second)
}

// stormWorkerArgs are the worker's command line and environment for this invocation's session:
// the same database and the same permission to write, as this process resolved them.
func (a *app) stormWorkerArgs() ([]string, []string) {
	args := []string{"storm-worker"}
	var env []string
	if a.flags.configPath != "" {
		args = append(args, "--config", a.flags.configPath)
	}
	if a.flags.allowInsecureConfig {
		args = append(args, "--allow-insecure-config")
	}
	if u := a.cfg.Database.URL; u != "" {
		// Through the environment, not argv: a password in the URL stays out of ps. The URL is
		// the session's own (a.conn.DSN): it carries the pooler and schema this process was told
		// about, so the worker talks to the database the same way.
		if a.conn.DSN != "" {
			u = a.conn.DSN
		}
		env = append(env, "IDEMWORK_DSN="+u)
		if a.cfg.Database.AllowWrites {
			args = append(args, "--allow-writes")
		}
	} else {
		args = append(args, "--data-dir", a.dataDir())
		if s := a.cfg.Database.Schema; s != "" {
			env = append(env, "IDEMWORK_SCHEMA="+s)
		}
	}
	return args, env
}
