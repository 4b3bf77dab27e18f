package kernel

import (
	"context"
	"encoding/json"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

type preparedRecord struct {
	title   string
	summary string
	payload json.RawMessage
}

// Create writes a new record at revision 1 (operation <MODULE>:record:create).
func (k *Kernel) Create(ctx context.Context, in model.CreateInput) (model.WriteResult, error) {
	mod, err := k.writableModule(in.Module)
	if err != nil {
		return model.WriteResult{}, err
	}
	// The raw request of a typical create fits on the stack: a follower allocates nothing for it.
	var buf [128]byte
	raw := rawRequest(buf[:0]).text(in.Title).optText(in.Summary).json(in.Payload)
	return k.share(ctx, in.Owner, in.Key, mod.createOperation(), in.ShareInFlight, raw, func(shareOff bool) (model.WriteResult, error) {
		return k.create(ctx, &in, mod, shareOff)
	})
}

// create is Create past the sharing of identical requests.
func (k *Kernel) create(ctx context.Context, pin *model.CreateInput, mod *Module, shareOff bool) (model.WriteResult, error) {
	in, op := *pin, mod.createOperation()
	var err error
	req := idem.Request{Owner: in.Owner, Key: in.Key, Operation: op, Module: mod.Code, ShareInFlight: shareIf(in.ShareInFlight, shareOff)}
	payload := json.RawMessage(`{}`)
	var given json.RawMessage // the payload member of the body: absent when not given
	if in.Payload != nil {
		if payload, err = model.CanonicalObject("payload", in.Payload); err != nil {
			return model.WriteResult{}, err
		}
		given = payload
	}
	req.Body = model.CreateBody(in.Title, in.Summary, given)
	req.EarlierBody = model.CreateBodyAsSent(in.Title, in.Summary, given)
	req.BodyV1 = func() ([]byte, error) {
		return bodyV1(map[string]any{"title": in.Title, "summary": in.Summary, "payload": in.Payload})
	}
	prepare := func(ctx context.Context) (preparedRecord, error) {
		k.note("prepare")
		summary := ""
		if in.Summary != nil {
			summary = *in.Summary
		}
		if err := k.checkRecordFields(mod, in.Title, summary, payload); err != nil {
			return preparedRecord{}, err
		}
		return preparedRecord{title: in.Title, summary: summary, payload: payload}, nil
	}
	work := func(ctx context.Context, b *store.Batch, p preparedRecord) (RecordResult, error) {
		now := k.now()
		rec := model.Record{ID: k.newID(now), OwnerID: in.Owner, ModuleCode: mod.Code, Revision: 1, Title: p.title,
			Summary: p.summary, Payload: p.payload, CreatedAt: now, UpdatedAt: now}
		if err := k.writeRecord(ctx, b, rec, 0, in.Key, "RECORD_CREATED", op); err != nil {
			return RecordResult{}, err
		}
		return RecordResult{Record: rec}, nil
	}
	res, err := runCreate(ctx, k, req, idem.ResultPolicy[RecordResult](k.recordPolicy), prepare, work)
	if err != nil {
		return model.WriteResult{}, k.explainReuse(ctx, model.WriteRequest{Kind: model.KindCreate, Create: in}, err)
	}
	return recordWriteResult(res, in.Key, op), nil
}
