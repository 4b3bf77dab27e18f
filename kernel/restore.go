package kernel

import (
	"bytes"
	"context"
	"io"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/model"
)

// RestoreKey restores the stored envelope of key (reserved by transaction keyXID, nil when
// unknown) with the policy its operation uses today, as a replay would — the digests of what it
// reads and who wrote it included. It returns the record and (for features) the execution, or
// the review.
func (k *Kernel) RestoreKey(ctx context.Context, owner, key string, keyXID *string, operation string, response []byte) (*model.Record, *model.Execution, *model.Review, error) {
	return k.restoreKey(ctx, owner, key, keyXID, operation, response, nil)
}

// restoreKey is RestoreKey judging the rows read ahead in pre where they are the ones to read.
func (k *Kernel) restoreKey(ctx context.Context, owner, key string, keyXID *string, operation string, response []byte, pre *prefetched) (*model.Record, *model.Execution, *model.Review, error) {
	op, err := ParseOperation(operation)
	if err != nil {
		return nil, nil, nil, err
	}
	by := writer{key: key, xid: keyXID}
	switch op.Kind {
	case OpKindCreate, OpKindPatch:
		v, err := idem.RestoreEnvelope(ctx, idem.ResultPolicy[RecordResult](boundRecordPolicy{recordSnapshotPolicy: k.recordPolicy, by: by, pre: pre}), owner, op.Module, response)
		if err != nil {
			return nil, nil, nil, err
		}
		if op.Kind == OpKindCreate && v.Record.Revision != 1 {
			return nil, nil, nil, foreignRows{apperr.New(apperr.SnapshotIntegrity, "the stored result of a create points at revision %d of record %s; a create writes revision 1",
				v.Record.Revision, v.Record.ID)}
		}
		return &v.Record, nil, nil, nil
	case OpKindFeature:
		pol := k.featurePolicyFor(op.FeatureID)
		pol.by, pol.pre = &by, pre
		v, err := idem.RestoreEnvelope(ctx, idem.ResultPolicy[FeatureResult](pol), owner, op.Module, response)
		if err != nil {
			return nil, nil, nil, err
		}
		return &v.Record, &v.Execution, nil, nil
	case OpKindReview:
		v, err := idem.RestoreEnvelope(ctx, idem.ResultPolicy[ReviewResult](boundReviewPolicy{commitmentReviewPolicy: k.reviewPolicy, by: by, pre: pre}),
			owner, op.Module, response)
		if err != nil {
			return nil, nil, nil, err
		}
		return nil, nil, &v.Review, nil
	}
	return nil, nil, nil, apperr.New(apperr.PolicyMismatch, "operation %s has no result policy (legacy)", operation)
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// The policies bound to the key whose result they restore (inspection, verify): what a replay of
// that key checks in its own statement, they check in Restore.

func (k *Kernel) boundRecordPolicy(by writer) idem.ResultPolicy[RecordResult] {
	return boundRecordPolicy{recordSnapshotPolicy: k.recordPolicy, by: by}
}

func (k *Kernel) boundFeaturePolicy(featureID string, by writer) idem.ResultPolicy[FeatureResult] {
	p := k.featurePolicyFor(featureID)
	p.by = &by
	return p
}

func (k *Kernel) boundReviewPolicy(by writer) idem.ResultPolicy[ReviewResult] {
	return boundReviewPolicy{commitmentReviewPolicy: k.reviewPolicy, by: by}
}
