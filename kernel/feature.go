package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/records"
)

type preparedFeature struct {
	current    model.Record
	newPayload json.RawMessage // internal features only
	output     json.RawMessage
	input      json.RawMessage
}

// RunFeature runs a feature of a record (operation <MODULE>:record:<id>:feature:<featureId>).
// An internal feature writes the next revision; a direct_external one fails closed: it commits
// a BLOCKED execution and leaves the revision as it was; an outbox one commits a PENDING
// execution and an outbox message for the worker.
func (k *Kernel) RunFeature(ctx context.Context, in model.FeatureInput) (model.WriteResult, error) {
	mod, err := k.writableModule(in.Module)
	if err != nil {
		return model.WriteResult{}, err
	}
	if err := CheckRecordID(in.RecordID); err != nil {
		return model.WriteResult{}, err
	}
	feat, err := featureOf(mod, in.FeatureID)
	if err != nil {
		return model.WriteResult{}, err
	}
	op := model.OpFeature(mod.Code, in.RecordID, feat.ID)
	raw := rawRequest(make([]byte, 0, 16+len(in.Input))).json(in.Input)
	return k.share(ctx, in.Owner, in.Key, op, in.ShareInFlight, raw, func(shareOff bool) (model.WriteResult, error) {
		return k.runFeature(ctx, &in, mod, feat, op, shareOff)
	})
}

// runFeature is RunFeature past the sharing of identical requests.
func (k *Kernel) runFeature(ctx context.Context, pin *model.FeatureInput, mod *Module, feat Feature, op string, shareOff bool) (model.WriteResult, error) {
	in := *pin
	var err error
	req := idem.Request{Owner: in.Owner, Key: in.Key, Operation: op, Module: mod.Code, ShareInFlight: shareIf(in.ShareInFlight, shareOff)}
	input := json.RawMessage(`{}`)
	var given json.RawMessage
	if in.Input != nil {
		if input, err = model.CanonicalObject("input", in.Input); err != nil {
			return model.WriteResult{}, err
		}
		given = input
	}
	req.Body = model.FeatureBody(given)
	req.EarlierBody = model.FeatureBodyAsSent(given)
	req.BodyV1 = func() ([]byte, error) {
		if in.Input == nil {
			return []byte(`{}`), nil
		}
		return bodyV1(map[string]any{"input": in.Input})
	}
	// The current record's read travels with the reservation (and nowhere without one).
	current := records.ReadAhead(k.db, store.RecordRef{Owner: in.Owner, Module: mod.Code, ID: in.RecordID}, true)
	req.Prefetch = []idem.Prefetch{current}
	prepare := func(ctx context.Context) (preparedFeature, error) {
		k.note("prepare")
		k.note("read-current")
		cur, err := current.Get(ctx)
		if errors.Is(err, store.ErrNotFound) {
			return preparedFeature{}, notFound(in.Owner, mod.Code, in.RecordID)
		}
		if err != nil {
			return preparedFeature{}, err
		}
		p := preparedFeature{current: cur, input: input, output: json.RawMessage(`{}`)}
		switch feat.Mode {
		case ModeInternal:
			validate := func(next map[string]any) error {
				k.note("module-rules")
				if mod.ValidatePayload != nil {
					return mod.ValidatePayload(next, k.Registry.Rules.Snapshot())
				}
				return nil
			}
			if p.newPayload, p.output, err = applyInternal(feat, cur.Payload, input, validate); err != nil {
				return preparedFeature{}, err
			}
		case ModeDirectExternal:
			p.output = blockedOutput(feat)
		case ModeOutbox:
			p.output = json.RawMessage(`{"queued": true}`)
		}
		return p, nil
	}
	work := func(ctx context.Context, b *store.Batch, p preparedFeature) (FeatureResult, error) {
		return k.runFeatureWork(ctx, b, in, mod, feat, op, p)
	}
	res, err := runWrite(ctx, k, req, idem.ResultPolicy[FeatureResult](k.featurePolicyFor(feat.ID)), prepare, work)
	if err != nil {
		return model.WriteResult{}, k.explainReuse(ctx, model.WriteRequest{Kind: model.KindAction, Feature: in}, err)
	}
	return featureWriteResult(res, in.Key, op), nil
}

