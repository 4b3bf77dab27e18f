package storm

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/stormrows"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// unread records that step could not read the database: the storm is not verified. The reason
// is coded and worded as every answer is (store.TranslateError), never the driver's text.
func unread(v *stormtypes.Verified, step string, err error) {
	if v.Unread != nil {
		return
	}
	ae := apperr.As(store.TranslateError(fmt.Errorf("%s: %w", step, err)))
	v.Unread = &stormtypes.Unread{Code: string(ae.Code), Message: ae.Message}
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
func readKeyState(ctx context.Context, db *store.DB, spec stormtypes.Spec) (keyState, error) {
	k := keyState{status: "ABSENT"}
	owner, key := spec.Owner(), spec.Key()
	row, err := stormrows.ReadKeyState(ctx, db, owner, key)
	if err != nil {
		return k, err
	}
	if row.Found {
		k.status, k.operation, k.createdAt, k.updatedAt = row.Status, row.Operation, row.CreatedAt, row.UpdatedAt
	}
	k.rows, err = stormrows.CountKeyRows(ctx, db, stormrows.KeyOperation{Owner: owner, Key: key, Operation: spec.Operation()})
	return k, err
}

// verify reads the key's rows and checks them against the responses: the result every
// success points at when some request succeeded, else that the storm wrote nothing.
func verify(ctx context.Context, db *store.DB, spec stormtypes.Spec, before keyState, results []stormtypes.Event, got []bool, successes int) stormtypes.Verified {
	v := stormtypes.Verified{KeyStatus: "ABSENT", KeyStatusBefore: before.status}
	problem := v.AddProblem
	if successes == 0 {
		after, err := readKeyState(ctx, db, spec)
		if err != nil {
			unread(&v, "read the key", err)
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

	// Rows of the key's current lifetime: written at or after its reservation. Without a key row
	// every row counts (and the missing row is itself the problem reported below).
	row, err := stormrows.ReadKeyState(ctx, db, owner, key)
	if err != nil {
		unread(&v, "read the key", err)
		return v
	}
	since, response := row.CreatedAt, row.Response
	if row.Found {
		v.KeyStatus, v.Operation = row.Status, row.Operation
	}

	revs, err := stormrows.KeyRevisionsSince(ctx, db, owner, key, since)
	if err != nil {
		unread(&v, "read the revisions", err)
		return v
	}
	execs, err := stormrows.KeyExecutionsSince(ctx, db, owner, key, since)
	if err != nil {
		unread(&v, "read the executions", err)
		return v
	}
	// Only the audit events the storm's operation writes (the kernel names the operation in each
	// one's detail): the outbox worker audits a delivery with the execution's key too, after the
	// storm and by its own doing.
	if v.AuditEvents, v.EarlierRows, err = stormrows.KeyAuditSince(ctx, db, stormrows.KeyOperation{Owner: owner, Key: key, Operation: spec.Operation()}, since); err != nil {
		unread(&v, "read the audit events", err)
		return v
	}
	v.Revisions, v.Executions = len(revs), len(execs)
	if len(execs) == 1 {
		v.ExecutionStatus, v.ExecutionMode = execs[0].Status, execs[0].Mode
	}

	if response != nil {
		env, err := idemtype.ParseEnvelope(response)
		var ref stormtypes.Reference
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
		if got[i] && ev.Outcome == string(idemtype.Executed) {
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
	if spec.Op == stormtypes.OpAction {
		wantExecutions = 1
		if len(execs) == 1 && execs[0].Mode != string(kernel.ModeInternal) {
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
		if len(revs) == 1 && (revs[0].RecordID != ref.RecordID || revs[0].Revision != ref.Revision) {
			problem("the envelope references %s@%d but the key wrote revision %s@%d", ref.RecordID, ref.Revision, revs[0].RecordID, revs[0].Revision)
		}
		if len(execs) == 1 && (execs[0].ID != ref.ExecutionID || execs[0].RecordID != ref.RecordID) {
			problem("the envelope references execution %q but the key wrote %q", ref.ExecutionID, execs[0].ID)
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
