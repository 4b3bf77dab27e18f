package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/jsonb"
	"github.com/idemwork/idemwork/model"
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
	Record model.Record
}

// FeatureResult is the result of a feature run: {record, execution}.
type FeatureResult struct {
	Record    model.Record
	Execution model.Execution
}

// ReviewResult is the result of a commitment review.
type ReviewResult struct {
	Review model.Review
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
	// by, when set, is the key whose result this restores: the execution must have been written
	// under it (a replay checks this in its own statement, ReadReplay; inspection and verify
	// restore through a policy bound to the key).
	by *writer
	// pre, when set, are the rows read ahead with the key (verify).
	pre *prefetched
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
	_, rec, err := p.k.revisionFor(ctx, p.pre, owner, module, ref.RecordID, ref.Revision)
	if err != nil {
		return FeatureResult{}, err
	}
	var exec model.Execution
	var a store.Attestation
	if e := p.pre.execution(owner, module, ref.RecordID, ref.ExecutionID); e != nil && p.pre.judged != nil {
		// Verify judged every execution's digest already: the envelope's is judged by that.
		if err := p.checkExecution(*e, ref); err != nil {
			return FeatureResult{}, err
		}
		if err := p.pre.judged.executions[owner+"\x00"+e.ID]; err != nil {
			return FeatureResult{}, err
		}
		if p.by != nil {
			if err := p.by.writtenBy("execution "+e.ID+" of record "+e.RecordID, e.IdempotencyKey, p.pre.execAttest.XID); err != nil {
				return FeatureResult{}, err
			}
		}
		return FeatureResult{Record: rec, Execution: *e}, nil
	} else if e != nil {
		exec, a = *e, p.pre.execAttest
	} else if p.pre.isOffline() {
		return FeatureResult{}, errNeedsRead
	} else {
		exec, a, err = p.k.db.FindExecutionAttested(ctx, owner, module, ref.RecordID, ref.ExecutionID)
	}
	if errors.Is(err, store.ErrNotFound) {
		return FeatureResult{}, apperr.New(apperr.SnapshotIntegrity, "the stored result references execution %s of record %s, which does not exist for this owner and module %s", ref.ExecutionID, ref.RecordID, module)
	}
	if err != nil {
		return FeatureResult{}, err
	}
	if err := p.checkAttestedExecution(exec, a, ref); err != nil {
		return FeatureResult{}, err
	}
	return FeatureResult{Record: rec, Execution: exec}, nil
}

// checkAttestedExecution is checkExecution, then the execution's digest, then (for a policy
// bound to a key) who wrote it.
func (p featureExecutionPolicy) checkAttestedExecution(e model.Execution, a store.Attestation, ref executionRef) error {
	if err := p.checkExecution(e, ref); err != nil {
		return err
	}
	if err := checkExecutionDigest(e, a); err != nil {
		return err
	}
	if p.by != nil {
		return p.by.writtenBy("execution "+e.ID+" of record "+e.RecordID, e.IdempotencyKey, a.XID)
	}
	return nil
}

