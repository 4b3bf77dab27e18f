package kernel

import (
	"context"
	"encoding/json"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/jsonb"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

func keyPtr(key string) *string {
	if key == "" {
		return nil
	}
	return &key
}

// keyIn is p, or nil when *p is no key (keyPtr for a key inside a result's one allocation).
func keyIn(p *string) *string {
	if *p == "" {
		return nil
	}
	return p
}

// bodyV1 is the request body as fingerprint version 1 covered it: encoding/json's rendering of
// the fields present (a raw payload as the client wrote it). It is computed only to compare a key
// whose stored fingerprint is version 1; new keys use the canonical body (package jsonb).
func bodyV1(fields map[string]any) ([]byte, error) {
	for k, v := range fields {
		if raw, ok := v.(json.RawMessage); ok {
			if raw == nil {
				delete(fields, k)
				continue
			}
			if !json.Valid(raw) {
				return nil, apperr.New(apperr.ValidationFailed, "%s: not valid JSON", k)
			}
		}
		if p, ok := v.(*string); ok && p == nil {
			delete(fields, k)
		}
	}
	return json.Marshal(fields)
}

// recordWriteResult is what a create or patch returns for the runner's result.
func recordWriteResult(res idem.Result[RecordResult], key, op string) model.WriteResult {
	// One allocation for what the result points to (a storm's followers each make one).
	w := &struct {
		rec model.Record
		key string
	}{utcRecord(res.Value.Record), key}
	return model.WriteResult{Outcome: res.Outcome, Waited: res.Waited, Key: keyIn(&w.key), Operation: op, Record: &w.rec, Envelope: res.Envelope}
}

// featureWriteResult is what a feature run returns for the runner's result.
func featureWriteResult(res idem.Result[FeatureResult], key, op string) model.WriteResult {
	w := &struct {
		rec  model.Record
		exec model.Execution
		key  string
	}{utcRecord(res.Value.Record), res.Value.Execution, key}
	w.exec.CreatedAt, w.exec.UpdatedAt = w.exec.CreatedAt.UTC(), w.exec.UpdatedAt.UTC()
	return model.WriteResult{Outcome: res.Outcome, Waited: res.Waited, Key: keyIn(&w.key), Operation: op, Record: &w.rec, Execution: &w.exec, Envelope: res.Envelope}
}

// utcRecord is rec with its times in UTC: a record read back from PostgreSQL carries the
// session's zone, one built in this process the clock's, and a replay must print the same bytes.
func utcRecord(rec model.Record) model.Record {
	rec.CreatedAt, rec.UpdatedAt = rec.CreatedAt.UTC(), rec.UpdatedAt.UTC()
	return rec
}

// optText is the canonical text of an optional string member (nil: absent).
// checkRecordFields checks title and summary and applies the module's rules to the payload
// (already through the JSON boundary, canonical).
func (k *Kernel) checkRecordFields(mod *Module, title, summary string, payload json.RawMessage) error {
	if err := CheckTitle(title); err != nil {
		return err
	}
	if err := CheckSummary(summary); err != nil {
		return err
	}
	k.note("module-rules")
	if mod.ValidatePayload == nil {
		return nil
	}
	m, err := decodeObject(payload)
	if err != nil {
		return apperr.New(apperr.ValidationFailed, "payload: %v", err)
	}
	return mod.ValidatePayload(m, k.Registry.Rules.Snapshot())
}

// writeRecord queues rec (a new record when fromRevision is 0, else the next revision of it),
// its revision and the audit event in b, with a fault checkpoint after each.
func (k *Kernel) writeRecord(ctx context.Context, b *store.Batch, rec model.Record, fromRevision int, key, action, op string) error {
	if fromRevision == 0 {
		b.InsertRecord(StepRecord, rec)
	} else {
		// The optimistic lock is checked by the server (the statement fails when the row is no
		// longer at fromRevision), so the update may travel queued with the rest of the commit.
		b.UpdateRecordGuarded(StepRecord, rec, fromRevision, &revisionConflictGuard{rec.ID, fromRevision})
	}
	if err := k.checkpoint(ctx, StepRecord); err != nil {
		return err
	}
	b.InsertRevision(StepRevision, rec, keyPtr(key))
	if err := k.checkpoint(ctx, StepRevision); err != nil {
		return err
	}
	if action == "" {
		return nil
	}
	return k.audit(ctx, b, rec.OwnerID, rec.ModuleCode, rec.ID, action, &rec.Revision, nil, key, auditDetail("operation", op))
}

// auditDetail is an audit event's detail: an object of the given name/value strings.
func auditDetail(nameValues ...string) json.RawMessage {
	var ms [4]jsonb.Member
	// The members' quoted values share one buffer (a value that outgrows it keeps the bytes it
	// was written in).
	size := 0
	for _, s := range nameValues {
		size += len(s) + 2
	}
	vals := make([]byte, 0, size)
	n := 0
	for i := 0; i+1 < len(nameValues) && n < len(ms); i += 2 {
		start := len(vals)
		vals = jsonb.AppendString(vals, nameValues[i+1])
		ms[n] = jsonb.Member{Name: nameValues[i], Value: vals[start:len(vals):len(vals)]}
		n++
	}
	return jsonb.AppendObject(make([]byte, 0, size+4*n), ms[:n]...)
}

func (k *Kernel) audit(ctx context.Context, b *store.Batch, owner, module, recordID, action string, revision *int, executionID *string, key string, d json.RawMessage) error {
	now := k.now()
	b.InsertAudit(StepAudit, model.AuditEvent{ID: k.newID(now), OwnerID: owner, ModuleCode: module, RecordID: &recordID,
		Action: action, Revision: revision, ExecutionID: executionID, IdempotencyKey: keyPtr(key), Detail: d, At: now})
	return k.checkpoint(ctx, StepAudit)
}
