package storm

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/storm/stormtypes"
	"github.com/idemwork/idemwork/wire"
)

// Target is where one process of a storm sends its requests: the kernel in this process
// (NewKernelTarget), or the HTTP API of one or more servers (NewHTTPTarget). Every worker of the
// process calls Do concurrently.
type Target interface {
	// Warm opens n connections (to the database, or to every server) before the barrier, so the
	// storm measures requests, not handshakes; a target that cannot be reached is an error.
	Warm(ctx context.Context, n int) error
	// Do performs request i (its index in the whole storm) and describes its result; the
	// caller stamps index, pid and latency.
	Do(ctx context.Context, i int) stormtypes.Event
	// Close releases what the target holds (idle HTTP connections).
	Close()
}

// NewKernelTarget fires s's request at k directly: the in-process path. Sharing is s.Share.
func NewKernelTarget(k *kernel.Kernel, s stormtypes.Spec) Target {
	share := s.Share
	t := &kernelTarget{k: k}
	switch s.Op {
	case stormtypes.OpPatch:
		in := s.Patch
		in.ShareInFlight = &share
		t.do = func(ctx context.Context) stormtypes.Event { return eventOf(k.Patch(ctx, in)) }
	case stormtypes.OpAction:
		in := s.Action
		in.ShareInFlight = &share
		t.do = func(ctx context.Context) stormtypes.Event { return eventOf(k.RunFeature(ctx, in)) }
	default:
		in := s.Create
		in.ShareInFlight = &share
		t.do = func(ctx context.Context) stormtypes.Event { return eventOf(k.Create(ctx, in)) }
	}
	return t
}

type kernelTarget struct {
	k  *kernel.Kernel
	do func(ctx context.Context) stormtypes.Event
}

func (t *kernelTarget) Warm(ctx context.Context, n int) error          { return warmPool(ctx, t.k.DB(), n) }
func (t *kernelTarget) Do(ctx context.Context, _ int) stormtypes.Event { return t.do(ctx) }
func (t *kernelTarget) Close()                                         {}

func eventOf(res model.WriteResult, err error) stormtypes.Event {
	if err != nil {
		return errorEvent(err)
	}
	ev := stormtypes.Event{Outcome: string(res.Outcome), Waited: res.Waited, Status: http.StatusOK}
	if res.Record != nil {
		ev.RecordID, ev.Revision = res.Record.ID, res.Record.Revision
	}
	if res.Execution != nil {
		ev.ExecutionID, ev.ExecutionStatus = res.Execution.ID, res.Execution.Status
	}
	return ev
}

// errCutShort is the sample of a request the storm's stop cut short.
const errCutShort = "cut short: the storm was stopped while this request ran"

func errorEvent(err error) stormtypes.Event {
	if errors.Is(err, context.Canceled) {
		return stormtypes.Event{Outcome: string(stormtypes.CodeCancelled), Err: errCutShort, Status: 499}
	}
	// What a client would be told (a known cause coded, anything else INTERNAL naming the step
	// and the SQLSTATE), never the driver's text.
	ae := wire.Coded(err)
	msg := oneLine(ae.Message)
	// The same fact as a replay's waited: this request queued on the unique index first.
	return stormtypes.Event{Outcome: string(ae.Code), Err: msg, Status: ae.Status(), Waited: idem.WaitedOnIndex(err)}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
