package cli

import (
	"context"
	"encoding/json"
	"os"

	"idemwork/kernel"
	"idemwork/storm"
	tctx "idemwork/tui/context"
)

// stormRunner adapts the storm engine to the Storm view: same engine, same verdict as
// `idemwork storm`, with events forwarded as they come.
func (a *app) stormRunner(k *kernel.Kernel) tctx.StormRunner {
	return func(ctx context.Context, sp tctx.StormSpec, events chan<- tctx.StormEvent) (tctx.StormSummary, error) {
		spec := storm.Spec{Op: storm.Op(sp.Op), N: sp.N, Concurrency: sp.Concurrency, Processes: sp.Processes, Share: sp.Share, FailFirst: sp.FailFirst}
		switch spec.Op {
		case storm.OpCreate:
			spec.Create = kernel.CreateInput{Owner: sp.Owner, Module: sp.Module, Key: sp.Key, Title: sp.Title}
		case storm.OpPatch:
			title := sp.Title
			spec.Patch = kernel.PatchInput{Owner: sp.Owner, Module: sp.Module, RecordID: sp.RecordID, Key: sp.Key, ExpectRevision: sp.Revision, Title: &title}
		case storm.OpAction:
			spec.Action = kernel.FeatureInput{Owner: sp.Owner, Module: sp.Module, RecordID: sp.RecordID, FeatureID: sp.FeatureID, Key: sp.Key}
		}
		exe, _ := os.Executable()
		env := storm.Env{Kernel: k, DSN: a.conn.DSN, Executable: exe, HTTP: a.cfg.HTTP}
		inner := make(chan storm.Event, 256)
		forwarded := make(chan struct{})
		go func() {
			defer close(forwarded)
			for e := range inner {
				events <- tctx.StormEvent{Index: e.Index, PID: e.PID, Outcome: e.Outcome, Waited: e.Waited, LatencyMs: e.LatencyMs,
					RecordID: e.RecordID, Revision: e.Revision}
			}
		}()
		sum, err := storm.Run(ctx, env, spec, inner)
		close(inner)
		<-forwarded
		out := tctx.StormSummary{Requests: sum.Requests, Outcomes: sum.Outcomes, WallMs: sum.WallMs, Agrees: sum.Verified.Agrees,
			Distinct:  map[string]int{"recordIds": sum.Distinct.RecordIDs, "revisions": sum.Distinct.Revisions, "executionIds": sum.Distinct.ExecutionIDs},
			LatencyMs: map[string]float64{"p50": sum.LatencyMs.P50, "p95": sum.LatencyMs.P95, "p99": sum.LatencyMs.P99, "max": sum.LatencyMs.Max}}
		out.JSON, _ = json.Marshal(sum)
		var verified map[string]any
		if b, jerr := json.Marshal(sum.Verified); jerr == nil && json.Unmarshal(b, &verified) == nil {
			delete(verified, "agrees")
			delete(verified, "envelope")
			out.Verified = verified
		}
		return out, err
	}
}
