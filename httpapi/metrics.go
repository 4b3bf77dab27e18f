package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/wire"
)

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metrics are the server's Prometheus metrics, on a registry of its own (no global state: two
// servers in one process count apart).
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	waits    prometheus.Counter
	handler  http.Handler
}

func newMetrics(k *kernel.Kernel, extra ...prometheus.Collector) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "idemwork_http_requests_total",
			Help: "HTTP requests by route, method, status and outcome (EXECUTED, REPLAYED, JOINED, OK for a read, or the error code)."},
			[]string{"route", "method", "status", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "idemwork_http_request_duration_seconds",
			Help:    "HTTP request latency by route and outcome.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}},
			[]string{"route", "outcome"}),
		waits: prometheus.NewCounter(prometheus.CounterOpts{Name: "idemwork_unique_index_waits_total",
			Help: "Keyed writes that waited on the idempotency unique index for another transaction (REPLAYED after a wait)."}),
	}
	reg.MustRegister(m.requests, m.latency, m.waits, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	reg.MustRegister(extra...)
	if k != nil {
		r := k.Runner()
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemwork_inflight_flights", Help: "In-process flights (one per key being executed) running now."},
				func() float64 { return float64(r.Stats().InFlight) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemwork_inflight_followers", Help: "Requests parked on an in-process flight, waiting for its leader."},
				func() float64 { return float64(k.Followers()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemwork_key_queue_waiting", Help: "Same-key requests waiting in-process for their key's turn at the database (beyond idempotency.key_max_conns)."},
				func() float64 { return float64(r.Stats().KeyWaiting) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemwork_owner_conns_in_use", Help: "Database connections held by keyed writes, summed over owners."},
				func() float64 { return float64(r.Stats().OwnerConns) }),
		)
		db := k.DB()
		stat := func(f func(s *pgxpool.Stat) float64) func() float64 {
			return func() float64 { return f(db.Stat()) }
		}
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemwork_db_pool_acquired_conns", Help: "Pool connections in use."},
				stat(func(s *pgxpool.Stat) float64 { return float64(s.AcquiredConns()) })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemwork_db_pool_idle_conns", Help: "Pool connections idle."},
				stat(func(s *pgxpool.Stat) float64 { return float64(s.IdleConns()) })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemwork_db_pool_max_conns", Help: "Pool ceiling."},
				stat(func(s *pgxpool.Stat) float64 { return float64(s.MaxConns()) })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "idemwork_db_pool_empty_acquires_total", Help: "Acquires that had to wait for a connection."},
				stat(func(s *pgxpool.Stat) float64 { return float64(s.EmptyAcquireCount()) })),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "idemwork_db_pool_acquire_wait_seconds_total", Help: "Time spent waiting for pool connections."},
				stat(func(s *pgxpool.Stat) float64 { return s.AcquireDuration().Seconds() })),
		)
		repl := func(f func(r store.Replication) float64) func() float64 {
			return func() float64 { return f(db.Replication()) }
		}
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemwork_db_replication_synchronous",
				Help: "1 when a synchronous standby confirms every commit before it is acknowledged, else 0 (read at start and every few seconds)."},
				repl(func(r store.Replication) float64 { return b2f(r.Synchronous) })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemwork_db_replication_at_risk",
				Help: "1 when acknowledged keys can be lost on failover (asynchronous standbys, synchronous_commit off or local), else 0."},
				repl(func(r store.Replication) float64 { return b2f(r.AtRisk()) })),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "idemwork_db_replication_standbys", Help: "Standbys attached to the primary (pg_stat_replication)."},
				repl(func(r store.Replication) float64 { return float64(r.Standbys) })),
		)
	}
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return m
}

// observe counts one answered request.
func (m *metrics) observe(r *http.Request, status int, e *accessEntry, took time.Duration) {
	route := r.Pattern
	if route == "" || route == "/" {
		route = "unmatched"
	}
	outcome := e.outcome
	if outcome == "" {
		outcome = "OK"
	}
	m.requests.WithLabelValues(route, methodLabel(r.Method), strconv.Itoa(status), outcome).Inc()
	m.latency.WithLabelValues(route, outcome).Observe(took.Seconds())
	if e.waited {
		m.waits.Inc()
	}
}

// Methods are the values of the method label: the methods RFC 9110 defines and PATCH, each as
// itself, and every other method as OTHER. A label takes its values from a fixed set, never from
// the request: 300 requests with random 2,000-character methods once added 300 series.
var Methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace, MethodOther}

// MethodOther is the method label of a method outside Methods.
const MethodOther = "OTHER"

func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return MethodOther
}

// readyz answers 200 when the database answers and its schema is the one this binary expects,
// with where it is connected and what replication promises (a warning when acknowledged keys can
// be lost on failover); else 503 with the reason: DATABASE_UNAVAILABLE saying what is wrong (as
// the server's own answer says: nothing listening, no answer in time, …), SCHEMA_NOT_READY
// naming the command to run, REPLICATION_UNSAFE while require_synchronous_replication is unmet.
func (a *API) readyz(w http.ResponseWriter, r *http.Request) {
	const wait = 2 * time.Second
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	db := a.k.DB()
	if err := db.Ping(ctx); err != nil {
		entryOf(r).outcome = string(apperr.DatabaseUnavailable)
		entryOf(r).err = err
		if ctx.Err() != nil && r.Context().Err() == nil {
			err = apperr.Wrap(apperr.DatabaseUnavailable, err, "the database did not answer within %s (it may be overloaded, or the network "+
				"drops the connection); retry in a moment", wait)
		}
		wire.Error(err).Serve(w)
		return
	}
	// The schema state is read without DDL (on a read-only session, inside BEGIN READ ONLY).
	st, err := db.ReadSchemaState(ctx)
	if err != nil {
		entryOf(r).outcome = string(apperr.SchemaNotReady)
		entryOf(r).err = err
		wire.ErrorStatus(http.StatusServiceUnavailable, apperr.SchemaNotReady, "the schema cannot be read; run 'idemwork migrate --status'").Serve(w)
		return
	}
	if !st.Current() {
		entryOf(r).outcome = string(apperr.SchemaNotReady)
		wire.ErrorStatus(http.StatusServiceUnavailable, apperr.SchemaNotReady, st.Problem()).Serve(w)
		return
	}
	if err := db.WriteRefusal(); apperr.Is(err, apperr.ReplicationUnsafe) {
		entryOf(r).outcome = string(apperr.ReplicationUnsafe)
		wire.Error(err).Serve(w)
		return
	}
	var latest int64
	for _, v := range st.Applied {
		latest = max(latest, v)
	}
	repl := db.Replication()
	body := map[string]any{"ready": true, "schemaVersion": latest, "host": repl.Host, "port": repl.Port, "readOnly": db.ReadOnly,
		"replication": map[string]any{"synchronous": repl.Synchronous, "standbys": repl.Standbys, "risk": repl.Risk, "readAt": repl.At}}
	if repl.AtRisk() {
		body["warning"] = "acknowledged keys can be lost on failover: " + repl.Risk
	}
	wire.JSON(http.StatusOK, body).Serve(w)
}
