package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/jsonb"
	"github.com/idemwork/idemwork/store"
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

// The policies' Serialize write a reference as json.Marshal of its ref struct writes it (the
// envelope's guard then renders it canonically), without reflection; an id that is not valid
// UTF-8, which json.Marshal would rewrite, goes through json.Marshal (and the guard refuses it).

// recordSnapshotPolicy stores recordId + revision and restores that exact revision.
type recordSnapshotPolicy struct{ k *Kernel }

func (recordSnapshotPolicy) Name() string     { return PolicyRecordSnapshot }
func (recordSnapshotPolicy) Fields() []string { return []string{"recordId", "revision"} }

func (recordSnapshotPolicy) Serialize(v RecordResult) (json.RawMessage, error) {
	ref := recordRef{RecordID: v.Record.ID, Revision: v.Record.Revision}
	if !utf8.ValidString(ref.RecordID) {
		return json.Marshal(ref)
	}
	b := append(make([]byte, 0, 40+len(ref.RecordID)), `{"recordId":`...)
	b = append(strconv.AppendInt(append(jsonb.AppendString(b, ref.RecordID), `,"revision":`...), int64(ref.Revision), 10), '}')
	return b, nil
}

func (p recordSnapshotPolicy) Restore(ctx context.Context, owner, module string, result json.RawMessage) (RecordResult, error) {
	var ref recordRef
	if err := decodeRecordRef(result, &ref); err != nil {
		return RecordResult{}, apperr.New(apperr.SnapshotIntegrity, "stored result is not a record reference")
	}
	rec, err := p.k.restoreRevision(ctx, owner, module, ref.RecordID, ref.Revision)
	if err != nil {
		return RecordResult{}, err
	}
	return RecordResult{Record: rec}, nil
}

// featureExecutionPolicy stores recordId + revision + executionId. It is bound to the
// operation's feature: a replay restores an execution only if it is of that feature and was
// recorded at the envelope's record and revision.
type featureExecutionPolicy struct {
	k       *Kernel
	feature string
}

// featurePolicyFor is the feature policy of an operation on featureID.
func (k *Kernel) featurePolicyFor(featureID string) featureExecutionPolicy {
	return featureExecutionPolicy{k: k, feature: featureID}
}

func (featureExecutionPolicy) Name() string { return PolicyFeatureExecution }
func (featureExecutionPolicy) Fields() []string {
	return []string{"recordId", "revision", "executionId"}
}

func (featureExecutionPolicy) Serialize(v FeatureResult) (json.RawMessage, error) {
	ref := executionRef{RecordID: v.Record.ID, Revision: v.Record.Revision, ExecutionID: v.Execution.ID}
	if !utf8.ValidString(ref.RecordID) || !utf8.ValidString(ref.ExecutionID) {
		return json.Marshal(ref)
	}
	b := append(make([]byte, 0, 64+len(ref.RecordID)+len(ref.ExecutionID)), `{"recordId":`...)
	b = strconv.AppendInt(append(jsonb.AppendString(b, ref.RecordID), `,"revision":`...), int64(ref.Revision), 10)
	return append(jsonb.AppendString(append(b, `,"executionId":`...), ref.ExecutionID), '}'), nil
}

