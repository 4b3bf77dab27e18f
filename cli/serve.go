package cli

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/httpapi"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/reap"
	"github.com/idemwork/idemwork/wire"
)

func newServeCmd(a *app) *cobra.Command {
	var addr string
	var devAuth, allowRemote bool
	cmd := &cobra.Command{Use: "serve", Short: "Serve the kernel over HTTP (SPEC §10.3) on loopback",
		Long: "serve answers POST/PATCH/GET under /v1/modules/{module}/records with the kernel behind it. The owner\n" +
			"is the one config [http.tokens] maps the request's 'Authorization: Bearer <token>' to; with --dev-auth,\n" +
			"loopback clients may name it in X-Owner-Id instead. It stops gracefully on SIGINT/SIGTERM. Every\n" +
			"idempotency.reap_interval (default 5m; 0 disables it) it deletes expired keys, as idemwork reap does.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.loadConfig(); err != nil {
				return err
			}
			if !cmd.Flags().Changed("addr") {
				addr = a.cfg.HTTP.Addr
			}
			if !allowRemote {
				if err := httpapi.CheckLoopbackAddr(addr); err != nil {
					return usagef("%s", apperr.As(err).Message)
				}
			}
			ln, err := httpapi.Listen(addr, allowRemote)
			if err != nil {
				if ae, ok := err.(*apperr.Error); ok && ae.Code == apperr.Usage {
					return usagef("%s", ae.Message)
				}
				return &setupError{err}
			}
			return a.serve(cmd.Context(), ln, devAuth)
		}}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8787", "listen address (loopback only; default: config http.addr)")
	f.BoolVar(&devAuth, "dev-auth", false, "accept X-Owner-Id as the owner from loopback clients (development only)")
	f.BoolVar(&allowRemote, "allow-remote", false, "allow a non-loopback --addr (put TLS and a proxy in front)")
	return cmd
}

// serveRetry is how long serve waits between attempts to open a database that is not there yet.
const serveRetry = 2 * time.Second

// replicationCheck is how often serve reads the replication state again (and the node its new
// connections reach).
const replicationCheck = 5 * time.Second

// serve answers on ln from the start: /healthz at once, everything else 503 DATABASE_UNAVAILABLE
// until the database opens (an unreachable one is tried again every serveRetry; a refusal
// retrying cannot cure — credentials, a missing database, a misconfiguration — ends serve with
// its code). Then the API, the reaper and the replication watcher run until ctx ends.
func (a *app) serve(ctx context.Context, ln net.Listener, devAuth bool) error {
	logf := func(format string, args ...any) { fmt.Fprintf(a.stderr, "idemwork serve: "+format+"\n", args...) }
	url := "http://" + ln.Addr().String()
	starting := httpapi.NewStarting(a.describeDatabase())
	srv := httpapi.NewServer(starting, log.New(a.stderr, "idemwork serve: ", 0))
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- httpapi.Serve(sctx, srv, ln, httpapi.ShutdownGrace) }()
	k, err := a.openForServe(sctx, starting, url, logf)
	if err != nil {
		stop()
		<-served
		return err
	}
	// The reaper (every idempotency.reap_interval; 0 disables it) counts on /metrics.
	var reaper *reap.Reaper
	var extra []prometheus.Collector
	if a.cfg.Idempotency.ReapInterval.Duration > 0 && a.db.Access() == store.Writable {
		reaper = reap.NewReaper(k.DB(), k.Runner().Clock().Now, reap.DefaultReapBatch,
			slog.New(slog.NewTextHandler(a.stderr, nil)).With("component", "reaper"))
		extra = reaperMetrics(reaper)
	}
	api := httpapi.New(k, httpapi.Options{Tokens: a.cfg.HTTP.Tokens, MaxBodyBytes: a.cfg.HTTP.MaxBodyBytes,
		DevAuth: devAuth, AccessLog: a.stderr, RequireKey: a.cfg.HTTP.RequireKey, Collectors: extra,
		OwnerMaxReads: a.cfg.HTTP.OwnerMaxReads, ReadWait: a.cfg.Idempotency.AcquireTimeout.Duration})
	starting.Ready(api)
	a.printServeBanner(url, devAuth)
	if len(a.cfg.HTTP.Tokens) == 0 && !devAuth {
		logf("no [http.tokens] configured: every request will get 401 (see config.example.toml, or use --dev-auth)")
	}
	var wg sync.WaitGroup
	wg.Go(func() { a.watchReplication(sctx, logf) })
	if reaper != nil {
		wg.Go(func() { reaper.Run(sctx, a.cfg.Idempotency.ReapInterval.Duration) })
	}
	err = <-served
	stop()
	wg.Wait()
	if err != nil {
		return &setupError{err}
	}
	logf("stopped")
	return nil
}

// describeDatabase names the database serve opens, before it is open: the URL's first host (or
// the embedded cluster), never a password.
func (a *app) describeDatabase() string {
	if a.cfg.Database.URL == "" {
		return "embedded " + a.dataDir()
	}
	where, database := store.DescribeDSN(a.cfg.Database.URL)
	return where + ", database " + database
}