// checkExecution fails closed unless the execution belongs to the envelope's record and
// revision and to the operation's feature: an envelope moved to another revision, or an
// execution rewritten to another feature, is never replayed as the first result.
func (p featureExecutionPolicy) checkExecution(e model.Execution, ref executionRef) error {
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

// boundReviewPolicy is commitmentReviewPolicy bound to the key whose result it restores: the
// review must have been written under it.
type boundReviewPolicy struct {
	commitmentReviewPolicy
	by  writer
	pre *prefetched
}

func (p boundReviewPolicy) Restore(ctx context.Context, owner, module string, result json.RawMessage) (ReviewResult, error) {
	v, err := p.restore(ctx, owner, module, result, p.pre)
	if err != nil {
		return v, err
	}
	if err := p.by.writtenBy("review "+v.Review.ID+" of record "+v.Review.RecordID, v.Review.IdempotencyKey, nil); err != nil {
		return ReviewResult{}, err
	}
	return v, nil
}

func (p commitmentReviewPolicy) Restore(ctx context.Context, owner, module string, result json.RawMessage) (ReviewResult, error) {
	return p.restore(ctx, owner, module, result, nil)
}

func (p commitmentReviewPolicy) restore(ctx context.Context, owner, module string, result json.RawMessage, pre *prefetched) (ReviewResult, error) {
	var ref reviewRef
	if err := decodeReviewRef(result, &ref); err != nil {
		return ReviewResult{}, apperr.New(apperr.SnapshotIntegrity, "stored result is not a review reference")
	}
	var rv model.Review
	var err error
	if r := pre.reviewOf(owner, ref.RecordID, ref.ReviewID); r != nil {
		rv = *r
	} else if pre.isOffline() {
		return ReviewResult{}, errNeedsRead
	} else {
		rv, err = p.k.db.FindReview(ctx, owner, ref.RecordID, ref.ReviewID)
	}
	if errors.Is(err, store.ErrNotFound) || (err == nil && rv.ModuleCode != module) {
		return ReviewResult{}, apperr.New(apperr.SnapshotIntegrity, "the stored result references review %s of record %s, which does not exist for this owner", ref.ReviewID, ref.RecordID)
	}
	if err != nil {
		return ReviewResult{}, err
	}
	return ReviewResult{Review: rv}, nil
}

// boundRecordPolicy is recordSnapshotPolicy bound to the key whose result it restores: the
// revision must have been written under that key, by the transaction that reserved it.
// Inspection and verify restore through it; a replay checks the same in ReadReplay.
type boundRecordPolicy struct {
	recordSnapshotPolicy
	by  writer
	pre *prefetched
}

func (p boundRecordPolicy) Restore(ctx context.Context, owner, module string, result json.RawMessage) (RecordResult, error) {
	var ref recordRef
	if err := decodeRecordRef(result, &ref); err != nil {
		return RecordResult{}, apperr.New(apperr.SnapshotIntegrity, "stored result is not a record reference")
	}
	row, rec, err := p.k.revisionFor(ctx, p.pre, owner, module, ref.RecordID, ref.Revision)
	if err != nil {
		return RecordResult{}, err
	}
	if err := p.by.writtenBy(revisionName(row), row.IdempotencyKey, row.Attest.XID); err != nil {
		return RecordResult{}, err
	}
	return RecordResult{Record: rec}, nil
}

// revisionName names a revision in a message: "revision 3 of record R".
func revisionName(row store.RevisionWithParent) string {
	return "revision " + strconv.Itoa(row.Revision.Revision) + " of record " + row.RecordID
}

// prefetched are the rows a key's result references, read ahead with the key row (verify reads
// a page of keys with them in one statement): a restore judges them instead of reading them
// again when they are exactly the rows it would read, and reads them itself otherwise.
type prefetched struct {
	rev        *store.RevisionWithParent
	exec       *model.Execution
	execAttest store.Attestation
	review     *model.Review
	// judged, when set, is what verify found wrong with every revision and execution in its
	// scope, checked once each: the rows above carry their identity and who wrote them only
	// (no snapshot, input, output or digest), and their content is judged by it.
	judged *judgement
	// offline: the connection is busy (verify reads its next page meanwhile), so a restore that
	// would read a row these are not fails with errNeedsRead instead, to be judged again online.
	offline bool
}

// errNeedsRead is a restore from offline prefetched rows that needs a row they do not hold.
var errNeedsRead = errors.New("kernel: the restore needs a read of the database")

func (p *prefetched) isOffline() bool { return p != nil && p.offline }

// judgement is what verify's passes over revisions and executions found wrong with them: the
// error a read of each would fail closed with (none listed: it holds).
type judgement struct {
	revisions  map[revisionKey]error
	executions map[string]error // owner "\x00" execution id
}

type revisionKey struct {
	owner, record string
	revision      int
}

// revision is the prefetched revision if it is the one FindRevision(owner, module, recordID,
// revision) would read (nil otherwise).
func (p *prefetched) revision(owner, module, recordID string, revision int) *store.RevisionWithParent {
	if p == nil || p.rev == nil {
		return nil
	}
	r := p.rev
	if r.OwnerID != owner || r.RecordID != recordID || r.Revision.Revision != revision || r.ParentOwner != owner || r.ParentID != recordID ||
		r.ParentModule != module {
		return nil
	}
	return r
}

// execution is the prefetched execution if it is the one FindExecution would read.
func (p *prefetched) execution(owner, module, recordID, id string) *model.Execution {
	if p == nil || p.exec == nil {
		return nil
	}
	e := p.exec
	if e.ID != id || e.OwnerID != owner || e.ModuleCode != module || e.RecordID != recordID {
		return nil
	}
	return e
}

// reviewOf is the prefetched review if it is the one FindReview would read.
func (p *prefetched) reviewOf(owner, recordID, id string) *model.Review {
	if p == nil || p.review == nil {
		return nil
	}
	r := p.review
	if r.ID != id || r.OwnerID != owner || r.RecordID != recordID {
		return nil
	}
	return r
}

// revisionFor is restoreRevisionRow, judging the prefetched revision when it is the one to read.
func (k *Kernel) revisionFor(ctx context.Context, pre *prefetched, owner, module, recordID string, revision int) (store.RevisionWithParent, model.Record, error) {
	if r := pre.revision(owner, module, recordID, revision); r != nil && pre.judged != nil {
		if err := pre.judged.revisions[revisionKey{owner, recordID, revision}]; err != nil {
			return *r, model.Record{}, err
		}
		return *r, model.Record{ID: recordID, OwnerID: owner, ModuleCode: module, Revision: revision}, nil
	}
	if r := pre.revision(owner, module, recordID, revision); r != nil {
		rec, err := checkAttestedSnapshot(*r, owner, module, recordID, revision)
		return *r, rec, err
	}
	if pre.isOffline() {
		return store.RevisionWithParent{}, model.Record{}, errNeedsRead
	}
	return k.restoreRevisionRow(ctx, owner, module, recordID, revision)
}

// restoreRevision reads the exact referenced revision; a reference that does not resolve inside
// this owner and module fails closed.
func (k *Kernel) restoreRevision(ctx context.Context, owner, module, recordID string, revision int) (model.Record, error) {
	_, rec, err := k.restoreRevisionRow(ctx, owner, module, recordID, revision)
	return rec, err
}

// restoreRevisionRow is restoreRevision with the row read.
func (k *Kernel) restoreRevisionRow(ctx context.Context, owner, module, recordID string, revision int) (store.RevisionWithParent, model.Record, error) {
	row, rec, err := k.findRevision(ctx, owner, module, recordID, revision)
	if apperr.Is(err, apperr.RecordNotFound) {
		return row, model.Record{}, apperr.New(apperr.SnapshotIntegrity, "the stored result references revision %d of record %s, which does not exist for this owner and module %s", revision, recordID, module)
	}
	return row, rec, err
}

// FindRevision reads revision of a record of owner and module and checks its integrity (SPEC
// §6): the row matches the query, the snapshot matches the row and its parent, and the payload
// passes the JSON boundary. Any mismatch fails closed with SNAPSHOT_INTEGRITY_VIOLATION.
//
// The revision must also be the one its digest chain says was written (issue 22): a snapshot,
// key or time changed after the write fails closed too, naming the revision.
func (k *Kernel) FindRevision(ctx context.Context, owner, module, recordID string, revision int) (model.Record, error) {
	_, rec, err := k.findRevision(ctx, owner, module, recordID, revision)
	return rec, err
}

func (k *Kernel) findRevision(ctx context.Context, owner, module, recordID string, revision int) (store.RevisionWithParent, model.Record, error) {
	row, err := k.db.FindRevision(ctx, owner, module, recordID, revision)
	if errors.Is(err, store.ErrNotFound) {
		return row, model.Record{}, apperr.New(apperr.RecordNotFound, "record %s has no revision %d for owner %s in module %s", recordID, revision, owner, module)
	}
	if err != nil {
		return row, model.Record{}, err
	}
	rec, err := checkAttestedSnapshot(row, owner, module, recordID, revision)
	return row, rec, err
}

// checkAttestedSnapshot is checkSnapshot, then the revision's digest chain.
func checkAttestedSnapshot(row store.RevisionWithParent, owner, module, recordID string, revision int) (model.Record, error) {
	rec, err := checkSnapshot(row, owner, module, recordID, revision)
	if err != nil {
		return rec, err
	}
	if err := checkRevisionChain(row); err != nil {
		return model.Record{}, err
	}
	return rec, nil
}

// decodeSnapshot reads a snapshot as the kernel writes it — each member of a record once, by its
// exact name, of its type — with json v2 (RejectUnknownMembers). Anything else reports false, and
// checkSnapshot decodes it with encoding/json as it always has: where this succeeds,
// encoding/json gives the same record (pinned by TestTheFastSnapshotDecoderAgreesWithEncodingJSON).
func decodeSnapshot(raw []byte) (model.Record, bool) {
	var rec model.Record
	return rec, jsonv2.Unmarshal(raw, &rec, jsonv2.RejectUnknownMembers(true)) == nil
}

func checkSnapshot(row store.RevisionWithParent, owner, module, recordID string, revision int) (model.Record, error) {
	fail := func(what string) (model.Record, error) {
		return model.Record{}, apperr.New(apperr.SnapshotIntegrity, "revision %d of record %s: %s", revision, recordID, what)
	}
	if row.OwnerID != owner || row.RecordID != recordID || row.Revision.Revision != revision {
		return fail("the row does not match the query")
	}
	if row.ParentOwner != owner || row.ParentID != recordID || row.ParentModule != module {
		return fail("the parent record does not match")
	}
	snap, ok := decodeSnapshot(row.Snapshot)
	if !ok {
		dec := json.NewDecoder(bytesReader(row.Snapshot))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&snap); err != nil {
			return fail("the snapshot is not a record snapshot")
		}
	}
	if snap.OwnerID != owner || snap.ModuleCode != module || snap.ID != recordID || snap.Revision != revision {
		return fail("the snapshot's ownerId/moduleCode/id/revision do not match the row and its parent")
	}
	if err := model.CheckJSONObject("snapshot.payload", snap.Payload); err != nil {
		return fail("the snapshot payload fails the JSON boundary (" + apperr.As(err).Message + ")")
	}
	return snap, nil
}

