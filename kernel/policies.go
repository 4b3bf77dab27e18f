package kernel

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5/pgtype"

	"idemwork/apperr"
	"idemwork/jsonb"
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
	return json.Marshal(executionRef{RecordID: v.Record.ID, Revision: v.Record.Revision, ExecutionID: v.Execution.ID})
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
	return json.Marshal(reviewRef{RecordID: v.Review.RecordID, ReviewID: v.Review.ID})
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

// Prefetch (idem.Prefetcher): a replay reads the key row, the referenced revision with its
// parent and (for features) the execution in one statement. Every check stays in Go: the
// prefetched revision goes through checkSnapshot exactly as FindRevision's does, and anything
// absent or not matching the stored reference falls back to Restore, which fails closed as ever.

// pfRevision is safe on any stored result: a revision that is not a small non-negative integer
// joins nothing instead of failing the cast.
const pfRevision = `(CASE WHEN k.response->'result'->>'revision' ~ '^[0-9]{1,9}$' THEN (k.response->'result'->>'revision')::int END)`

// Each prefetched row is read by a LATERAL subquery kept apart from the join tree (OFFSET 0): it
// runs once for the key row with the columns of a unique key bound by equality. Flattened into
// one join, a generic plan cached while the tables were small read the parent through the
// (owner_id, module_code) prefix and filtered on id: a scan of all the owner's records of that
// module on every replay, until the next ANALYZE replanned it. (With tiny statistics the
// execution may still be found through its record's index, (owner_id, record_id): a scan of
// one record's executions at worst.)
const (
	pfRevisionColumns = `pf_rv.owner_id, pf_rv.record_id, pf_rv.revision, pf_rv.snapshot, pf_rv.idempotency_key, pf_rv.created_at,
		pf_rv.parent_owner, pf_rv.parent_id, pf_rv.parent_module`
	pfRevisionJoins = ` LEFT JOIN LATERAL (SELECT rv.owner_id, rv.record_id, rv.revision, rv.snapshot, rv.idempotency_key, rv.created_at,
				p.owner_id AS parent_owner, p.id AS parent_id, p.module_code AS parent_module
			FROM record_revision rv JOIN record p ON p.owner_id = rv.owner_id AND p.id = rv.record_id AND p.module_code = $3
			WHERE rv.owner_id = k.owner_id AND rv.record_id = k.response->'result'->>'recordId' AND rv.revision = ` + pfRevision + `
			OFFSET 0) pf_rv ON true`
	pfExecutionColumns = `pf_e.id, pf_e.owner_id, pf_e.module_code, pf_e.record_id, pf_e.feature_id, pf_e.mode, pf_e.status,
		pf_e.record_revision, pf_e.input, pf_e.output, pf_e.idempotency_key, pf_e.created_at, pf_e.updated_at`
	pfExecutionJoins = ` LEFT JOIN LATERAL (SELECT e.id, e.owner_id, e.module_code, e.record_id, e.feature_id, e.mode, e.status,
				e.record_revision, e.input, e.output, e.idempotency_key, e.created_at, e.updated_at
			FROM feature_execution e
			WHERE e.owner_id = k.owner_id AND e.id = k.response->'result'->>'executionId' AND e.module_code = $3
				AND e.record_id = k.response->'result'->>'recordId'
			OFFSET 0) pf_e ON true`
)

// pfRevisionRow receives the prefetched revision and parent (all NULL when the join found none).
// pgtype values, not pointers: pgx scans them without reflection or a pointer allocation.
type pfRevisionRow struct {
	ownerID, recordID           pgtype.Text
	revision                    pgtype.Int4
	snapshot                    []byte
	key                         pgtype.Text
	createdAt                   pgtype.Timestamptz
	parentOwner, parentID, pMod pgtype.Text
}

func (r *pfRevisionRow) dest() []any {
	return []any{&r.ownerID, &r.recordID, &r.revision, &r.snapshot, &r.key, &r.createdAt, &r.parentOwner, &r.parentID, &r.pMod}
}

// textPtr is the *string a nullable text column scans into.
func textPtr(t pgtype.Text) *string {
	if !t.Valid {
		return nil
	}
	s := t.String
	return &s
}

