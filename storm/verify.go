package storm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"idemwork/idem"
	"idemwork/kernel"
	"idemwork/store"
)

// Verified is what the database holds for the storm's owner and key after the storm, read back
// with queries (never inferred from the responses), and whether it agrees with the responses.
type Verified struct {
	// KeyStatus is the idempotency row's status: SUCCEEDED, PROCESSING, or ABSENT.
	KeyStatus string `json:"keyStatus"`
	// Operation is the operation the key is bound to in the database.
	Operation string `json:"operation,omitempty"`
	// Rows carrying the key: feature executions, record revisions and the audit events of the
	// storm's operation (not the outbox worker's delivery events, which carry the key too).
	Executions  int `json:"executions"`
	Revisions   int `json:"revisions"`
	AuditEvents int `json:"auditEvents"`
	// EarlierRows counts rows carrying the key that an earlier lifetime of it wrote: the key
	// expired and was executed again, and those rows are its past, not this storm's doing. Only
	// rows written since the current idempotency row was reserved are checked above.
	EarlierRows int `json:"earlierRows,omitempty"`
	// Envelope is the stored result reference every replay restores.
	Envelope *Reference `json:"envelope"`
	// ExecutionStatus and ExecutionMode are the key's feature execution's (an action storm):
	// SUCCEEDED/internal, BLOCKED/blocked_external (failed closed), PENDING/outbox.
	ExecutionStatus string `json:"executionStatus,omitempty"`
	ExecutionMode   string `json:"executionMode,omitempty"`
	// KeyStatusBefore is the key's status before the storm (ABSENT, SUCCEEDED, PROCESSING).
	KeyStatusBefore string `json:"keyStatusBefore"`
	// Unsettled counts the storm's sessions that still had a transaction open when the
	// database was read (after waiting for them, bounded).
	Unsettled int `json:"unsettled,omitempty"`
	// Agrees: when some request succeeded, the key succeeded with the storm's operation,
	// exactly one execution/revision (as the operation writes) and one audit event carry the
	// key, the envelope points at them, at most one request reports EXECUTED, and every
	// successful response points at the same result; when none succeeded, the storm wrote
	// nothing: the key and its rows are as they were before it. Either way every session of
	// the storm had ended when this was read.
	Agrees   bool     `json:"agrees"`
	Problems []string `json:"problems,omitempty"`
}

func (v *Verified) problem(format string, args ...any) {
	v.Problems = append(v.Problems, fmt.Sprintf(format, args...))
}

// keyState is what the database holds for the key at one moment: its row and how many rows
// of any life carry it.
type keyState struct {
	status    string // ABSENT when there is no row
	operation string
	createdAt time.Time
	updatedAt time.Time
	rows      int
}

func (k keyState) String() string {
	if k.status == "ABSENT" {
		return "ABSENT"
	}
	return fmt.Sprintf("%s since %s", k.status, k.updatedAt.UTC().Format("2006-01-02 15:04:05.000"))
}

