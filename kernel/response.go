package kernel

import (
	"context"
	"net/http"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/wire"
)

// WriteResponse is the answer a client receives for a write result (SPEC §10.3): 201 with the
// record's Location for a create, 200 for a patch or a feature run, with the outcome headers
// and the result as the body. The HTTP adapter serves it, the CLI prints its body, and key
// inspection shows the one a replay returns.
func WriteResponse(w model.WriteResult) model.Response {
	status := http.StatusOK
	create := false
	if op, err := ParseOperation(w.Operation); err == nil && op.Kind == OpKindCreate {
		status, create = http.StatusCreated, true
	}
	r := wire.Write(status, w.Outcome, w.Waited, w)
	if create && w.Record != nil && r.Status == status {
		r.Headers["Location"] = wire.RecordPath(w.Record.ModuleCode, w.Record.ID)
	}
	return r
}

// Response is the answer a client receives for a review: 201 with the outcome headers.
func (w ReviewWriteResult) Response() model.Response {
	return wire.Write(http.StatusCreated, w.Outcome, w.Waited, w)
}

// reviewWriteResult is what a review returns for the runner's result.
func reviewWriteResult(res idem.Result[ReviewResult], key, op string) ReviewWriteResult {
	rv := res.Value.Review
	rv.CreatedAt = rv.CreatedAt.UTC()
	return ReviewWriteResult{Outcome: res.Outcome, Waited: res.Waited, Key: keyPtr(key), Operation: op, Review: rv, Envelope: res.Envelope}
}

// featureOf is the module's feature id, or the error a write naming another gets.
func featureOf(mod *Module, id string) (Feature, error) {
	feat, ok := mod.Feature(id)
	if !ok {
		return Feature{}, apperr.New(apperr.ValidationFailed, "feature: %s has no feature %q", mod.Code, id)
	}
	return feat, nil
}

// replayResponse is the answer a request repeating the key's first request gets now, built as
// the write itself builds it: the write's own checks (module, record id, feature), then the
// runner's answer for a live stored row (idem.ReplayStored: 409 IDEMPOTENCY_IN_PROGRESS for a
// PROCESSING row, the restored first result, or the error a tampered envelope fails closed
// with), then the write's response. It is what a writable session answers (a read-only one
// refuses every write with READ_ONLY first) to a request that is not waiting behind another
// one holding the key (that one would also carry Idempotency-Waited). Nil when no request gets
// a replay: the key expired (the next request executes anew), or its operation is not one a
// request can name.
func (k *Kernel) replayResponse(ctx context.Context, owner string, row model.KeyRow, expired bool) *model.Response {
	if expired {
		return nil
	}
	op, err := ParseOperation(row.Operation)
	if err != nil {
		return nil
	}
	answer := func(r model.Response) *model.Response { return &r }
	by := writer{key: row.Key, xid: row.ReservedXID}
	mod, err := k.writableModule(op.Module)
	if err != nil {
		return answer(wire.Error(err))
	}
	if op.RecordID != "" {
		if err := CheckRecordID(op.RecordID); err != nil {
			return answer(wire.Error(err))
		}
	}
	switch op.Kind {
	case OpKindCreate, OpKindPatch:
		res, err := idem.ReplayStored(ctx, k.boundRecordPolicy(by), owner, row.Key, mod.Code, row.Status, row.Response)
		if err != nil {
			return answer(wire.Error(err))
		}
		return answer(WriteResponse(recordWriteResult(res, row.Key, row.Operation)))
	case OpKindFeature:
		feat, err := featureOf(mod, op.FeatureID)
		if err != nil {
			return answer(wire.Error(err))
		}
		res, err := idem.ReplayStored(ctx, k.boundFeaturePolicy(feat.ID, by), owner, row.Key, mod.Code, row.Status, row.Response)
		if err != nil {
			return answer(wire.Error(err))
		}
		return answer(WriteResponse(featureWriteResult(res, row.Key, row.Operation)))
	case OpKindReview:
		res, err := idem.ReplayStored(ctx, k.boundReviewPolicy(by), owner, row.Key, mod.Code, row.Status, row.Response)
		if err != nil {
			return answer(wire.Error(err))
		}
		return answer(reviewWriteResult(res, row.Key, row.Operation).Response())
	}
	return nil
}
