package kernel

import (
	"context"
	"encoding/json"
	"errors"

	"idemwork/apperr"
	"idemwork/store"
)

// Policy names (SPEC §5). A new name means new restore semantics.
const (
	PolicyRecordSnapshot   = "record-snapshot-reference-v1"
	PolicyFeatureExecution = "feature-execution-reference-v1"
	PolicyCommitmentReview = "commitment-review-reference-v2"
)

// RecordResult is the result of a create or patch: the record as of the written revision.
type RecordResult struct {
	Record store.Record
}

// FeatureResult is the result of a feature run: {record, execution}.
type FeatureResult struct {
	Record    store.Record
	Execution store.Execution
}

// ReviewResult is the result of a commitment review.
type ReviewResult struct {
	Review store.Review
}

type recordRef struct {
	RecordID string `json:"recordId"`
	Revision int    `json:"revision"`
}

type executionRef struct {
	RecordID    string `json:"recordId"`
	Revision    int    `json:"revision"`
	ExecutionID string `json:"executionId"`
}

type reviewRef struct {
	RecordID string `json:"recordId"`
	ReviewID string `json:"reviewId"`
}

// recordSnapshotPolicy stores recordId + revision and restores that exact revision.
type recordSnapshotPolicy struct{ k *Kernel }

func (recordSnapshotPolicy) Name() string     { return PolicyRecordSnapshot }
func (recordSnapshotPolicy) Fields() []string { return []string{"recordId", "revision"} }

func (recordSnapshotPolicy) Serialize(v RecordResult) (json.RawMessage, error) {
	return json.Marshal(recordRef{RecordID: v.Record.ID, Revision: v.Record.Revision})
}

func (p recordSnapshotPolicy) Restore(ctx context.Context, owner, module string, result json.RawMessage) (RecordResult, error) {
	var ref recordRef
	if err := json.Unmarshal(result, &ref); err != nil {
		return RecordResult{}, apperr.New(apperr.SnapshotIntegrity, "stored result is not a record reference")
	}
	rec, err := p.k.restoreRevision(ctx, owner, module, ref.RecordID, ref.Revision)
	if err != nil {
		return RecordResult{}, err
	}
	return RecordResult{Record: rec}, nil
}

// featureExecutionPolicy stores recordId + revision + executionId.
type featureExecutionPolicy struct{ k *Kernel }

func (featureExecutionPolicy) Name() string { return PolicyFeatureExecution }
func (featureExecutionPolicy) Fields() []string {
	return []string{"recordId", "revision", "executionId"}
}

func (featureExecutionPolicy) Serialize(v FeatureResult) (json.RawMessage, error) {
	return json.Marshal(executionRef{RecordID: v.Record.ID, Revision: v.Record.Revision, ExecutionID: v.Execution.ID})
}

func (p featureExecutionPolicy) Restore(ctx context.Context, owner, module string, result json.RawMessage) (FeatureResult, error) {
	var ref executionRef
	if err := json.Unmarshal(result, &ref); err != nil {
		return FeatureResult{}, apperr.New(apperr.SnapshotIntegrity, "stored result is not an execution reference")
	}
	rec, err := p.k.restoreRevision(ctx, owner, module, ref.RecordID, ref.Revision)
	if err != nil {
		return FeatureResult{}, err
	}
	exec, err := p.k.db.FindExecution(ctx, owner, module, ref.RecordID, ref.ExecutionID)
	if errors.Is(err, store.ErrNotFound) {
		return FeatureResult{}, apperr.New(apperr.SnapshotIntegrity, "the stored result references execution %s of record %s, which does not exist for this owner and module %s", ref.ExecutionID, ref.RecordID, module)
	}
	if err != nil {
		return FeatureResult{}, err
	}
	return FeatureResult{Record: rec, Execution: exec}, nil
}

// commitmentReviewPolicy stores recordId + reviewId; the comment never enters the envelope.
type commitmentReviewPolicy struct{ k *Kernel }

func (commitmentReviewPolicy) Name() string     { return PolicyCommitmentReview }
func (commitmentReviewPolicy) Fields() []string { return []string{"recordId", "reviewId"} }

func (commitmentReviewPolicy) Serialize(v ReviewResult) (json.RawMessage, error) {
	return json.Marshal(reviewRef{RecordID: v.Review.RecordID, ReviewID: v.Review.ID})
}

func (p commitmentReviewPolicy) Restore(ctx context.Context, owner, module string, result json.RawMessage) (ReviewResult, error) {
	var ref reviewRef
	if err := json.Unmarshal(result, &ref); err != nil {
		return ReviewResult{}, apperr.New(apperr.SnapshotIntegrity, "stored result is not a review reference")
	}
	rv, err := p.k.db.FindReview(ctx, owner, ref.RecordID, ref.ReviewID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && rv.ModuleCode != module) {
		return ReviewResult{}, apperr.New(apperr.SnapshotIntegrity, "the stored result references review %s of record %s, which does not exist for this owner", ref.ReviewID, ref.RecordID)
	}
	if err != nil {
		return ReviewResult{}, err
	}
	return ReviewResult{Review: rv}, nil
}

// restoreRevision reads the exact referenced revision; a reference that does not resolve inside
// this owner and module fails closed.
func (k *Kernel) restoreRevision(ctx context.Context, owner, module, recordID string, revision int) (store.Record, error) {
	rec, err := k.FindRevision(ctx, owner, module, recordID, revision)
	if apperr.Is(err, apperr.RecordNotFound) {
		return store.Record{}, apperr.New(apperr.SnapshotIntegrity, "the stored result references revision %d of record %s, which does not exist for this owner and module %s", revision, recordID, module)
	}
	return rec, err
}

// FindRevision reads revision of a record of owner and module and checks its integrity (SPEC
// §6): the row matches the query, the snapshot matches the row and its parent, and the payload
// passes the JSON boundary. Any mismatch fails closed with SNAPSHOT_INTEGRITY_VIOLATION.
func (k *Kernel) FindRevision(ctx context.Context, owner, module, recordID string, revision int) (store.Record, error) {
	row, err := k.db.FindRevision(ctx, owner, module, recordID, revision)
	if errors.Is(err, store.ErrNotFound) {
		return store.Record{}, apperr.New(apperr.RecordNotFound, "record %s has no revision %d for owner %s in module %s", recordID, revision, owner, module)
	}
	if err != nil {
		return store.Record{}, err
	}
	return checkSnapshot(row, owner, module, recordID, revision)
}

func checkSnapshot(row store.RevisionWithParent, owner, module, recordID string, revision int) (store.Record, error) {
	fail := func(what string) (store.Record, error) {
		return store.Record{}, apperr.New(apperr.SnapshotIntegrity, "revision %d of record %s: %s", revision, recordID, what)
	}
	if row.OwnerID != owner || row.RecordID != recordID || row.Revision.Revision != revision {
		return fail("the row does not match the query")
	}
	if row.ParentOwner != owner || row.ParentID != recordID || row.ParentModule != module {
		return fail("the parent record does not match")
	}
	var snap store.Record
	dec := json.NewDecoder(bytesReader(row.Snapshot))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&snap); err != nil {
		return fail("the snapshot is not a record snapshot")
	}
	if snap.OwnerID != owner || snap.ModuleCode != module || snap.ID != recordID || snap.Revision != revision {
		return fail("the snapshot's ownerId/moduleCode/id/revision do not match the row and its parent")
	}
	if err := checkJSONShape("snapshot.payload", snap.Payload, 0); err != nil {
		return fail("the snapshot payload fails the JSON boundary")
	}
	return snap, nil
}
