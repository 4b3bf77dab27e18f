package libinspect

import (
	"context"
	"encoding/json"

	"github.com/idemwork/idemwork/idem"
)

// Plugin is how a service lets the workbench restore its results: its policy by name, the
// module its keys restore in, and a Restore over the workbench's connection. A service registers
// its plugins by building idemwork with them (cli.Options.Plugins); without one, a key shows its
// stored reference.
type Plugin struct {
	// Policy is the name the service's envelopes carry ("shop-order-reference-v1").
	Policy string
	// Module is what the policy restores inside (idem.Request.Module of the service's calls).
	Module string
	// Restore restores a stored result (already through the envelope's guard) on q, the
	// workbench's read-only connection to the service's database; the value is shown as JSON.
	Restore func(ctx context.Context, q idem.Querier, owner, module string, envelope []byte) (any, error)
}

// PolicyPlugin is the Plugin of a service's idem.ResultPolicy: newPolicy builds the policy over
// the workbench's connection (a policy that reads through an idem.Querier, as a pgx pool is one,
// needs nothing else). The restore is the runner's own (idem.RestoreEnvelope): the same name
// check, the same guard, the policy's own integrity checks — what a replay would return, or the
// error it would fail closed with.
func PolicyPlugin[T any](module string, newPolicy func(q idem.Querier) idem.ResultPolicy[T]) Plugin {
	return Plugin{Policy: newPolicy(nil).Name(), Module: module,
		Restore: func(ctx context.Context, q idem.Querier, owner, module string, envelope []byte) (any, error) {
			v, err := idem.RestoreEnvelope(ctx, newPolicy(q), owner, module, envelope)
			if err != nil {
				return nil, err
			}
			return v, nil
		}}
}

// restoreJSON runs p and renders its value as JSON.
func (p Plugin) restoreJSON(ctx context.Context, q idem.Querier, owner string, envelope []byte) (json.RawMessage, error) {
	v, err := p.Restore(ctx, q, owner, p.Module, envelope)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
