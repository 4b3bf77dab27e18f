package kernel

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/jsonb"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/records"
)

// ReviewInput is a commitment review request.
type ReviewInput struct {
	Owner         string
	RecordID      string
	Key           string
	Verdict       string
	Comment       string
	ShareInFlight *bool
}

// ReviewWriteResult is what review returns.
type ReviewWriteResult struct {
	Outcome   idemtype.Outcome `json:"outcome"`
	Waited    bool             `json:"waited"`
	Key       *string          `json:"key"`
	Operation string           `json:"operation"`
	Review    model.Review     `json:"review"`
	Envelope  json.RawMessage  `json:"envelope"`
}

// CreateReview records an immutable review of a COMMITMENT record (operation
// COMMITMENT:record:<id>:review:create, policy commitment-review-reference-v2).
func (k *Kernel) CreateReview(ctx context.Context, in ReviewInput) (ReviewWriteResult, error) {
	mod, err := k.writableModule(ModuleCommitment)
	if err != nil {
		return ReviewWriteResult{}, err
	}
	if err := CheckRecordID(in.RecordID); err != nil {
		return ReviewWriteResult{}, err
	}
	op := OpReview(in.RecordID)
	body := jsonb.AppendObject(nil, jsonb.Member{Name: "verdict", Value: jsonb.AppendString(nil, in.Verdict)},
		jsonb.Member{Name: "comment", Value: jsonb.AppendString(nil, in.Comment)})
	req := idem.Request{Owner: in.Owner, Key: in.Key, Operation: op, Module: mod.Code, Body: body, ShareInFlight: in.ShareInFlight,
		BodyV1: func() ([]byte, error) { return bodyV1(map[string]any{"verdict": in.Verdict, "comment": in.Comment}) }}
	// The current record's read travels with the reservation (and nowhere without one).
	current := records.ReadAhead(k.db, store.RecordRef{Owner: in.Owner, Module: mod.Code, ID: in.RecordID}, false)
	req.Prefetch = []idem.Prefetch{current}
	prepare := func(ctx context.Context) (model.Record, error) {
		k.note("prepare")
		if in.Verdict != "kept" && in.Verdict != "missed" {
			return model.Record{}, apperr.New(apperr.ValidationFailed, "verdict: must be kept or missed")
		}
		if err := model.CheckText("comment", in.Comment, 1, model.MaxCommentChar); err != nil {
			return model.Record{}, err
		}
		k.note("read-current")
		cur, err := current.Get(ctx)
		if errors.Is(err, store.ErrNotFound) {
			return model.Record{}, notFound(in.Owner, mod.Code, in.RecordID)
		}
		return cur, err
	}
	work := func(ctx context.Context, b *store.Batch, cur model.Record) (ReviewResult, error) {
		now := k.now()
		rv := model.Review{ID: k.newID(now), OwnerID: in.Owner, ModuleCode: mod.Code, RecordID: cur.ID, RecordRevision: cur.Revision,
			Verdict: in.Verdict, Comment: in.Comment, IdempotencyKey: keyPtr(in.Key), CreatedAt: now}
		b.InsertReview(StepReview, rv)
		if err := k.checkpoint(ctx, StepReview); err != nil {
			return ReviewResult{}, err
		}
		rev := cur.Revision
		if err := k.audit(ctx, b, in.Owner, mod.Code, cur.ID, "REVIEW_CREATED", &rev, nil, in.Key,
			auditDetail("operation", op, "reviewId", rv.ID, "verdict", rv.Verdict)); err != nil {
			return ReviewResult{}, err
		}
		return ReviewResult{Review: rv}, nil
	}
	res, err := runWrite(ctx, k, req, idem.ResultPolicy[ReviewResult](k.reviewPolicy), prepare, work)
	if err != nil {
		return ReviewWriteResult{}, err
	}
	return reviewWriteResult(res, in.Key, op), nil
}
