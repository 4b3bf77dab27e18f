package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/internal/autofailover"
	"github.com/idemwork/idemwork/store"
)

// failoverTimeout bounds one failover fault: a planned failover under load, or the monitor's
// promotion after a node died (seconds with the fast timeouts of a formation soak starts; up
// to a minute with pg_auto_failover's defaults).
const failoverTimeout = 3 * time.Minute

// ownFormation is a formation `soak --failover` started because it was given none: its own
// processes, killed and restarted by the faults.
type ownFormation struct {
	f *autofailover.Formation
}

func (o ownFormation) PlannedFailover(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, failoverTimeout)
	defer cancel()
	_, err := o.f.PerformFailover(ctx)
	return err
}

// KillPrimary waits until the formation is synchronous (a secondary that could take over),
// kills the primary's node, waits for the promotion and starts the killed node again, which
// rejoins as the secondary while the soak goes on.
func (o ownFormation) KillPrimary(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, failoverTimeout)
	defer cancel()
	st, err := o.f.WaitSynchronous(ctx)
	if err != nil {
		return err
	}
	p, _ := st.Primary()
	n := o.f.Node(p.Name)
	if err := o.f.KillNode(n); err != nil {
		return err
	}
	if _, err := o.f.WaitNewPrimary(ctx, n.Name, func(autofailover.State) bool { return true }); err != nil {
		return err
	}
	return o.f.RestartNode(n)
}

// givenFormation is a formation soak was given (--dsn, --monitor): planned failovers through
// its monitor; an unplanned one kills the primary's keeper on this machine and starts it again
// as it was started.
type givenFormation struct {
	m      autofailover.Monitor
	logDir string
}

func (g givenFormation) PlannedFailover(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, failoverTimeout)
	defer cancel()
	_, err := g.m.PerformFailover(ctx)
	return err
}

func (g givenFormation) KillPrimary(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, failoverTimeout)
	defer cancel()
	st, err := g.m.WaitSynchronous(ctx)
	if err != nil {
		return err
	}
	p, _ := st.Primary()
	k, err := autofailover.FindLocalKeeper(p.Port)
	if err != nil {
		return err
	}
	if err := k.Kill(); err != nil {
		return err
	}
	if _, err := g.m.WaitNewPrimary(ctx, p.Name, func(autofailover.State) bool { return true }); err != nil {
		return err
	}
	return k.Restart(filepath.Join(g.logDir, "keeper-"+p.Name+"-"+strconv.Itoa(p.Port)+".log"))
}

// startSoakFormation starts a pg_auto_failover formation for `soak --failover` in a new
// directory under the temp dir ($TMPDIR as this invocation sees it), with a migrated database,
// and returns it, the database's formation URI and the function that stops it and removes the
// directory.
func (a *app) startSoakFormation(ctx context.Context) (*autofailover.Formation, string, func(), error) {
	dir, err := os.MkdirTemp(a.getenv("TMPDIR"), "idemwork-soak-ha-")
	if err != nil {
		return nil, "", nil, err
	}
	// As root the servers run as postgres, which must be able to enter the directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", nil, err
	}
	fmt.Fprintf(a.stderr, "soak: starting a pg_auto_failover formation (monitor and two nodes) in %s\n", dir)
	began := time.Now()
	f, err := autofailover.Start(ctx, autofailover.Options{Dir: dir, BinDir: a.cfg.Database.PGBinDir, Fast: true})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, "", nil, &setupError{fmt.Errorf("start a pg_auto_failover formation: %w", err)}
	}
	stop := func() {
		f.Stop()
		_ = os.RemoveAll(dir)
	}
	if err := store.EnsureDatabase(ctx, f.URI("postgres"), embeddedDatabase); err != nil {
		stop()
		return nil, "", nil, &setupError{err}
	}
	uri := f.URI(embeddedDatabase)
	fmt.Fprintf(a.stderr, "soak: formation up in %s: %s (monitor %s)\n", time.Since(began).Round(time.Second), store.RedactDSN(uri), store.RedactDSN(f.URL))
	return f, uri, stop, nil
}

// failoverUsage checks what --failover needs of the database: a formation's URI with its
// monitor, or nothing (soak starts a formation).
func failoverUsage(given bool, monitor string) error {
	if given && monitor == "" {
		return apperr.New(apperr.Usage, "soak --failover on a database given by URL needs --monitor, the formation's monitor URL "+
			"(pg_autoctl show uri --formation monitor); without a URL soak starts a formation of its own")
	}
	if !given && monitor != "" {
		return apperr.New(apperr.Usage, "--monitor names the monitor of the formation given by --dsn; without --dsn soak starts a formation of its own")
	}
	return nil
}