// readKeyState reads the key's row and counts the revisions, executions and audit events of
// the storm's operation that carry it.
func readKeyState(ctx context.Context, db *store.DB, spec Spec) (keyState, error) {
	k := keyState{status: "ABSENT"}
	q := db.Q(ctx)
	owner, key := spec.Owner(), spec.Key()
	err := q.QueryRow(ctx, `SELECT status, operation, created_at, updated_at FROM idempotency_record
		WHERE owner_id = $1 AND idempotency_key = $2`, owner, key).Scan(&k.status, &k.operation, &k.createdAt, &k.updatedAt)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return k, err
	}
	err = q.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM record_revision WHERE owner_id = $1 AND idempotency_key = $2)
			+ (SELECT count(*) FROM feature_execution WHERE owner_id = $1 AND idempotency_key = $2)
			+ (SELECT count(*) FROM audit_event WHERE owner_id = $1 AND idempotency_key = $2 AND detail->>'operation' = $3)`,
		owner, key, spec.Operation()).Scan(&k.rows)
	return k, err
}

// Reference is an envelope's result reference.
type Reference struct {
	RecordID    string `json:"recordId"`
	Revision    int    `json:"revision"`
	ExecutionID string `json:"executionId,omitempty"`
}

type revisionRow struct {
	recordID string
	revision int
}

type executionRow struct {
	id, mode, status, recordID string
	revision                   int
}

// verify reads the key's rows and checks them against the responses: the result every
// success points at when some request succeeded, else that the storm wrote nothing.
func verify(ctx context.Context, db *store.DB, spec Spec, before keyState, results []Event, got []bool, successes int) Verified {
	v := Verified{KeyStatus: "ABSENT", KeyStatusBefore: before.status}
	problem := v.problem
	if successes == 0 {
		after, err := readKeyState(ctx, db, spec)
		if err != nil {
			problem("reading the key failed: %v", err)
			return v
		}
		v.KeyStatus, v.Operation = after.status, after.operation
		switch {
		case after.status != before.status || !after.updatedAt.Equal(before.updatedAt) || !after.createdAt.Equal(before.createdAt):
			problem("no request succeeded, yet the key changed: %s before the storm, %s after", before, after)
		case after.rows != before.rows:
			problem("no request succeeded, yet %d rows carrying the key were written", after.rows-before.rows)
		}
		return v
	}
	owner, key := spec.Owner(), spec.Key()

	var status, operation string
	var response []byte
	// Rows of the key's current lifetime: written at or after its reservation. Without a key row
	// every row counts (and the missing row is itself the problem reported below).
	since := time.Time{}
	err := db.Q(ctx).QueryRow(ctx, `SELECT status, operation, response, created_at FROM idempotency_record
		WHERE owner_id = $1 AND idempotency_key = $2`, owner, key).Scan(&status, &operation, &response, &since)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		since = time.Time{}
	case err != nil:
		problem("reading the key failed: %v", err)
		return v
	default:
		v.KeyStatus, v.Operation = status, operation
	}

	revs, err := collectRows(ctx, db, `SELECT record_id, revision FROM record_revision
		WHERE owner_id = $1 AND idempotency_key = $2 AND created_at >= $3 ORDER BY record_id, revision`,
		func(r pgx.Rows) (revisionRow, error) {
			var x revisionRow
			return x, r.Scan(&x.recordID, &x.revision)
		}, owner, key, since)
	if err != nil {
		problem("reading revisions failed: %v", err)
		return v
	}
	execs, err := collectRows(ctx, db, `SELECT id, mode, status, record_id, record_revision FROM feature_execution
		WHERE owner_id = $1 AND idempotency_key = $2 AND created_at >= $3 ORDER BY id`,
		func(r pgx.Rows) (executionRow, error) {
			var x executionRow
			return x, r.Scan(&x.id, &x.mode, &x.status, &x.recordID, &x.revision)
		}, owner, key, since)
	if err != nil {
		problem("reading executions failed: %v", err)
		return v
	}
	// Only the audit events the storm's operation writes (the kernel names the operation in each
	// one's detail): the outbox worker audits a delivery with the execution's key too, after the
	// storm and by its own doing.
	if err := db.Q(ctx).QueryRow(ctx, `SELECT
			(SELECT count(*) FROM audit_event WHERE owner_id = $1 AND idempotency_key = $2 AND at >= $3 AND detail->>'operation' = $4),
			(SELECT count(*) FROM record_revision WHERE owner_id = $1 AND idempotency_key = $2 AND created_at < $3)
			+ (SELECT count(*) FROM feature_execution WHERE owner_id = $1 AND idempotency_key = $2 AND created_at < $3)
			+ (SELECT count(*) FROM audit_event WHERE owner_id = $1 AND idempotency_key = $2 AND at < $3)`,
		owner, key, since, spec.Operation()).Scan(&v.AuditEvents, &v.EarlierRows); err != nil {
		problem("reading audit events failed: %v", err)
		return v
	}
	v.Revisions, v.Executions = len(revs), len(execs)
	if len(execs) == 1 {
		v.ExecutionStatus, v.ExecutionMode = execs[0].status, execs[0].mode
	}

	if response != nil {
		env, err := idem.ParseEnvelope(response)
		var ref Reference
		if err == nil && !env.Legacy {
			err = json.Unmarshal(env.Result, &ref)
		}
		if err != nil || env.Legacy {
			problem("the stored envelope is not a result reference: %s", response)
		} else {
			v.Envelope = &ref
		}
	}

	executed := 0
	for i, ev := range results {
		if got[i] && ev.Outcome == string(idem.Executed) {
			executed++
		}
	}

	switch {
	case v.KeyStatus == "ABSENT":
		problem("the database holds no idempotency row for owner %s and key %q", owner, key)
	case v.KeyStatus != "SUCCEEDED":
		problem("the key is %s in the database, not SUCCEEDED", v.KeyStatus)
	}
	if v.Operation != "" && v.Operation != spec.Operation() {
		problem("the key is bound to %s, not %s", v.Operation, spec.Operation())
	}
	if executed > 1 {
		problem("%d requests report EXECUTED for one key", executed)
	}

	wantRevisions, wantExecutions := 1, 0
	if spec.Op == OpAction {
		wantExecutions = 1
		if len(execs) == 1 && execs[0].mode != string(kernel.ModeInternal) {
			wantRevisions = 0 // blocked_external and outbox runs leave the revision where it was
		}
	}
	if v.Revisions != wantRevisions {
		problem("%d revisions carry the key, want %d", v.Revisions, wantRevisions)
	}
	if v.Executions != wantExecutions {
		problem("%d feature executions carry the key, want %d", v.Executions, wantExecutions)
	}
	if v.AuditEvents != 1 {
		problem("%d audit events carry the key, want 1", v.AuditEvents)
	}

	if ref := v.Envelope; ref != nil {
		if len(revs) == 1 && (revs[0].recordID != ref.RecordID || revs[0].revision != ref.Revision) {
			problem("the envelope references %s@%d but the key wrote revision %s@%d", ref.RecordID, ref.Revision, revs[0].recordID, revs[0].revision)
		}
		if len(execs) == 1 && (execs[0].id != ref.ExecutionID || execs[0].recordID != ref.RecordID) {
			problem("the envelope references execution %q but the key wrote %q", ref.ExecutionID, execs[0].id)
		}
		mismatched, example := 0, ""
		for i, ev := range results {
			if !got[i] || !ev.Succeeded() {
				continue
			}
			if ev.RecordID != ref.RecordID || ev.Revision != ref.Revision || ev.ExecutionID != ref.ExecutionID {
				mismatched++
				if example == "" {
					example = fmt.Sprintf("request %d (%s) returned %s@%d %s", ev.Index, ev.Outcome, ev.RecordID, ev.Revision, ev.ExecutionID)
				}
			}
		}
		if mismatched > 0 {
			problem("%d successful responses do not point at the stored result, e.g. %s", mismatched, example)
		}
	} else if v.KeyStatus == "SUCCEEDED" {
		problem("the key succeeded but its envelope could not be read")
	}

	return v
}

func collectRows[T any](ctx context.Context, db *store.DB, sql string, scan func(pgx.Rows) (T, error), args ...any) ([]T, error) {
	rows, err := db.Q(ctx).Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		x, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, rows.Err()
}