// Replays (idem.Replayer): a replay reads the key row, the referenced revision with its parent
// and (for features) the execution in one statement (store.ReadRevisionReplay,
// ReadExecutionReplay). Every check stays here: the revision read goes through checkSnapshot and
// its digest chain exactly as FindRevision's does, the execution through its digest, and what the
// result references must have been written under the replayed key by the transaction that
// reserved it (the key row's reserved_xid, read in the same statement). Anything absent or not
// matching the stored reference falls back to Restore, which fails closed as ever.

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
		if err := (writer{key: p.Key, xid: r.KeyXID}).writtenBy(revisionName(*r.Revision), r.Revision.IdempotencyKey, r.Revision.Attest.XID); err != nil {
			return RecordResult{}, false, err
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
		bound := pol
		bound.by = &writer{key: p.Key, xid: r.KeyXID}
		if err := bound.checkAttestedExecution(*e, r.ExecutionAttest, ref); err != nil {
			return FeatureResult{}, false, err
		}
		return FeatureResult{Record: rec, Execution: *e}, true, nil
	}}, nil
}

// replayedRevision checks the revision read with the key like restoreRevision does; false means
// "not found here" (the caller then runs Restore, which reports it as FindRevision would).
func replayedRevision(row *store.RevisionWithParent, p idem.ReplayParams, recordID string, revision int) (model.Record, bool, error) {
	if row == nil {
		return model.Record{}, false, nil
	}
	rec, err := checkAttestedSnapshot(*row, p.Owner, p.Module, recordID, revision)
	if err != nil {
		return model.Record{}, false, err
	}
	return rec, true, nil
}

// decodeRecordRef and its siblings read a stored result reference (the envelope guard has
// already checked that it is a flat object of ids and integers) with json v2.
func decodeRecordRef(result []byte, ref *recordRef) error { return jsonv2.Unmarshal(result, ref) }

func decodeExecutionRef(result []byte, ref *executionRef) error { return jsonv2.Unmarshal(result, ref) }

func decodeReviewRef(result []byte, ref *reviewRef) error { return jsonv2.Unmarshal(result, ref) }
