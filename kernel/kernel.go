package kernel

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"idemwork/apperr"
	"idemwork/idem"
	"idemwork/jsonb"
	"idemwork/store"
)

// Kernel writes records, revisions, executions, reviews and audit events through the runner,
// one transaction per request.
type Kernel struct {
	db       *store.DB
	runner   *idem.Runner
	Registry *Registry

	recordPolicy recordSnapshotPolicy
	reviewPolicy commitmentReviewPolicy
	observe      func(step string)
	idMu         sync.Mutex
	entropy      *ulid.MonotonicEntropy
}

// Options configures a Kernel.
type Options struct {
	// Observe, when set, is told of each prepare-time step ("prepare", "read-current",
	// "module-rules"); tests use it to prove a cache hit skips them all.
	Observe func(step string)
}

// New returns a kernel writing through runner (whose database it uses).
func New(runner *idem.Runner, reg *Registry, opts Options) *Kernel {
	k := &Kernel{db: runner.DB(), runner: runner, Registry: reg, observe: opts.Observe,
		entropy: ulid.Monotonic(rand.Reader, 0)}
	k.recordPolicy = recordSnapshotPolicy{k}
	k.reviewPolicy = commitmentReviewPolicy{k}
	return k
}

// DB is the kernel's database.
func (k *Kernel) DB() *store.DB { return k.db }

// Runner is the kernel's idempotency runner.
func (k *Kernel) Runner() *idem.Runner { return k.runner }

func (k *Kernel) note(step string) {
	if k.observe != nil {
		k.observe(step)
	}
}

// newID returns a ULID, monotonic within this process.
func (k *Kernel) newID(t time.Time) string {
	k.idMu.Lock()
	defer k.idMu.Unlock()
	return ulid.MustNew(ulid.Timestamp(t), k.entropy).String()
}

// WriteResult is what create, patch and action return (SPEC §10.2). For a replay, Record is
// the restored revision, not the latest.
type WriteResult struct {
	Outcome   idem.Outcome     `json:"outcome"`
	Waited    bool             `json:"waited"`
	Key       *string          `json:"key"`
	Operation string           `json:"operation"`
	Record    *store.Record    `json:"record"`
	Execution *store.Execution `json:"execution"`
	Envelope  json.RawMessage  `json:"envelope"`
}

// Operations of SPEC §4.1.

// OpCreate is the operation of creating a record of module.
func OpCreate(module string) string { return module + ":record:create" }

// OpPatch is the operation of patching a record.
func OpPatch(module, recordID string) string { return module + ":record:" + recordID + ":patch" }

// OpFeature is the operation of running a feature on a record.
func OpFeature(module, recordID, featureID string) string {
	return module + ":record:" + recordID + ":feature:" + featureID
}

// OpReview is the operation of creating a commitment review.
func OpReview(recordID string) string {
	return ModuleCommitment + ":record:" + recordID + ":review:create"
}

// OpLegacyIdentityCreate is the disabled legacy operation whose receipts may be redacted.
const OpLegacyIdentityCreate = "identity:create"

func keyPtr(key string) *string {
	if key == "" {
		return nil
	}
	return &key
}

