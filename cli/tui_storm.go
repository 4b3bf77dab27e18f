package cli

import (
	"context"
	"os"

	"github.com/idemwork/idemwork/internal/workbench"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/storm"
	"github.com/idemwork/idemwork/storm/stormtypes"
	"github.com/idemwork/idemwork/views"
)

// stormRunner adapts the storm engine to the Storm view: same engine, same spec and summary
// types, same verdict as `idemwork storm`, with events and lock samples forwarded as they come.
func (a *app) stormRunner(k *kernel.Kernel) views.StormRunner {
	return func(ctx context.Context, spec stormtypes.Spec, events chan<- stormtypes.Event, locks chan<- stormtypes.LockSample) (stormtypes.Summary, error) {
		exe, _ := os.Executable()
		args, wenv := a.stormWorkerArgs()
		env := storm.Env{Kernel: k, DSN: a.conn.DSN, Executable: exe, WorkerArgs: args, WorkerEnv: wenv, Serve: serveStorm,
			MaxBodyBytes: a.cfg.HTTP.MaxBodyBytes, MaxConns: a.cfg.Database.MaxConns}
		env.OnLocks = func(s stormtypes.LockSample) {
			select {
			case locks <- s:
			default: // the view lags: it gets a later sample, which carries the peak too
			}
		}
		sum, err := storm.Run(ctx, env, spec, events)
		return sum, workbench.Coded(err)
	}
}
