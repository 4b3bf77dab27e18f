package cli

import (
	"context"
	"fmt"
	"log"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/httpapi"
	"github.com/idemwork/idemwork/store"
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
			ctx := cmd.Context()
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
			k, err := a.kernel(ctx)
			if err != nil {
				return err
			}
			ln, err := httpapi.Listen(addr, allowRemote)
			if err != nil {
				if ae, ok := err.(*apperr.Error); ok && ae.Code == apperr.Usage {
					return usagef("%s", ae.Message)
				}
				return &setupError{err}
			}
			// The reaper (every idempotency.reap_interval; 0 disables it) counts on /metrics.
			var reaper *store.Reaper
			var extra []prometheus.Collector
			if a.cfg.Idempotency.ReapInterval.Duration > 0 && a.db.WriteRefusal() == nil {
				reaper = store.NewReaper(k.DB(), k.Runner().Clock().Now, store.DefaultReapBatch,
					slog.New(slog.NewTextHandler(a.stderr, nil)).With("component", "reaper"))
				extra = reaperMetrics(reaper)
			}
			api := httpapi.New(k, httpapi.Options{Tokens: a.cfg.HTTP.Tokens, MaxBodyBytes: a.cfg.HTTP.MaxBodyBytes,
				DevAuth: devAuth, AccessLog: a.stderr, RequireKey: a.cfg.HTTP.RequireKey, Collectors: extra,
				OwnerMaxReads: a.cfg.HTTP.OwnerMaxReads, ReadWait: a.cfg.Idempotency.AcquireTimeout.Duration})
			srv := httpapi.NewServer(api, log.New(a.stderr, "idemwork serve: ", 0))
			url := "http://" + ln.Addr().String()
			if a.flags.json {
				writeJSON(a.stdout, map[string]any{"listening": url, "tokens": len(a.cfg.HTTP.Tokens), "devAuth": devAuth,
					"database": a.conn.Display, "readOnly": a.conn.ReadOnly, "readOnlyReason": nullable(a.conn.ReadOnlyReason),
					"pooler": a.conn.Pooler, "execMode": a.conn.ExecMode})
			} else {
				fmt.Fprintf(a.stdout, "idemwork serve: listening on %s (database %s%s; %d token(s)%s); Ctrl-C stops\n", url,
					a.conn.Display, readOnlyNote(a.db), len(a.cfg.HTTP.Tokens), map[bool]string{true: ", --dev-auth on loopback", false: ""}[devAuth])
			}
			if len(a.cfg.HTTP.Tokens) == 0 && !devAuth {
				fmt.Fprintln(a.stderr, "idemwork serve: no [http.tokens] configured: every request will get 401 (see config.example.toml, or use --dev-auth)")
			}
			if reaper != nil {
				rctx, stopReaper := context.WithCancel(ctx)
				reaped := make(chan struct{})
				go func() { defer close(reaped); reaper.Run(rctx, a.cfg.Idempotency.ReapInterval.Duration) }()
				defer func() { stopReaper(); <-reaped }()
			}
			if err := httpapi.Serve(ctx, srv, ln, httpapi.ShutdownGrace); err != nil {
				return &setupError{err}
			}
			fmt.Fprintln(a.stderr, "idemwork serve: stopped")
			return nil
		}}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8787", "listen address (loopback only; default: config http.addr)")
	f.BoolVar(&devAuth, "dev-auth", false, "accept X-Owner-Id as the owner from loopback clients (development only)")
	f.BoolVar(&allowRemote, "allow-remote", false, "allow a non-loopback --addr (put TLS and a proxy in front)")
	return cmd
}

// readOnlyNote is ", read-only: <why and what to do>" for a read-only session, else "".
func readOnlyNote(db *store.DB) string {
	if err := db.WriteRefusal(); err != nil {
		return ", read-only: " + apperr.As(err).Message
	}
	return ""
}

// reaperMetrics are the reaper's running totals as Prometheus counters.
func reaperMetrics(r *store.Reaper) []prometheus.Collector {
	counter := func(name, help string, v func(store.ReaperTotals) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v(r.Totals())) })
	}
	return []prometheus.Collector{
		counter("idemwork_reaper_runs_total", "Reaps of expired idempotency keys run by serve.", func(t store.ReaperTotals) int64 { return t.Runs }),
		counter("idemwork_reaper_deleted_total", "Expired idempotency rows the reaper deleted.", func(t store.ReaperTotals) int64 { return t.Deleted }),
		counter("idemwork_reaper_failures_total", "Reaps that failed (retried at the next interval).", func(t store.ReaperTotals) int64 { return t.Failures }),
	}
}