// restore checks the prefetched revision like restoreRevision does; false means "not found
// here" (the caller then runs Restore, which reports it as FindRevision would).
func (r *pfRevisionRow) restore(owner, module, recordID string, revision int) (store.Record, bool, error) {
	if !r.ownerID.Valid || !r.recordID.Valid || !r.revision.Valid || !r.createdAt.Valid ||
		!r.parentOwner.Valid || !r.parentID.Valid || !r.pMod.Valid || r.createdAt.InfinityModifier != pgtype.Finite {
		// An infinite timestamp does not fit a time.Time: Restore reads it again and fails there.
		return store.Record{}, false, nil
	}
	row := store.RevisionWithParent{
		Revision: store.Revision{OwnerID: r.ownerID.String, RecordID: r.recordID.String, Revision: int(r.revision.Int32), Snapshot: r.snapshot,
			IdempotencyKey: textPtr(r.key), CreatedAt: r.createdAt.Time},
		ParentOwner: r.parentOwner.String, ParentID: r.parentID.String, ParentModule: r.pMod.String}
	rec, err := checkSnapshot(row, owner, module, recordID, revision)
	if err != nil {
		return store.Record{}, false, err
	}
	return rec, true, nil
}

type pfExecutionRow struct {
	id, ownerID, module, recordID, featureID, mode, status pgtype.Text
	recordRevision                                         pgtype.Int4
	input, output                                          []byte
	key                                                    pgtype.Text
	createdAt, updatedAt                                   pgtype.Timestamptz
}

func (e *pfExecutionRow) dest() []any {
	return []any{&e.id, &e.ownerID, &e.module, &e.recordID, &e.featureID, &e.mode, &e.status, &e.recordRevision,
		&e.input, &e.output, &e.key, &e.createdAt, &e.updatedAt}
}

// execution is the prefetched row when it is exactly the one FindExecution would return.
func (e *pfExecutionRow) execution(owner, module, recordID, id string) (store.Execution, bool) {
	if !e.id.Valid || !e.ownerID.Valid || !e.module.Valid || !e.recordID.Valid || !e.featureID.Valid || !e.mode.Valid ||
		!e.status.Valid || !e.recordRevision.Valid || !e.createdAt.Valid || !e.updatedAt.Valid ||
		e.createdAt.InfinityModifier != pgtype.Finite || e.updatedAt.InfinityModifier != pgtype.Finite {
		return store.Execution{}, false
	}
	if e.id.String != id || e.ownerID.String != owner || e.module.String != module || e.recordID.String != recordID {
		return store.Execution{}, false
	}
	return store.Execution{ID: e.id.String, OwnerID: e.ownerID.String, ModuleCode: e.module.String, RecordID: e.recordID.String,
		FeatureID: e.featureID.String, Mode: e.mode.String, Status: e.status.String, RecordRevision: int(e.recordRevision.Int32),
		Input: e.input, Output: e.output, IdempotencyKey: textPtr(e.key), CreatedAt: e.createdAt.Time, UpdatedAt: e.updatedAt.Time}, true
}

func (recordSnapshotPolicy) PrefetchSQL() (string, string) { return pfRevisionColumns, pfRevisionJoins }

func (recordSnapshotPolicy) NewPrefetch() ([]any, func(owner, module string, result json.RawMessage) (RecordResult, bool, error)) {
	r := &pfRevisionRow{}
	return r.dest(), func(owner, module string, result json.RawMessage) (RecordResult, bool, error) {
		var ref recordRef
		if err := decodeRecordRef(result, &ref); err != nil {
			return RecordResult{}, false, nil
		}
		rec, ok, err := r.restore(owner, module, ref.RecordID, ref.Revision)
		if err != nil || !ok {
			return RecordResult{}, ok, err
		}
		return RecordResult{Record: rec}, true, nil
	}
}

func (featureExecutionPolicy) PrefetchSQL() (string, string) {
	return pfRevisionColumns + ", " + pfExecutionColumns, pfRevisionJoins + pfExecutionJoins
}

func (p featureExecutionPolicy) NewPrefetch() ([]any, func(owner, module string, result json.RawMessage) (FeatureResult, bool, error)) {
	r := &pfRevisionRow{}
	e := &pfExecutionRow{}
	return append(r.dest(), e.dest()...), func(owner, module string, result json.RawMessage) (FeatureResult, bool, error) {
		var ref executionRef
		if err := decodeExecutionRef(result, &ref); err != nil {
			return FeatureResult{}, false, nil
		}
		rec, ok, err := r.restore(owner, module, ref.RecordID, ref.Revision)
		if err != nil || !ok {
			return FeatureResult{}, ok, err
		}
		exec, ok := e.execution(owner, module, ref.RecordID, ref.ExecutionID)
		if !ok {
			return FeatureResult{}, false, nil
		}
		if err := p.checkExecution(exec, ref); err != nil {
			return FeatureResult{}, false, err
		}
		return FeatureResult{Record: rec, Execution: exec}, true, nil
	}
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