func (p featureExecutionPolicy) Restore(ctx context.Context, owner, module string, result json.RawMessage) (FeatureResult, error) {
	var ref executionRef
	if err := decodeExecutionRef(result, &ref); err != nil {
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
	if err := p.checkExecution(exec, ref); err != nil {
		return FeatureResult{}, err
	}
	return FeatureResult{Record: rec, Execution: exec}, nil
}

// checkExecution fails closed unless the execution belongs to the envelope's record and
// revision and to the operation's feature: an envelope moved to another revision, or an
// execution rewritten to another feature, is never replayed as the first result.
func (p featureExecutionPolicy) checkExecution(e store.Execution, ref executionRef) error {
	switch {
	case e.RecordID != ref.RecordID:
		return apperr.New(apperr.SnapshotIntegrity, "execution %s belongs to record %s, not to the stored result's record %s", e.ID, e.RecordID, ref.RecordID)
	case e.RecordRevision != ref.Revision:
		return apperr.New(apperr.SnapshotIntegrity, "execution %s was recorded at revision %d of record %s, but the stored result references revision %d", e.ID, e.RecordRevision, ref.RecordID, ref.Revision)
	case e.FeatureID != p.feature:
		return apperr.New(apperr.SnapshotIntegrity, "execution %s is of feature %s, but the operation runs feature %s", e.ID, e.FeatureID, p.feature)
	}
	return nil
}

// commitmentReviewPolicy stores recordId + reviewId; the comment never enters the envelope.
type commitmentReviewPolicy struct{ k *Kernel }

func (commitmentReviewPolicy) Name() string     { return PolicyCommitmentReview }
func (commitmentReviewPolicy) Fields() []string { return []string{"recordId", "reviewId"} }

func (commitmentReviewPolicy) Serialize(v ReviewResult) (json.RawMessage, error) {
	ref := reviewRef{RecordID: v.Review.RecordID, ReviewID: v.Review.ID}
	if !utf8.ValidString(ref.RecordID) || !utf8.ValidString(ref.ReviewID) {
		return json.Marshal(ref)
	}
	b := append(make([]byte, 0, 32+len(ref.RecordID)+len(ref.ReviewID)), `{"recordId":`...)
	return append(jsonb.AppendString(append(jsonb.AppendString(b, ref.RecordID), `,"reviewId":`...), ref.ReviewID), '}'), nil
}

func (p commitmentReviewPolicy) Restore(ctx context.Context, owner, module string, result json.RawMessage) (ReviewResult, error) {
	var ref reviewRef
	if err := decodeReviewRef(result, &ref); err != nil {
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
	if err := CheckJSONObject("snapshot.payload", snap.Payload); err != nil {
		return fail("the snapshot payload fails the JSON boundary (" + apperr.As(err).Message + ")")
	}
	return snap, nil
}

// Replays (idem.Replayer): a replay reads the key row, the referenced revision with its parent
// and (for features) the execution in one statement (store.ReadRevisionReplay,
// ReadExecutionReplay). Every check stays here: the revision read goes through checkSnapshot
// exactly as FindRevision's does, and anything absent or not matching the stored reference falls
// back to Restore, which fails closed as ever.

func (recordSnapshotPolicy) ReadReplay(ctx context.Context, q idem.Querier, p idem.ReplayParams) (idem.Replay[RecordResult], error) {
	r, found, err := store.ReadRevisionReplay(ctx, q, p)
	if err != nil || !found {
		return idem.Replay[RecordResult]{}, err
	}
	return idem.Replay[RecordResult]{Found: true, Key: r.Key, Restore: func(result json.RawMessage) (RecordResult, bool, error) {
		var ref recordRef
		if err := decodeRecordRef(result, &ref); err != nil {
			return RecordResult{}, false, nil
		}
		rec, ok, err := replayedRevision(r.Revision, p, ref.RecordID, ref.Revision)
		if err != nil || !ok {
			return RecordResult{}, ok, err
		}
		return RecordResult{Record: rec}, true, nil
	}}, nil
}

func (pol featureExecutionPolicy) ReadReplay(ctx context.Context, q idem.Querier, p idem.ReplayParams) (idem.Replay[FeatureResult], error) {
	r, found, err := store.ReadExecutionReplay(ctx, q, p)
	if err != nil || !found {
		return idem.Replay[FeatureResult]{}, err
	}
	return idem.Replay[FeatureResult]{Found: true, Key: r.Key, Restore: func(result json.RawMessage) (FeatureResult, bool, error) {
		var ref executionRef
		if err := decodeExecutionRef(result, &ref); err != nil {
			return FeatureResult{}, false, nil
		}
		rec, ok, err := replayedRevision(r.Revision, p, ref.RecordID, ref.Revision)
		if err != nil || !ok {
			return FeatureResult{}, ok, err
		}
		e := r.Execution
		if e == nil || e.ID != ref.ExecutionID || e.OwnerID != p.Owner || e.ModuleCode != p.Module || e.RecordID != ref.RecordID {
			// Not exactly the one FindExecution would return: Restore reads it and judges.
			return FeatureResult{}, false, nil
		}
		if err := pol.checkExecution(*e, ref); err != nil {
			return FeatureResult{}, false, err
		}
		return FeatureResult{Record: rec, Execution: *e}, true, nil
	}}, nil
}

// replayedRevision checks the revision read with the key like restoreRevision does; false means
// "not found here" (the caller then runs Restore, which reports it as FindRevision would).
func replayedRevision(row *store.RevisionWithParent, p idem.ReplayParams, recordID string, revision int) (store.Record, bool, error) {
	if row == nil {
		return store.Record{}, false, nil
	}
	rec, err := checkSnapshot(*row, p.Owner, p.Module, recordID, revision)
	if err != nil {
		return store.Record{}, false, err
	}
	return rec, true, nil
}

// storedRef is any result reference a policy stores; each policy reads its own fields.
type storedRef struct {
	recordID, executionID, reviewID string
	revision                        int
}

// decodeRef reads a stored result reference (the envelope guard has already checked that it is
// a flat object of ids and integers) through the JSON boundary's reader.
func decodeRef(result []byte) (storedRef, error) {
	var ref storedRef
	r := jsonb.NewReader(result)
	defer r.Close()
	err := r.Object(func(name []byte) (err error) {
		switch string(name) {
		case "recordId":
			ref.recordID, err = r.String()
		case "executionId":
			ref.executionID, err = r.String()
		case "reviewId":
			ref.reviewID, err = r.String()
		case "revision":
			ref.revision, err = r.Int()
		default:
			err = r.Skip()
		}
		return err
	})
	return ref, err
}

func decodeRecordRef(result []byte, ref *recordRef) error {
	r, err := decodeRef(result)
	*ref = recordRef{RecordID: r.recordID, Revision: r.revision}
	return err
}

func decodeExecutionRef(result []byte, ref *executionRef) error {
	r, err := decodeRef(result)
	*ref = executionRef{RecordID: r.recordID, Revision: r.revision, ExecutionID: r.executionID}
	return err
}

func decodeReviewRef(result []byte, ref *reviewRef) error {
	r, err := decodeRef(result)
	*ref = reviewRef{RecordID: r.recordID, ReviewID: r.reviewID}
	return err
}
