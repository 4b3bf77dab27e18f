package kernel

import (
	"bytes"
	"context"
	"io"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/store"
)

// RestoreKey restores the stored envelope of a key with the policy its operation uses today, as
// a replay would. It returns the record and (for features) the execution, or the review.
func (k *Kernel) RestoreKey(ctx context.Context, owner, operation string, response []byte) (*store.Record, *store.Execution, *store.Review, error) {
	op, err := ParseOperation(operation)
	if err != nil {
		return nil, nil, nil, err
	}
	switch op.Kind {
	case OpKindCreate, OpKindPatch:
		v, err := idem.RestoreEnvelope(ctx, idem.ResultPolicy[RecordResult](k.recordPolicy), owner, op.Module, response)
		if err != nil {
			return nil, nil, nil, err
		}
		return &v.Record, nil, nil, nil
	case OpKindFeature:
		v, err := idem.RestoreEnvelope(ctx, idem.ResultPolicy[FeatureResult](k.featurePolicyFor(op.FeatureID)), owner, op.Module, response)
		if err != nil {
			return nil, nil, nil, err
		}
		return &v.Record, &v.Execution, nil, nil
	case OpKindReview:
		v, err := idem.RestoreEnvelope(ctx, idem.ResultPolicy[ReviewResult](k.reviewPolicy), owner, op.Module, response)
		if err != nil {
			return nil, nil, nil, err
		}
		return nil, nil, &v.Review, nil
	}
	return nil, nil, nil, apperr.New(apperr.PolicyMismatch, "operation %s has no result policy (legacy)", operation)
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
