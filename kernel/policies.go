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
	"github.com/idemwork/idemwork/store/records"
	"github.com/idemwork/idemwork/store/replay"
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

// The members of the policies' results (SPEC §5): Fields, Serialize, the reference structs and
// the replays' statements name them.
const (
	fieldRecordID    = "recordId"
	fieldRevision    = "revision"
	fieldExecutionID = "executionId"
	fieldReviewID    = "reviewId"
)

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

// One restore per policy. The rows a result references are read either with the key in one
// statement (ReadReplay, a replay's one round trip), or by their ids (Restore: inspection,
// verify, and a replay whose statement did not bring them), or ahead by verify (prefetched);
// however they were read, one function per policy — restoreRecord, restoreFeature,
// restoreReview — makes every check of them and rebuilds the result from them, so a rule of
// SPEC §5/§6 changes in one place.
//
// The replays' statements follow the references where the envelope keeps them: package idem
// says where (idem.ResultPath), this package which members, and the store only follows the
// paths it is handed.
var (
	recordReplay = replay.RevisionStatement(store.ReplayRefs{
		RecordID: idem.ResultPath(fieldRecordID), Revision: idem.ResultPath(fieldRevision)})
	featureReplay = replay.ExecutionStatement(store.ReplayRefs{
		RecordID: idem.ResultPath(fieldRecordID), Revision: idem.ResultPath(fieldRevision), ExecutionID: idem.ResultPath(fieldExecutionID)})
)

// ResultRefs are where every policy's stored result keeps the rows it references, for reads of
// keys across policies (verify's): the store follows them and never knows the envelope.
var ResultRefs = store.ReplayRefs{RecordID: idem.ResultPath(fieldRecordID), Revision: idem.ResultPath(fieldRevision),
	ExecutionID: idem.ResultPath(fieldExecutionID), ReviewID: idem.ResultPath(fieldReviewID)}

// revisionRead is the revision a reference resolved to, however it was read.
type revisionRead struct {
	// row is nil when there is none in the current owner and the route's module.
	row *store.RevisionWithParent
	// judged: verify judged the row's content already (row carries its identity and writer
	// only, no snapshot or digest); verdict is what it found wrong (nil: it holds).
	judged  bool
	verdict error
}

// executionRead is the execution a reference resolved to, as revisionRead.
type executionRead struct {
	e       *model.Execution // nil: none
	attest  store.Attestation
	judged  bool
	verdict error
}

// The policies' Serialize write a reference as json.Marshal of its ref struct writes it (the
// envelope's guard then renders it canonically), without reflection; an id that is not valid
// UTF-8, which json.Marshal would rewrite, goes through json.Marshal (and the guard refuses it).

// recordSnapshotPolicy stores recordId + revision and restores that exact revision.
type recordSnapshotPolicy struct{ k *Kernel }

func (recordSnapshotPolicy) Name() string     { return PolicyRecordSnapshot }
func (recordSnapshotPolicy) Fields() []string { return []string{fieldRecordID, fieldRevision} }

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
	return p.k.restoreRecordByID(ctx, owner, module, result, nil, nil)
}

// restoreRecordByID is the record policy's Restore: the revision read by its ids (or taken from
// pre), then restoreRecord.
func (k *Kernel) restoreRecordByID(ctx context.Context, owner, module string, result json.RawMessage, pre *prefetched, by *writer) (RecordResult, error) {
	var ref recordRef
	if err := decodeRecordRef(result, &ref); err != nil {
		return RecordResult{}, err
	}
	rev, err := k.readRevision(ctx, pre, owner, module, ref.RecordID, ref.Revision)
	if err != nil {
		return RecordResult{}, err
	}
	return restoreRecord(owner, module, ref, rev, by)
}