func (k *Kernel) runFeatureWork(ctx context.Context, b *store.Batch, in model.FeatureInput, mod *Module, feat Feature, op string, p preparedFeature) (FeatureResult, error) {
	now := k.now()
	rec := p.current
	exec := model.Execution{ID: k.newID(now), OwnerID: in.Owner, ModuleCode: mod.Code, RecordID: rec.ID, FeatureID: feat.ID,
		Input: p.input, Output: p.output, IdempotencyKey: keyPtr(in.Key), CreatedAt: now, UpdatedAt: now}
	action := "FEATURE_" + feat.ID + "_EXECUTED"
	switch feat.Mode {
	case ModeInternal:
		from := rec.Revision
		rec.Revision++
		rec.Payload = p.newPayload
		rec.UpdatedAt = now
		if err := k.writeRecord(ctx, b, rec, from, in.Key, "", op); err != nil {
			return FeatureResult{}, err
		}
		exec.Mode, exec.Status = string(ModeInternal), "SUCCEEDED"
	case ModeDirectExternal:
		// Fail closed: the provider is never called; the fact that it could not be is what
		// commits. The record keeps its pre-request revision.
		exec.Mode, exec.Status = "blocked_external", "BLOCKED"
		action = "FEATURE_" + feat.ID + "_BLOCKED"
	case ModeOutbox:
		exec.Mode, exec.Status = string(ModeOutbox), "PENDING"
		action = "FEATURE_" + feat.ID + "_QUEUED"
	}
	exec.RecordRevision = rec.Revision
	b.InsertExecution(StepExecution, exec)
	if feat.Mode == ModeOutbox {
		ref, _ := json.Marshal(map[string]any{"recordId": rec.ID, "revision": rec.Revision, "executionId": exec.ID})
		b.InsertOutbox(StepExecution, model.OutboxMessage{ID: k.newID(now), OwnerID: in.Owner, ExecutionID: exec.ID,
			Provider: feat.Provider, PayloadRef: ref, IdempotencyID: exec.ID, IdempotencyKey: keyPtr(in.Key), Status: "PENDING",
			NextAttemptAt: now, CreatedAt: now})
	}
	if err := k.checkpoint(ctx, StepExecution); err != nil {
		return FeatureResult{}, err
	}
	detail := auditDetail("operation", op, "featureId", feat.ID, "mode", exec.Mode, "status", exec.Status)
	if err := k.audit(ctx, b, in.Owner, mod.Code, rec.ID, action, &rec.Revision, &exec.ID, in.Key, detail); err != nil {
		return FeatureResult{}, err
	}
	return FeatureResult{Record: rec, Execution: exec}, nil
}

// blockedOutput is the persisted explanation of a fail-closed direct external feature.
func blockedOutput(f Feature) json.RawMessage {
	b, _ := canonicalJSON(map[string]any{
		"blocked":  true,
		"provider": f.Provider,
		"reason":   "direct external calls cannot be undone by a database rollback; this feature fails closed until it is moved to the outbox",
	})
	return b
}

// ApplyInternal is what an internal feature makes of a stored payload and a canonical input:
// the canonical text of its next payload and of its output, by the same decoding, rules and
// writing a feature run uses (the bench's limit computes a feature run's writes with it, from
// the record it read, as hand-written code would have to).
func ApplyInternal(feat Feature, payload, input json.RawMessage) (newPayload, output json.RawMessage, err error) {
	return applyInternal(feat, payload, input, nil)
}

// applyInternal decodes payload and input, applies feat, runs validate (when set) on the next
// payload, and writes the next payload and the output as canonical text.
func applyInternal(feat Feature, payload, input json.RawMessage, validate func(map[string]any) error) (newPayload, output json.RawMessage, err error) {
	if feat.Apply == nil {
		return nil, nil, fmt.Errorf("kernel: feature %s is not internal", feat.ID)
	}
	cur, err := decodeObject(payload)
	if err != nil {
		return nil, nil, err
	}
	inMap, err := decodeObject(input)
	if err != nil {
		return nil, nil, err
	}
	next, out, err := feat.Apply(cur, inMap)
	if err != nil {
		return nil, nil, err
	}
	if validate != nil {
		if err := validate(next); err != nil {
			return nil, nil, err
		}
	}
	if newPayload, err = canonicalObject("payload", next); err != nil {
		return nil, nil, err
	}
	if output, err = canonicalJSON(out); err != nil {
		return nil, nil, err
	}
	return newPayload, output, nil
}
