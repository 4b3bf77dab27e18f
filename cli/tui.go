package cli

import (
	"context"
	"fmt"
)

func runTUI(ctx context.Context, a *app) error {
	if _, err := a.openDB(ctx, true); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "idemwork: connected to %s (database %s, migrated). The TUI comes in a later release; use 'idemwork --help' for the commands.\n", a.conn.Display, a.conn.Database)
	return nil
}
