package cli

import (
	"context"
	"fmt"
	"os"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/term"
	"github.com/muesli/termenv"

	"idemwork/apperr"
	"idemwork/idem"
	"idemwork/outbox"
	"idemwork/tui"
	tctx "idemwork/tui/context"
)

// tuiOptions are the bare command's own flags.
type tuiOptions struct {
	owner string
	demo  bool
}

// runTUI opens the workbench on the configured database (the embedded cluster by default),
// optionally seeding the demo data first, and stops a cluster it started when it quits.
func runTUI(ctx context.Context, a *app, opts tuiOptions) error {
	if !term.IsTerminal(os.Stdout.Fd()) || !term.IsTerminal(os.Stdin.Fd()) {
		return usagef("the workbench needs a terminal; from scripts use the commands (idemwork --help)")
	}
	k, err := a.kernel(ctx)
	if err != nil {
		return err
	}
	owner := a.cfg.TUI.Owner
	if opts.owner != "" {
		owner = opts.owner
	}
	if err := idem.ValidateOwner(owner); err != nil {
		return err
	}
	if opts.demo {
		if err := a.db.WriteRefusal(); err != nil {
			fmt.Fprintf(a.stderr, "idemwork: demo data is not seeded: %s\n", apperr.As(err).Message)
		} else if _, err := k.SeedDemo(ctx); err != nil {
			return err
		}
	}
	if os.Getenv("NO_COLOR") != "" {
		lipgloss.SetColorProfile(termenv.Ascii)
	}
	clock, _ := k.Runner().Clock().(*idem.OffsetClock)
	provider := outbox.NewMemoryProvider()
	worker := outbox.NewWorker(a.db, outbox.Options{Providers: map[string]outbox.Provider{"notifier": provider}, Clock: clock,
		MaxAttempts: a.cfg.Outbox.MaxAttempts, BaseBackoff: a.cfg.Outbox.BaseBackoff.Duration, MaxBackoff: a.cfg.Outbox.MaxBackoff.Duration,
		Lease: a.cfg.Outbox.Lease.Duration, CallTimeout: a.cfg.Outbox.CallTimeout.Duration})
	pctx := &tctx.ProgramContext{
		Styles: tctx.NewStyles(tctx.DefaultTheme()),
		Keys:   tctx.DefaultKeys(),
		Conn: tctx.Conn{Embedded: a.conn.Embedded, Display: a.conn.Display, Database: a.conn.Database, ReadOnly: a.conn.ReadOnly,
			ReadOnlyReason: a.conn.ReadOnlyReason},
		Kernel:   k,
		DB:       a.db,
		Clock:    clock,
		Outbox:   worker,
		Provider: provider,
		Storm:    a.stormRunner(k),
		Owner:    owner,
	}
	m := tui.New(pctx)
	m.Clipboard = os.Stderr
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithMouseCellMotion(), tea.WithContext(ctx))
	if _, err := p.Run(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("the workbench stopped: %w", err)
	}
	return nil
}
