package kernel

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/records"
)

func revisionConflict(recordID string, expected int) *apperr.Error {
	return apperr.New(apperr.RevisionConflict, "record %s is no longer at revision %d (someone else wrote it); reload and retry with the current revision", recordID, expected)
}

// revisionConflictGuard is revisionConflict's error as the guard of a queued update: every
// patch and feature run queues one, nearly none fails, so its coded error (a formatted message)
// is made only when it is read. It reads as that *apperr.Error to errors.As and errors.Is.
type revisionConflictGuard struct {
	recordID string
	expected int
}

func (g *revisionConflictGuard) coded() *apperr.Error {
	return revisionConflict(g.recordID, g.expected)
}
func (g *revisionConflictGuard) Error() string        { return g.coded().Error() }
func (g *revisionConflictGuard) Is(target error) bool { return errors.Is(g.coded(), target) }

// As makes the guard an *apperr.Error to errors.As (apperr.CodeOf, apperr.As).
func (g *revisionConflictGuard) As(target any) bool {
	t, ok := target.(**apperr.Error)
	if ok {
		*t = g.coded()
	}
	return ok
}

// Patch writes the next revision of a record if it is still at ExpectRevision (operation
// <MODULE>:record:<id>:patch).
func (k *Kernel) Patch(ctx context.Context, in model.PatchInput) (model.WriteResult, error) {
	mod, err := k.writableModule(in.Module)
	if err != nil {
		return model.WriteResult{}, err
	}
	if err := CheckRecordID(in.RecordID); err != nil {
		return model.WriteResult{}, err
	}
	if in.ExpectRevision < 1 {
		return model.WriteResult{}, apperr.New(apperr.ValidationFailed, "expectRevision: must be the record's current revision (>= 1)")
	}
	op := model.OpPatch(mod.Code, in.RecordID)
	raw := rawRequest(make([]byte, 0, 32+len(in.Payload))).number(in.ExpectRevision).optText(in.Title).optText(in.Summary).json(in.Payload)
	return k.share(ctx, in.Owner, in.Key, op, in.ShareInFlight, raw, func(shareOff bool) (model.WriteResult, error) {
		return k.patch(ctx, &in, mod, op, shareOff)
	})
}

// patch is Patch past the sharing of identical requests.
func (k *Kernel) patch(ctx context.Context, pin *model.PatchInput, mod *Module, op string, shareOff bool) (model.WriteResult, error) {
	in := *pin
	var err error
	req := idem.Request{Owner: in.Owner, Key: in.Key, Operation: op, Module: mod.Code, ShareInFlight: shareIf(in.ShareInFlight, shareOff)}
	var payload json.RawMessage
	if in.Payload != nil {
		if payload, err = model.CanonicalObject("payload", in.Payload); err != nil {
			return model.WriteResult{}, err
		}
	}
	req.Body = model.PatchBody(in.ExpectRevision, in.Title, in.Summary, payload)
	req.BodyV1 = func() ([]byte, error) {
		return bodyV1(map[string]any{"expectRevision": in.ExpectRevision, "title": in.Title, "summary": in.Summary, "payload": in.Payload})
	}
	// The current record's read travels with the reservation (and nowhere without one).
	current := records.ReadAhead(k.db, store.RecordRef{Owner: in.Owner, Module: mod.Code, ID: in.RecordID}, false)
	req.Prefetch = []idem.Prefetch{current}
	prepare := func(ctx context.Context) (model.Record, error) {
		k.note("prepare")
		k.note("read-current")
		cur, err := current.Get(ctx)
		if errors.Is(err, store.ErrNotFound) {
			return model.Record{}, notFound(in.Owner, mod.Code, in.RecordID)
		}
		if err != nil {
			return model.Record{}, err
		}
		if cur.Revision != in.ExpectRevision {
			return model.Record{}, apperr.New(apperr.RevisionConflict, "record %s is at revision %d, not the expected %d; reload and retry", in.RecordID, cur.Revision, in.ExpectRevision)
		}
		next := cur
		if in.Title != nil {
			next.Title = *in.Title
		}
		if in.Summary != nil {
			next.Summary = *in.Summary
		}
		if payload != nil {
			next.Payload = payload
		}
		if err := k.checkRecordFields(mod, next.Title, next.Summary, next.Payload); err != nil {
			return model.Record{}, err
		}
		return next, nil
	}
	work := func(ctx context.Context, b *store.Batch, next model.Record) (RecordResult, error) {
		from := next.Revision
		next.Revision++
		next.UpdatedAt = k.now()
		if err := k.writeRecord(ctx, b, next, from, in.Key, "RECORD_PATCHED", op); err != nil {
			return RecordResult{}, err
		}
		return RecordResult{Record: next}, nil
	}
	res, err := runWrite(ctx, k, req, idem.ResultPolicy[RecordResult](k.recordPolicy), prepare, work)
	if err != nil {
		return model.WriteResult{}, k.explainReuse(ctx, model.WriteRequest{Kind: model.KindPatch, Patch: in}, err)
	}
	return recordWriteResult(res, in.Key, op), nil
}

func notFound(owner, module, id string) error {
	return apperr.New(apperr.RecordNotFound, "owner %s has no %s record %s", owner, module, id)
}