// module returns a writable module or the error a write to it gets, before any runner or
// repository is touched.
func (k *Kernel) writableModule(code string) (*Module, error) {
	m, err := k.Registry.Module(code)
	if err != nil {
		return nil, err
	}
	if m.Legacy {
		return nil, apperr.New(apperr.LegacyWriteDisable, "%s is a legacy module: every write is disabled; its old receipts stay readable", code)
	}
	return m, nil
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

// CreateInput is a create request.
type CreateInput struct {
	Owner         string
	Module        string
	Key           string
	Title         string
	Summary       *string
	Payload       json.RawMessage // nil: {}
	ShareInFlight *bool
}

type preparedRecord struct {
	title   string
	summary string
	payload json.RawMessage
}

// Create writes a new record at revision 1 (operation <MODULE>:record:create).
func (k *Kernel) Create(ctx context.Context, in CreateInput) (WriteResult, error) {
	mod, err := k.writableModule(in.Module)
	if err != nil {
		return WriteResult{}, err
	}
	op := mod.createOperation()
	payload := json.RawMessage(`{}`)
	var given json.RawMessage // the payload member of the body: absent when not given
	if in.Payload != nil {
		if payload, err = CanonicalObject("payload", in.Payload); err != nil {
			return WriteResult{}, err
		}
		given = payload
	}
	body := jsonb.AppendObject(nil, jsonb.Member{Name: "title", Value: jsonb.AppendString(nil, in.Title)},
		jsonb.Member{Name: "summary", Value: optText(in.Summary)}, jsonb.Member{Name: "payload", Value: given})
	req := idem.Request{Owner: in.Owner, Key: in.Key, Operation: op, Module: mod.Code, Body: body, ShareInFlight: in.ShareInFlight,
		BodyV1: func() ([]byte, error) {
			return bodyV1(map[string]any{"title": in.Title, "summary": in.Summary, "payload": in.Payload})
		}}
	if w, ok, err := joinFlight(ctx, k, &req, recordWriteResult); ok || err != nil {
		return w, err
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
	work := func(ctx context.Context, p preparedRecord, b *store.Batch) (RecordResult, error) {
		now := k.now()
		rec := store.Record{ID: k.newID(now), OwnerID: in.Owner, ModuleCode: mod.Code, Revision: 1, Title: p.title,
			Summary: p.summary, Payload: p.payload, CreatedAt: now, UpdatedAt: now}
		if err := k.writeRecord(ctx, b, rec, 0, in.Key, "RECORD_CREATED", op); err != nil {
			return RecordResult{}, err
		}
		return RecordResult{Record: rec}, nil
	}
	res, err := idem.RunPrepared(ctx, k.runner, req, idem.ResultPolicy[RecordResult](k.recordPolicy), prepare, work)
	if err != nil {
		return WriteResult{}, err
	}
	return recordWriteResult(res, in.Key, op), nil
}

// joinFlight is idem.JoinInFlight for a kernel write, its result converted by convert (called
// with the request's key and operation). A write tries it before it builds its prepare and work,
// so that a joining follower allocates neither.
func joinFlight[T any](ctx context.Context, k *Kernel, req *idem.Request,
	convert func(res idem.Result[T], key, op string) WriteResult) (WriteResult, bool, error) {
	res, ok, err := idem.JoinInFlight[T](ctx, k.runner, req)
	if !ok || err != nil {
		return WriteResult{}, ok, err
	}
	return convert(res, req.Key, req.Operation), true, nil
}

// recordWriteResult is what a create or patch returns for the runner's result.
func recordWriteResult(res idem.Result[RecordResult], key, op string) WriteResult {
	rec := utcRecord(res.Value.Record)
	return WriteResult{Outcome: res.Outcome, Waited: res.Waited, Key: keyPtr(key), Operation: op, Record: &rec, Envelope: res.Envelope}
}

// featureWriteResult is what a feature run returns for the runner's result.
func featureWriteResult(res idem.Result[FeatureResult], key, op string) WriteResult {
	rec, exec := utcRecord(res.Value.Record), res.Value.Execution
	exec.CreatedAt, exec.UpdatedAt = exec.CreatedAt.UTC(), exec.UpdatedAt.UTC()
	return WriteResult{Outcome: res.Outcome, Waited: res.Waited, Key: keyPtr(key), Operation: op, Record: &rec, Execution: &exec, Envelope: res.Envelope}
}

// utcRecord is rec with its times in UTC: a record read back from PostgreSQL carries the
// session's zone, one built in this process the clock's, and a replay must print the same bytes.
func utcRecord(rec store.Record) store.Record {
	rec.CreatedAt, rec.UpdatedAt = rec.CreatedAt.UTC(), rec.UpdatedAt.UTC()
	return rec
}

// now is the runner's clock in UTC at PostgreSQL's precision (microseconds), so a value written
// and one read back from a timestamptz column are the same.
func (k *Kernel) now() time.Time { return k.runner.Clock().Now().UTC().Truncate(time.Microsecond) }

// optText is the canonical text of an optional string member (nil: absent).
func optText(s *string) []byte {
	if s == nil {
		return nil
	}
	return jsonb.AppendString(nil, *s)
}

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
func (k *Kernel) writeRecord(ctx context.Context, b *store.Batch, rec store.Record, fromRevision int, key, action, op string) error {
	if fromRevision == 0 {
		b.InsertRecord(idem.StepRecord, rec)
	} else {
		// The optimistic lock is checked by the server (the statement fails when the row is no
		// longer at fromRevision), so the update may travel queued with the rest of the commit.
		b.UpdateRecordGuarded(idem.StepRecord, rec, fromRevision, revisionConflict(rec.ID, fromRevision))
	}
	if err := idem.Checkpoint(ctx, idem.StepRecord); err != nil {
		return err
	}
	b.InsertRevision(idem.StepRevision, rec, keyPtr(key))
	if err := idem.Checkpoint(ctx, idem.StepRevision); err != nil {
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
	n := 0
	for i := 0; i+1 < len(nameValues) && n < len(ms); i += 2 {
		ms[n] = jsonb.Member{Name: nameValues[i], Value: jsonb.AppendString(nil, nameValues[i+1])}
		n++
	}
	return jsonb.AppendObject(nil, ms[:n]...)
}

func (k *Kernel) audit(ctx context.Context, b *store.Batch, owner, module, recordID, action string, revision *int, executionID *string, key string, d json.RawMessage) error {
	now := k.now()
	b.InsertAudit(idem.StepAudit, store.AuditEvent{ID: k.newID(now), OwnerID: owner, ModuleCode: module, RecordID: &recordID,
		Action: action, Revision: revision, ExecutionID: executionID, IdempotencyKey: keyPtr(key), Detail: d, At: now})
	return idem.Checkpoint(ctx, idem.StepAudit)
}

func revisionConflict(recordID string, expected int) error {
	return apperr.New(apperr.RevisionConflict, "record %s is no longer at revision %d (someone else wrote it); reload and retry with the current revision", recordID, expected)
}

// PatchInput is a patch request; nil fields stay as they are.
type PatchInput struct {
	Owner          string
	Module         string
	RecordID       string
	Key            string
	ExpectRevision int
	Title          *string
	Summary        *string
	Payload        json.RawMessage
	ShareInFlight  *bool
}

// Patch writes the next revision of a record if it is still at ExpectRevision (operation
// <MODULE>:record:<id>:patch).
func (k *Kernel) Patch(ctx context.Context, in PatchInput) (WriteResult, error) {
	mod, err := k.writableModule(in.Module)
	if err != nil {
		return WriteResult{}, err
	}
	if err := CheckRecordID(in.RecordID); err != nil {
		return WriteResult{}, err
	}
	if in.ExpectRevision < 1 {
		return WriteResult{}, apperr.New(apperr.ValidationFailed, "expectRevision: must be the record's current revision (>= 1)")
	}
	op := OpPatch(mod.Code, in.RecordID)
	var payload json.RawMessage
	if in.Payload != nil {
		if payload, err = CanonicalObject("payload", in.Payload); err != nil {
			return WriteResult{}, err
		}
	}
	body := jsonb.AppendObject(nil, jsonb.Member{Name: "expectRevision", Value: strconv.AppendInt(nil, int64(in.ExpectRevision), 10)},
		jsonb.Member{Name: "title", Value: optText(in.Title)}, jsonb.Member{Name: "summary", Value: optText(in.Summary)},
		jsonb.Member{Name: "payload", Value: payload})
	req := idem.Request{Owner: in.Owner, Key: in.Key, Operation: op, Module: mod.Code, Body: body, ShareInFlight: in.ShareInFlight,
		BodyV1: func() ([]byte, error) {
			return bodyV1(map[string]any{"expectRevision": in.ExpectRevision, "title": in.Title, "summary": in.Summary, "payload": in.Payload})
		}}
	if w, ok, err := joinFlight(ctx, k, &req, recordWriteResult); ok || err != nil {
		return w, err
	}
	prepare := func(ctx context.Context) (store.Record, error) {
		k.note("prepare")
		k.note("read-current")
		cur, err := k.db.FindRecord(ctx, in.Owner, mod.Code, in.RecordID, false)
		if errors.Is(err, store.ErrNotFound) {
			return store.Record{}, notFound(in.Owner, mod.Code, in.RecordID)
		}
		if err != nil {
			return store.Record{}, err
		}
		if cur.Revision != in.ExpectRevision {
			return store.Record{}, apperr.New(apperr.RevisionConflict, "record %s is at revision %d, not the expected %d; reload and retry", in.RecordID, cur.Revision, in.ExpectRevision)
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
			return store.Record{}, err
		}
		return next, nil
	}
	work := func(ctx context.Context, next store.Record, b *store.Batch) (RecordResult, error) {
		from := next.Revision
		next.Revision++
		next.UpdatedAt = k.now()
		if err := k.writeRecord(ctx, b, next, from, in.Key, "RECORD_PATCHED", op); err != nil {
			return RecordResult{}, err
		}
		return RecordResult{Record: next}, nil
	}
	res, err := idem.RunPrepared(ctx, k.runner, req, idem.ResultPolicy[RecordResult](k.recordPolicy), prepare, work)
	if err != nil {
		return WriteResult{}, err
	}
	return recordWriteResult(res, in.Key, op), nil
}

func notFound(owner, module, id string) error {
	return apperr.New(apperr.RecordNotFound, "owner %s has no %s record %s", owner, module, id)
}

// FeatureInput is a feature run request.
type FeatureInput struct {
	Owner         string
	Module        string
	RecordID      string
	FeatureID     string
	Key           string
	Input         json.RawMessage // nil: {}
	ShareInFlight *bool
}

type preparedFeature struct {
	current    store.Record
	newPayload json.RawMessage // internal features only
	output     json.RawMessage
	input      json.RawMessage
}

// RunFeature runs a feature of a record (operation <MODULE>:record:<id>:feature:<featureId>).
// An internal feature writes the next revision; a direct_external one fails closed: it commits
// a BLOCKED execution and leaves the revision as it was; an outbox one commits a PENDING
// execution and an outbox message for the worker.
func (k *Kernel) RunFeature(ctx context.Context, in FeatureInput) (WriteResult, error) {
	mod, err := k.writableModule(in.Module)
	if err != nil {
		return WriteResult{}, err
	}
	if err := CheckRecordID(in.RecordID); err != nil {
		return WriteResult{}, err
	}
	feat, err := featureOf(mod, in.FeatureID)
	if err != nil {
		return WriteResult{}, err
	}
	op := OpFeature(mod.Code, in.RecordID, feat.ID)
	input := json.RawMessage(`{}`)
	var given json.RawMessage
	if in.Input != nil {
		if input, err = CanonicalObject("input", in.Input); err != nil {
			return WriteResult{}, err
		}
		given = input
	}
	body := jsonb.AppendObject(nil, jsonb.Member{Name: "input", Value: given})
	req := idem.Request{Owner: in.Owner, Key: in.Key, Operation: op, Module: mod.Code, Body: body, ShareInFlight: in.ShareInFlight,
		BodyV1: func() ([]byte, error) {
			if in.Input == nil {
				return []byte(`{}`), nil
			}
			return bodyV1(map[string]any{"input": in.Input})
		}}
	if w, ok, err := joinFlight(ctx, k, &req, featureWriteResult); ok || err != nil {
		return w, err
	}
	prepare := func(ctx context.Context) (preparedFeature, error) {
		k.note("prepare")
		k.note("read-current")
		cur, err := k.db.FindRecord(ctx, in.Owner, mod.Code, in.RecordID, true)
		if errors.Is(err, store.ErrNotFound) {
			return preparedFeature{}, notFound(in.Owner, mod.Code, in.RecordID)
		}
		if err != nil {
			return preparedFeature{}, err
		}
		p := preparedFeature{current: cur, input: input, output: json.RawMessage(`{}`)}
		switch feat.Mode {
		case ModeInternal:
			payload, err := decodeObject(cur.Payload)
			if err != nil {
				return preparedFeature{}, err
			}
			inMap, err := decodeObject(input)
			if err != nil {
				return preparedFeature{}, err
			}
			next, out, err := feat.Apply(payload, inMap)
			if err != nil {
				return preparedFeature{}, err
			}
			k.note("module-rules")
			if mod.ValidatePayload != nil {
				if err := mod.ValidatePayload(next, k.Registry.Rules.Snapshot()); err != nil {
					return preparedFeature{}, err
				}
			}
			b, err := json.Marshal(next)
			if err != nil {
				return preparedFeature{}, err
			}
			if p.newPayload, err = CanonicalObject("payload", b); err != nil {
				return preparedFeature{}, err
			}
			if p.output, err = canonicalJSON(out); err != nil {
				return preparedFeature{}, err
			}
		case ModeDirectExternal:
			p.output = blockedOutput(feat)
		case ModeOutbox:
			p.output = json.RawMessage(`{"queued": true}`)
		}
		return p, nil
	}
	work := func(ctx context.Context, p preparedFeature, b *store.Batch) (FeatureResult, error) {
		return k.runFeatureWork(ctx, b, in, mod, feat, op, p)
	}
	res, err := idem.RunPrepared(ctx, k.runner, req, idem.ResultPolicy[FeatureResult](k.featurePolicyFor(feat.ID)), prepare, work)
	if err != nil {
		return WriteResult{}, err
	}
	return featureWriteResult(res, in.Key, op), nil
}

func (k *Kernel) runFeatureWork(ctx context.Context, b *store.Batch, in FeatureInput, mod *Module, feat Feature, op string, p preparedFeature) (FeatureResult, error) {
	now := k.now()
	rec := p.current
	exec := store.Execution{ID: k.newID(now), OwnerID: in.Owner, ModuleCode: mod.Code, RecordID: rec.ID, FeatureID: feat.ID,
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
	b.InsertExecution(idem.StepExecution, exec)
	if feat.Mode == ModeOutbox {
		ref, _ := json.Marshal(map[string]any{"recordId": rec.ID, "revision": rec.Revision, "executionId": exec.ID})
		b.InsertOutbox(idem.StepExecution, store.OutboxMessage{ID: k.newID(now), OwnerID: in.Owner, ExecutionID: exec.ID,
			Provider: feat.Provider, PayloadRef: ref, IdempotencyID: exec.ID, Status: "PENDING", NextAttemptAt: now, CreatedAt: now})
	}
	if err := idem.Checkpoint(ctx, idem.StepExecution); err != nil {
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
	Outcome   idem.Outcome    `json:"outcome"`
	Waited    bool            `json:"waited"`
	Key       *string         `json:"key"`
	Operation string          `json:"operation"`
	Review    store.Review    `json:"review"`
	Envelope  json.RawMessage `json:"envelope"`
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
	prepare := func(ctx context.Context) (store.Record, error) {
		k.note("prepare")
		if in.Verdict != "kept" && in.Verdict != "missed" {
			return store.Record{}, apperr.New(apperr.ValidationFailed, "verdict: must be kept or missed")
		}
		if err := CheckText("comment", in.Comment, 1, MaxCommentChar); err != nil {
			return store.Record{}, err
		}
		k.note("read-current")
		cur, err := k.db.FindRecord(ctx, in.Owner, mod.Code, in.RecordID, false)
		if errors.Is(err, store.ErrNotFound) {
			return store.Record{}, notFound(in.Owner, mod.Code, in.RecordID)
		}
		return cur, err
	}
	work := func(ctx context.Context, cur store.Record, b *store.Batch) (ReviewResult, error) {
		now := k.now()
		rv := store.Review{ID: k.newID(now), OwnerID: in.Owner, ModuleCode: mod.Code, RecordID: cur.ID, RecordRevision: cur.Revision,
			Verdict: in.Verdict, Comment: in.Comment, IdempotencyKey: keyPtr(in.Key), CreatedAt: now}
		b.InsertReview(idem.StepReview, rv)
		if err := idem.Checkpoint(ctx, idem.StepReview); err != nil {
			return ReviewResult{}, err
		}
		rev := cur.Revision
		if err := k.audit(ctx, b, in.Owner, mod.Code, cur.ID, "REVIEW_CREATED", &rev, nil, in.Key,
			auditDetail("operation", op, "reviewId", rv.ID, "verdict", rv.Verdict)); err != nil {
			return ReviewResult{}, err
		}
		return ReviewResult{Review: rv}, nil
	}
	res, err := idem.RunPrepared(ctx, k.runner, req, idem.ResultPolicy[ReviewResult](k.reviewPolicy), prepare, work)
	if err != nil {
		return ReviewWriteResult{}, err
	}
	return reviewWriteResult(res, in.Key, op), nil
}

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

// RequireWritable is the rule every write entry point (CLI command, HTTP route, TUI form,
// storm) applies before calling Create, Patch, RunFeature or CreateReview: on a read-only
// session a write request is refused with READ_ONLY up front (a hot standby says so; a schema
// newer than this binary is SCHEMA_NOT_READY), a replay included, though the runner itself would
// answer a replay from its cache without writing.
func (k *Kernel) RequireWritable() error { return k.db.WriteRefusal() }
