package kernel

import (
	"context"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/model"
)

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

// Replay is what a request repeating a key's first request gets now (Kernel.ReplayKey): the
// restored first result of a create, a patch or a feature run (Write), or of a review (Review),
// as the write itself returns it for a replay. Kind says which.
type Replay struct {
	Kind   OpKind
	Write  model.WriteResult
	Review ReviewWriteResult
}

// ReplayKey is what a request repeating the key's first request gets now, built as the write
// itself builds it: the write's own checks (module, record id, feature), then the runner's
// answer for a live stored row (idem.ReplayStored: IDEMPOTENCY_IN_PROGRESS for a PROCESSING
// row, the restored first result, or the error a tampered envelope fails closed with) — the
// error is what the request fails with. It is what a writable session answers (a read-only one
// refuses every write with READ_ONLY first) to a request that is not waiting behind another one
// holding the key. ok is false when no request can repeat it: its operation is not one a request
// can name. An expired key is not replayed (the next request executes anew): the caller says so.
func (k *Kernel) ReplayKey(ctx context.Context, owner string, row model.KeyRow) (rp Replay, ok bool, err error) {
	op, err := ParseOperation(row.Operation)
	if err != nil {
		return Replay{}, false, nil
	}
	rp.Kind = op.Kind
	by := writer{key: row.Key, xid: row.ReservedXID}
	mod, err := k.writableModule(op.Module)
	if err != nil {
		return rp, true, err
	}
	if op.RecordID != "" {
		if err := CheckRecordID(op.RecordID); err != nil {
			return rp, true, err
		}
	}
	switch op.Kind {
	case OpKindCreate, OpKindPatch:
		res, err := idem.ReplayStored(ctx, k.boundRecordPolicy(by), owner, row.Key, mod.Code, row.Status, row.Response)
		if err != nil {
			return rp, true, err
		}
		rp.Write = recordWriteResult(res, row.Key, row.Operation)
		return rp, true, nil
	case OpKindFeature:
		feat, err := featureOf(mod, op.FeatureID)
		if err != nil {
			return rp, true, err
		}
		res, err := idem.ReplayStored(ctx, k.boundFeaturePolicy(feat.ID, by), owner, row.Key, mod.Code, row.Status, row.Response)
		if err != nil {
			return rp, true, err
		}
		rp.Write = featureWriteResult(res, row.Key, row.Operation)
		return rp, true, nil
	case OpKindReview:
		res, err := idem.ReplayStored(ctx, k.boundReviewPolicy(by), owner, row.Key, mod.Code, row.Status, row.Response)
		if err != nil {
			return rp, true, err
		}
		rp.Review = reviewWriteResult(res, row.Key, row.Operation)
		return rp, true, nil
	}
	return Replay{}, false, nil
}
