package bench

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idemwork/idemwork/internal/latencyproxy"
	"github.com/idemwork/idemwork/store"
)

// startProxy puts a latency proxy of rtt in front of dsn's server and returns the URL that goes
// through it (dsn itself, and no proxy, when rtt is 0). The URL keeps every other setting of dsn
// (user, password, database, TLS, application settings): only its host and port change.
func startProxy(dsn string, rtt time.Duration) (string, *latencyproxy.Proxy, error) {
	if rtt <= 0 {
		return dsn, nil, nil
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("bench: the database URL is not valid: %s", store.RedactDSN(dsn))
	}
	hosts := []string{net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))}
	for _, f := range cfg.Fallbacks {
		if h := net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port))); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) > 1 {
		return "", nil, fmt.Errorf("bench: --rtt needs a database URL with one host, not %d (%s)", len(hosts), store.RedactDSN(dsn))
	}
	network, addr := pgconn.NetworkAddress(cfg.Host, cfg.Port)
	p, err := latencyproxy.Start(network, addr, rtt)
	if err != nil {
		return "", nil, fmt.Errorf("bench: --rtt: %w", err)
	}
	proxied := store.WithDSNParams(dsn, [][2]string{{"host", "127.0.0.1"}, {"port", strconv.Itoa(p.Addr().Port)}})
	return proxied, p, nil
}

// roundTripMs is the median of 50 SELECT 1 on db's pool, after a few to warm its connection.
func roundTripMs(ctx context.Context, db *store.DB) (float64, error) {
	var lat []time.Duration
	for i := range 55 {
		t0 := time.Now()
		var one int
		if err := db.Q(ctx).QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
			return 0, fmt.Errorf("bench: measure a round trip: %w", err)
		}
		if i >= 5 {
			lat = append(lat, time.Since(t0))
		}
	}
	return percentileMs(lat, 50), nil
}