// openForServe opens the database and the kernel, trying again every serveRetry while it is
// unavailable (the first failure and the recovery are logged); any other failure is returned.
func (a *app) openForServe(ctx context.Context, starting *httpapi.Starting, url string, logf func(string, ...any)) (*kernel.Kernel, error) {
	var waited bool
	for {
		k, err := a.kernel(ctx)
		if err == nil {
			if waited {
				logf("the database answers now (%s)", a.conn.Display)
			}
			return k, nil
		}
		if ctx.Err() != nil {
			return nil, apperr.Wrap(apperr.DatabaseUnavailable, err, "idemwork serve stopped before the database (%s) became available: %s",
				a.describeDatabase(), wire.Coded(err).Message)
		}
		if wire.Coded(err).Code != apperr.DatabaseUnavailable {
			return nil, err
		}
		starting.Failed(err)
		if !waited {
			logf("listening on %s, but the database is not available yet: %s; trying again every %s (/healthz answers; /readyz and "+
				"every other route say 503 DATABASE_UNAVAILABLE until it is)", url, wire.Coded(err).Message, serveRetry)
			waited = true
		}
		select {
		case <-ctx.Done():
		case <-time.After(serveRetry):
		}
	}
}

// printServeBanner says where serve listens and what it is connected to — the node actually
// reached, whether it is read-only and why, and whether acknowledged keys can be lost on failover.
func (a *app) printServeBanner(url string, devAuth bool) {
	repl := a.db.Replication()
	if a.flags.json {
		banner := map[string]any{"listening": url, "tokens": len(a.cfg.HTTP.Tokens), "devAuth": devAuth,
			"database": a.conn.Display, "readOnly": a.conn.ReadOnly, "readOnlyReason": nullable(a.conn.ReadOnlyReason),
			"pooler": a.conn.Pooler, "execMode": a.conn.ExecMode,
			"replication": map[string]any{"synchronous": repl.Synchronous, "standbys": repl.Standbys, "risk": repl.Risk}}
		if repl.AtRisk() {
			banner["warning"] = "acknowledged keys can be lost on failover: " + repl.Risk
		}
		writeJSON(a.stdout, banner)
		return
	}
	fmt.Fprintf(a.stdout, "idemwork serve: listening on %s (database %s%s; %d token(s)%s); Ctrl-C stops\n", url,
		a.conn.Display, readOnlyNote(a.db), len(a.cfg.HTTP.Tokens), map[bool]string{true: ", --dev-auth on loopback", false: ""}[devAuth])
	if repl.AtRisk() {
		fmt.Fprintf(a.stdout, "idemwork serve: WARNING: acknowledged keys can be lost on failover: %s\n", repl.Risk)
	}
	if err := a.db.WriteRefusal(); apperr.Is(err, apperr.ReplicationUnsafe) {
		fmt.Fprintf(a.stdout, "idemwork serve: writes are refused for now: %s\n", apperr.As(err).Message)
	}
}

// watchReplication reads the replication state every replicationCheck and logs what changed:
// the node new connections reach (after a failover), the server's role, synchronicity, the risk.
func (a *app) watchReplication(ctx context.Context, logf func(string, ...any)) {
	failing := false
	a.db.WatchReplication(ctx, replicationCheck, func(old, now store.Replication) {
		failing = false
		if old.Host != now.Host || old.Port != now.Port {
			logf("the database is now reached at %s (was %s): new connections go there (a failover, or the URL's next host)", now.Where(), old.Where())
		}
		if old.InRecovery != now.InRecovery {
			logf("%s is now a %s", now.Where(), map[bool]string{true: "hot standby: writes there fail until the primary is reached", false: "primary"}[now.InRecovery])
		}
		switch {
		case now.AtRisk() && (!old.AtRisk() || old.Risk != now.Risk):
			logf("WARNING: acknowledged keys can be lost on failover: %s", now.Risk)
		case !now.AtRisk() && old.AtRisk():
			switch {
			case now.Synchronous:
				logf("replication on %s: synchronous: a synchronous standby confirms every commit", now.Where())
			case now.Standbys == 0:
				logf("replication on %s: no standby is attached (nothing to fail over to): acknowledged keys are as durable as this server's disk", now.Where())
			default:
				logf("replication on %s: acknowledged keys are no longer at risk on failover", now.Where())
			}
		}
		if a.db.RequiresSynchronousReplication() && old.Synchronous != now.Synchronous {
			if now.Synchronous {
				logf("a synchronous standby confirms commits: writes are accepted again")
			} else {
				logf("no synchronous standby confirms commits: writes are refused with REPLICATION_UNSAFE until one does")
			}
		}
	}, func(err error) {
		if !failing {
			logf("reading the replication state failed: %s (tried again every %s)", wire.Coded(err).Message, replicationCheck)
			failing = true
		}
	})
}

// readOnlyNote is ", read-only: <why and what to do>" for a read-only session, else "".
func readOnlyNote(db *store.DB) string {
	if err := db.WriteRefusal(); err != nil && !apperr.Is(err, apperr.ReplicationUnsafe) {
		return ", read-only: " + apperr.As(err).Message
	}
	return ""
}

// reaperMetrics are the reaper's running totals as Prometheus counters.
func reaperMetrics(r *reap.Reaper) []prometheus.Collector {
	counter := func(name, help string, v func(reap.ReaperTotals) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v(r.Totals())) })
	}
	return []prometheus.Collector{
		counter("idemwork_reaper_runs_total", "Reaps of expired idempotency keys run by serve.", func(t reap.ReaperTotals) int64 { return t.Runs }),
		counter("idemwork_reaper_deleted_total", "Expired idempotency rows the reaper deleted.", func(t reap.ReaperTotals) int64 { return t.Deleted }),
		counter("idemwork_reaper_failures_total", "Reaps that failed (retried at the next interval).", func(t reap.ReaperTotals) int64 { return t.Failures }),
	}
}