// restoreRecord is the record policy's one restore from the revision ref resolved to: SPEC §6's
// checks and its digest chain (checkRevision), and for a key's result (by) that the revision was
// written under the key by the transaction that reserved it.
func restoreRecord(owner, module string, ref recordRef, rev revisionRead, by *writer) (RecordResult, error) {
	rec, err := checkRevision(rev, owner, module, ref.RecordID, ref.Revision)
	if err != nil {
		return RecordResult{}, err
	}
	if by != nil {
		if err := by.writtenBy(revisionName(*rev.row), rev.row.IdempotencyKey, rev.row.Attest.XID); err != nil {
			return RecordResult{}, err
		}
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
	// under it (a replay checks this in ReadReplay; inspection and verify restore through a
	// policy bound to the key).
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
	return []string{fieldRecordID, fieldRevision, fieldExecutionID}
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

// Restore reads the revision and the execution by their ids (or takes them from p.pre), then
// restoreFeature.
func (p featureExecutionPolicy) Restore(ctx context.Context, owner, module string, result json.RawMessage) (FeatureResult, error) {
	var ref executionRef
	if err := decodeExecutionRef(result, &ref); err != nil {
		return FeatureResult{}, err
	}
	rev, err := p.k.readRevision(ctx, p.pre, owner, module, ref.RecordID, ref.Revision)
	if err != nil {
		return FeatureResult{}, err
	}
	return p.restoreFeature(owner, module, ref, rev, func() (executionRead, error) {
		return p.k.readExecution(ctx, p.pre, owner, module, ref.RecordID, ref.ExecutionID)
	})
}

// restoreFeature is the feature policy's one restore from the rows ref resolved to: the revision
// as restoreRecord checks it; then the execution, read by exec only once the revision holds:
// that it exists, belongs to the reference's record and revision and to the operation's feature
// (checkExecution), matches its digest (or verify's verdict on it), and for a key's result (p.by)
// was written under the key by the transaction that reserved it.
func (p featureExecutionPolicy) restoreFeature(owner, module string, ref executionRef, rev revisionRead,
	exec func() (executionRead, error)) (FeatureResult, error) {
	rec, err := checkRevision(rev, owner, module, ref.RecordID, ref.Revision)
	if err != nil {
		return FeatureResult{}, err
	}
	ex, err := exec()
	if err != nil {
		return FeatureResult{}, err
	}
	if ex.e == nil {
		return FeatureResult{}, apperr.New(apperr.SnapshotIntegrity, "the stored result references execution %s of record %s, which does not exist for this owner and module %s",
			ref.ExecutionID, ref.RecordID, module)
	}
	e := ex.e
	if err := p.checkExecution(*e, ref); err != nil {
		return FeatureResult{}, err
	}
	if ex.judged {
		if ex.verdict != nil {
			return FeatureResult{}, ex.verdict
		}
	} else if err := checkExecutionDigest(*e, ex.attest); err != nil {
		return FeatureResult{}, err
	}
	if p.by != nil {
		if err := p.by.writtenBy("execution "+e.ID+" of record "+e.RecordID, e.IdempotencyKey, ex.attest.XID); err != nil {
			return FeatureResult{}, err
		}
	}
	return FeatureResult{Record: rec, Execution: *e}, nil
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
func (commitmentReviewPolicy) Fields() []string { return []string{fieldRecordID, fieldReviewID} }

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
	return p.k.restoreReviewByID(ctx, owner, module, result, p.pre, &p.by)
}

func (p commitmentReviewPolicy) Restore(ctx context.Context, owner, module string, result json.RawMessage) (ReviewResult, error) {
	return p.k.restoreReviewByID(ctx, owner, module, result, nil, nil)
}

// restoreReviewByID is the review policy's Restore: the review read by its ids (or taken from
// pre), then restoreReview.
func (k *Kernel) restoreReviewByID(ctx context.Context, owner, module string, result json.RawMessage, pre *prefetched, by *writer) (ReviewResult, error) {
	var ref reviewRef
	if err := decodeReviewRef(result, &ref); err != nil {
		return ReviewResult{}, err
	}
	var rv *model.Review
	if r := pre.reviewOf(owner, ref.RecordID, ref.ReviewID); r != nil {
		rv = r
	} else if pre.isOffline() {
		return ReviewResult{}, errNeedsRead
	} else {
		r, err := records.FindReview(ctx, k.db, store.ReviewRef{Owner: owner, RecordID: ref.RecordID, ID: ref.ReviewID})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return ReviewResult{}, err
		}
		if err == nil {
			rv = &r
		}
	}
	return restoreReview(module, ref, rv, by)
}

// restoreReview is the review policy's one restore from the review ref resolved to (nil: none
// of this owner): it must be of the route's module, and for a key's result (by) written under
// the key.
func restoreReview(module string, ref reviewRef, rv *model.Review, by *writer) (ReviewResult, error) {
	if rv == nil || rv.ModuleCode != module {
		return ReviewResult{}, apperr.New(apperr.SnapshotIntegrity, "the stored result references review %s of record %s, which does not exist for this owner", ref.ReviewID, ref.RecordID)
	}
	if by != nil {
		if err := by.writtenBy("review "+rv.ID+" of record "+rv.RecordID, rv.IdempotencyKey, nil); err != nil {
			return ReviewResult{}, err
		}
	}
	return ReviewResult{Review: *rv}, nil
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
	return p.k.restoreRecordByID(ctx, owner, module, result, p.pre, &p.by)
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

// readRevision reads revision of recordID by its ids, inside owner and module: the prefetched
// row (with verify's verdict, when it judged it) when it is the one, else a read.
func (k *Kernel) readRevision(ctx context.Context, pre *prefetched, owner, module, recordID string, revision int) (revisionRead, error) {
	if r := pre.revision(owner, module, recordID, revision); r != nil {
		if pre.judged != nil {
			return revisionRead{row: r, judged: true, verdict: pre.judged.revisions[revisionKey{owner, recordID, revision}]}, nil
		}
		return revisionRead{row: r}, nil
	}
	if pre.isOffline() {
		return revisionRead{}, errNeedsRead
	}
	row, err := records.FindRevision(ctx, k.db, store.RevisionRef{Owner: owner, Module: module, RecordID: recordID, Revision: revision})
	if errors.Is(err, store.ErrNotFound) {
		return revisionRead{}, nil
	}
	if err != nil {
		return revisionRead{}, err
	}
	return revisionRead{row: &row}, nil
}

// readExecution reads execution id of recordID by its ids, inside owner and module, as
// readRevision reads a revision.
func (k *Kernel) readExecution(ctx context.Context, pre *prefetched, owner, module, recordID, id string) (executionRead, error) {
	if e := pre.execution(owner, module, recordID, id); e != nil {
		if pre.judged != nil {
			return executionRead{e: e, attest: pre.execAttest, judged: true, verdict: pre.judged.executions[owner+"\x00"+e.ID]}, nil
		}
		return executionRead{e: e, attest: pre.execAttest}, nil
	}
	if pre.isOffline() {
		return executionRead{}, errNeedsRead
	}
	e, a, err := records.FindExecutionAttested(ctx, k.db, store.ExecutionRef{Owner: owner, Module: module, RecordID: recordID, ID: id})
	if errors.Is(err, store.ErrNotFound) {
		return executionRead{}, nil
	}
	if err != nil {
		return executionRead{}, err
	}
	return executionRead{e: &e, attest: a}, nil
}

// checkRevision is every check of a revision a result references: that there is one in this
// owner and module, SPEC §6's checks of the row and its snapshot and the digest chain
// (checkAttestedSnapshot) — or verify's verdict on them, when it judged them.
func checkRevision(rev revisionRead, owner, module, recordID string, revision int) (model.Record, error) {
	switch {
	case rev.row == nil:
		return model.Record{}, apperr.New(apperr.SnapshotIntegrity, "the stored result references revision %d of record %s, which does not exist for this owner and module %s",
			revision, recordID, module)
	case rev.judged && rev.verdict != nil:
		return model.Record{}, rev.verdict
	case rev.judged:
		return model.Record{ID: recordID, OwnerID: owner, ModuleCode: module, Revision: revision}, nil
	}
	return checkAttestedSnapshot(*rev.row, owner, module, recordID, revision)
}

// FindRevision reads the revision ref names and checks its integrity (SPEC
// §6): the row matches the query, the snapshot matches the row and its parent, and the payload
// passes the JSON boundary. Any mismatch fails closed with SNAPSHOT_INTEGRITY_VIOLATION.
//
// The revision must also be the one its digest chain says was written (issue 22): a snapshot,
// key or time changed after the write fails closed too, naming the revision.
func (k *Kernel) FindRevision(ctx context.Context, ref store.RevisionRef) (model.Record, error) {
	row, err := records.FindRevision(ctx, k.db, ref)
	if errors.Is(err, store.ErrNotFound) {
		return model.Record{}, apperr.New(apperr.RecordNotFound, "record %s has no revision %d for owner %s in module %s", ref.RecordID, ref.Revision, ref.Owner, ref.Module)
	}
	if err != nil {
		return model.Record{}, err
	}
	return checkAttestedSnapshot(row, ref.Owner, ref.Module, ref.RecordID, ref.Revision)
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
// and (for features) the execution in one statement (recordReplay, featureReplay), and restores
// from them through the policy's one restore, bound to the replayed key and the transaction that
// reserved it (the key row's reserved_xid, read in the same statement): a row the statement did
// not find does not exist, and fails closed there. Only a row it found but could not hold in Go
// values (an infinite timestamp) falls back to Restore, which reads it by its ids and reports.

func (pol recordSnapshotPolicy) ReadReplay(ctx context.Context, q idem.Querier, p idem.ReplayParams) (idem.Replay[RecordResult], error) {
	r, found, err := recordReplay.ReadRevision(ctx, q, p)
	if err != nil || !found {
		return idem.Replay[RecordResult]{}, err
	}
	return idem.Replay[RecordResult]{Found: true, Key: r.Key, Restore: func(result json.RawMessage) (RecordResult, bool, error) {
		if r.RevisionUnreadable {
			return RecordResult{}, false, nil
		}
		var ref recordRef
		if err := decodeRecordRef(result, &ref); err != nil {
			return RecordResult{}, false, err
		}
		v, err := restoreRecord(p.Owner, p.Module, ref, revisionRead{row: r.Revision}, &writer{key: p.Key, xid: r.KeyXID})
		return v, err == nil, err
	}}, nil
}

func (pol featureExecutionPolicy) ReadReplay(ctx context.Context, q idem.Querier, p idem.ReplayParams) (idem.Replay[FeatureResult], error) {
	r, found, err := featureReplay.ReadExecution(ctx, q, p)
	if err != nil || !found {
		return idem.Replay[FeatureResult]{}, err
	}
	return idem.Replay[FeatureResult]{Found: true, Key: r.Key, Restore: func(result json.RawMessage) (FeatureResult, bool, error) {
		if r.RevisionUnreadable || r.ExecutionUnreadable {
			return FeatureResult{}, false, nil
		}
		var ref executionRef
		if err := decodeExecutionRef(result, &ref); err != nil {
			return FeatureResult{}, false, err
		}
		bound := pol
		bound.by = &writer{key: p.Key, xid: r.KeyXID}
		v, err := bound.restoreFeature(p.Owner, p.Module, ref, revisionRead{row: r.Revision}, func() (executionRead, error) {
			return executionRead{e: r.Execution, attest: r.ExecutionAttest}, nil
		})
		return v, err == nil, err
	}}, nil
}

// decodeRecordRef and its siblings read a stored result reference (the envelope guard has
// already checked that it is a flat object of ids and integers) with json v2.
func decodeRecordRef(result []byte, ref *recordRef) error {
	if jsonv2.Unmarshal(result, ref) != nil {
		return apperr.New(apperr.SnapshotIntegrity, "stored result is not a record reference")
	}
	return nil
}

func decodeExecutionRef(result []byte, ref *executionRef) error {
	if jsonv2.Unmarshal(result, ref) != nil {
		return apperr.New(apperr.SnapshotIntegrity, "stored result is not an execution reference")
	}
	return nil
}

func decodeReviewRef(result []byte, ref *reviewRef) error {
	if jsonv2.Unmarshal(result, ref) != nil {
		return apperr.New(apperr.SnapshotIntegrity, "stored result is not a review reference")
	}
	return nil
}
