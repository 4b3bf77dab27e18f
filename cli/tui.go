package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/term"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/demo"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/clipboard"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/internal/workbench"
	"github.com/idemwork/idemwork/outbox"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/tui"
	"github.com/idemwork/idemwork/views"
	"github.com/idemwork/idemwork/wire"
)

// tuiOptions are the bare command's own flags.
type tuiOptions struct {
	owner string
	demo  bool
}

// runTUI opens the workbench on the configured database (the embedded cluster by default),
// optionally seeding the demo data first, and stops a cluster it started when it quits. The
// program starts first and says what it prepares (creating, starting or connecting to the
// database) while the database opens, so the terminal is never blank for the seconds that takes.
func runTUI(ctx context.Context, a *app, opts tuiOptions) error {
	if !term.IsTerminal(os.Stdout.Fd()) || !term.IsTerminal(os.Stdin.Fd()) {
		return usagef("the workbench needs a terminal; from scripts use the commands (idemwork --help)")
	}
	if err := a.loadConfig(); err != nil {
		return err
	}
	owner := a.cfg.TUI.Owner
	if opts.owner != "" {
		owner = opts.owner
	}
	if err := idemtype.ValidateOwner(owner); err != nil {
		return err
	}
	styles := uictx.StylesForTerminal(os.Getenv("NO_COLOR") != "")
	// Said before the opening starts: from then on a.cfg is the opening goroutine's.
	stage := a.bootStage()
	openCtx, cancel := context.WithCancel(ctx)
	done := make(chan tui.BootResult, 1)
	finished := make(chan struct{})
	var watch sync.WaitGroup
	go func() {
		defer close(finished)
		pctx, backend, notice, err := a.openWorkbench(openCtx, owner, opts, styles)
		if err == nil {
			// The header's replication warning follows the database while the workbench runs.
			db := a.db
			watch.Go(func() { db.WatchReplication(openCtx, replicationCheck, nil, nil) })
		}
		done <- tui.BootResult{Ctx: pctx, Backend: backend, Notice: notice, Err: err}
	}()
	boot := tui.NewBoot(styles, stage, done)
	boot.Clipboard = clipboard.New(os.Stderr)
	p := tea.NewProgram(boot, tea.WithAltScreen(), tea.WithMouseCellMotion(), tea.WithContext(ctx))
	_, runErr := p.Run()
	// A user who quit while the database was still opening: let the opening stop before the
	// caller stops the cluster it may have started.
	cancel()
	<-finished
	watch.Wait()
	if err := boot.Err(); err != nil {
		return err
	}
	if n := boot.Notice(); n != "" {
		// Shown in the workbench's status line, and said again where it stays.
		fmt.Fprintf(a.stderr, "idemwork: %s\n", n)
	}
	if runErr != nil && ctx.Err() == nil {
		return fmt.Errorf("the workbench stopped: %w", runErr)
	}
	return nil
}

// bootStage says what opening the database will do, for the first frame.
func (a *app) bootStage() string {
	if a.cfg.Database.URL != "" {
		where, _ := store.DescribeDSN(a.cfg.Database.URL)
		return "connecting to " + where + "…"
	}
	dir := a.dataDir()
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err != nil {
		return "creating the database cluster in " + dir + " (first run: initdb takes a few seconds)…"
	}
	return "starting the embedded PostgreSQL in " + dir + "…"
}

// openWorkbench opens the database (creating, starting and migrating it as needed), seeds the
// demo data when asked, and builds the program context and the views' readers and writers over
// the store, the kernel and a delivery worker of the workbench's own.
// The notice is what the user should know that did not stop it (demo data left unseeded).
func (a *app) openWorkbench(ctx context.Context, owner string, opts tuiOptions, styles uictx.Styles) (*uictx.ProgramContext, views.Backend, string, error) {
	k, err := a.kernel(ctx)
	if err != nil {
		return nil, views.Backend{}, "", err
	}
	notice := ""
	if opts.demo {
		if err := a.db.WriteRefusal(); err != nil {
			notice = "demo data is not seeded: " + apperr.As(err).Message
		} else if _, err := demo.Seed(ctx, k); err != nil {
			// The workbench is where a broken stored row is looked into: it opens anyway.
			ae := wire.Coded(err)
			if ae.Code == apperr.DatabaseUnavailable {
				return nil, views.Backend{}, "", err
			}
			notice = fmt.Sprintf("demo data is not fully seeded: %s: %s (the workbench opens without it; "+
				"idemwork verify --owner alice names what is wrong)", ae.Code, ae.Message)
		}
	}
	clock := workbench.Clock(k)
	provider := outbox.NewMemoryProvider()
	crash := &outbox.CrashSwitch{}
	settings := a.outboxSettings()
	settings.Providers, settings.AfterCall = map[string]outbox.Provider{"notifier": provider}, crash.AfterCall
	if clock != nil {
		settings.Clock = clock
	}
	worker := outbox.NewWorker(a.db, settings)
	embeddedDir := ""
	if a.conn.Embedded {
		embeddedDir = a.dataDir()
	}
	health := &uictx.Health{}
	pctx := &uictx.ProgramContext{
		Styles: styles,
		Keys:   uictx.DefaultKeys(),
		Conn: uictx.Conn{Embedded: a.conn.Embedded, Display: a.conn.Display, Database: a.conn.Database, ReadOnly: a.conn.ReadOnly,
			ReadOnlyReason: a.conn.ReadOnlyReason, DataDir: embeddedDir},
		Writes:      workbench.Gate(a.db),
		Clock:       clock,
		Replication: workbench.Replication(a.db),
		Owner:       owner,
		Health:      health,
	}
	sources := workbench.Sources{DB: a.db, Kernel: k, Outbox: worker, Provider: provider, Crash: crash, Storm: a.stormRunner(k), Health: health}
	if a.db.Service() {
		svc, err := a.service(ctx)
		if err != nil {
			return nil, views.Backend{}, "", err
		}
		sources.Service = svc
		notice = "schema " + a.db.Connection().Schema + " holds a service's idempotency keys (the runner library's): they are in the Keys view"
	}
	backend := workbench.Backend(sources)
	// The Cluster view: the monitor of a pg_auto_failover formation from IDEMWORK_MONITOR, else
	// found from the connected node's keeper when it runs on this machine.
	backend.Cluster = workbench.Cluster(a.db, a.getenv("IDEMWORK_MONITOR"))
	return pctx, backend, notice, nil
}
