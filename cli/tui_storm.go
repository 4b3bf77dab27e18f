package cli

import (
	"context"
	"encoding/json"
	"os"

	"idemwork/kernel"
	"idemwork/storm"
	"idemwork/tui/shared"
)

// stormRunner adapts the storm engine to the Storm view: same engine, same verdict as
// `idemwork storm`, with events and lock samples forwarded as they come.
func (a *app) stormRunner(k *kernel.Kernel) shared.StormRunner {
	return func(ctx context.Context, sp shared.StormSpec, events chan<- shared.StormEvent, locks chan<- shared.StormLocks) (shared.StormSummary, error) {
		spec := stormSpecOf(sp)
		exe, _ := os.Executable()
		args, wenv := a.stormWorkerArgs()
		env := storm.Env{Kernel: k, DSN: a.conn.DSN, Executable: exe, WorkerArgs: args, WorkerEnv: wenv, Serve: serveStorm,
			MaxBodyBytes: a.cfg.HTTP.MaxBodyBytes, MaxConns: a.cfg.Database.MaxConns}
		env.OnLocks = func(s storm.LockSample) {
			l := shared.StormLocks{At: s.At, Waiting: s.Waiting, InXact: s.InXact, PeakWaiting: s.PeakWaiting, PeakAt: s.PeakAt, WaitsOn: s.WaitsOn()}
			select {
			case locks <- l:
			default: // the view lags: it gets a later sample, which carries the peak too
			}
		}
		inner := make(chan storm.Event, 256)
		forwarded := make(chan struct{})
		go func() {
			defer close(forwarded)
			for e := range inner {
				events <- shared.StormEvent{Index: e.Index, PID: e.PID, Outcome: e.Outcome, Waited: e.Waited, LatencyMs: e.LatencyMs,
					RecordID: e.RecordID, Revision: e.Revision, ExecutionStatus: e.ExecutionStatus, Err: e.Err}
			}
		}()
		sum, err := storm.Run(ctx, env, spec, inner)
		close(inner)
		<-forwarded
		return stormSummaryOf(sum), err
	}
}

// stormSpecOf is the engine's spec for the view's: the body fields as the kernel reads them
// (an empty patch title or payload leaves it unchanged; an empty payload or input sends none).
func stormSpecOf(sp shared.StormSpec) storm.Spec {
	spec := storm.Spec{ID: sp.ID, Op: storm.Op(sp.Op), N: sp.N, Concurrency: sp.Concurrency, Processes: sp.Processes, Via: sp.Via,
		Servers: sp.Servers, Share: sp.Share, FailFirst: sp.FailFirst, Hold: sp.Hold}
	raw := func(s string) json.RawMessage {
		if s == "" {
			return nil
		}
		return json.RawMessage(s)
	}
	switch spec.Op {
	case storm.OpCreate:
		spec.Create = kernel.CreateInput{Owner: sp.Owner, Module: sp.Module, Key: sp.Key, Title: sp.Title, Payload: raw(sp.Payload)}
	case storm.OpPatch:
		spec.Patch = kernel.PatchInput{Owner: sp.Owner, Module: sp.Module, RecordID: sp.RecordID, Key: sp.Key, ExpectRevision: sp.Revision,
			Payload: raw(sp.Payload)}
		if sp.Title != "" {
			title := sp.Title
			spec.Patch.Title = &title
		}
	case storm.OpAction:
		spec.Action = kernel.FeatureInput{Owner: sp.Owner, Module: sp.Module, RecordID: sp.RecordID, FeatureID: sp.FeatureID, Key: sp.Key,
			Input: raw(sp.Input)}
	}
	return spec
}

// stormSummaryOf is the view's summary of the engine's.
func stormSummaryOf(sum storm.Summary) shared.StormSummary {
	v := sum.Verdict
	out := shared.StormSummary{ID: sum.Storm.ID, Key: sum.Storm.Key, Requests: sum.Requests, Outcomes: sum.Outcomes, WallMs: sum.WallMs,
		Waited: sum.Waited, Errors: map[string]shared.StormError{},
		Distinct:  map[string]int{"recordIds": sum.Distinct.RecordIDs, "revisions": sum.Distinct.Revisions, "executionIds": sum.Distinct.ExecutionIDs},
		LatencyMs: map[string]float64{"p50": sum.LatencyMs.P50, "p95": sum.LatencyMs.P95, "p99": sum.LatencyMs.P99, "max": sum.LatencyMs.Max},
		Verdict: shared.StormVerdict{Answers: shared.StormPart(v.Answers), Database: shared.StormPart(v.Database), Verdict: v.Verdict,
			Code: v.Code, Text: v.Text},
		PeakWaiting: sum.Locks.PeakWaiting, Samples: sum.Locks.Samples, ExecutionStatus: sum.Verified.ExecutionStatus,
		Servers: len(sum.ByServer)}
	for code, e := range sum.Errors {
		out.Errors[code] = shared.StormError{Count: e.Count, Sample: e.Sample}
	}
	if sum.Locks.PeakAt != nil {
		out.PeakAt = *sum.Locks.PeakAt
	}
	if ref := sum.Verified.Envelope; ref != nil {
		out.RecordID, out.Revision = ref.RecordID, ref.Revision
	}
	out.JSON, _ = json.Marshal(sum)
	return out
}
