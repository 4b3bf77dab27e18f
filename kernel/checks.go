package kernel

import (
	"context"
	"errors"

	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/verifyrows"
)

// The checks `idemwork verify` (package verify) runs through the kernel: each is the very check
// a read or a replay fails closed with, so verify and a replay cannot disagree about a row.

// Judgement is what verify's passes over revisions and executions found wrong with them, read
// once each: the keys pass then judges what an envelope references by it (CheckStoredKey)
// instead of reading and checking each row again.
type Judgement struct{ j judgement }

// NewJudgement returns an empty judgement: every row holds until a pass says otherwise.
func NewJudgement() *Judgement {
	return &Judgement{judgement{revisions: map[revisionKey]error{}, executions: map[string]error{}}}
}

// Revision records what a read of a revision would fail closed with (nil: it holds).
func (j *Judgement) Revision(owner, record string, revision int, err error) {
	if err != nil {
		j.j.revisions[revisionKey{owner, record, revision}] = err
	}
}

// Execution records what a read of an execution would fail closed with (nil: it holds).
func (j *Judgement) Execution(owner, id string, err error) {
	if err != nil {
		j.j.executions[owner+"\x00"+id] = err
	}
}

// CheckStoredKey restores a stored key's envelope as a replay would (RestoreKey), judging the
// rows verify read with it (r's revision, execution and review) where they are the rows the
// restore would read. judged, when set, says what is wrong with every revision and execution in
// scope; offline, that the connection is busy: a restore that needs a row r does not hold then
// fails with an error NeedsRead reports, to be checked again online.
func (k *Kernel) CheckStoredKey(ctx context.Context, r verifyrows.KeyRow, judged *Judgement, offline bool) error {
	pre := &prefetched{rev: r.Revision, exec: r.Execution, execAttest: r.ExecutionAttest, review: r.Review, offline: offline}
	if judged != nil {
		pre.judged = &judged.j
	}
	_, _, _, err := k.restoreKey(ctx, r.OwnerID, r.Key, r.ReservedXID, r.Operation, r.Response, pre)
	return err
}

// NeedsRead reports whether err is CheckStoredKey's offline refusal: the restore needs a row
// the key's page did not bring.
func NeedsRead(err error) bool { return errors.Is(err, errNeedsRead) }

// RefersToForeignRows reports whether err is the refusal of a result that references rows its
// key did not write (verify counts it as envelope_own_rows, not envelope_restores).
func RefersToForeignRows(err error) bool { return errors.As(err, new(foreignRows)) }

// CheckSnapshot is what a read of a stored revision fails closed with first: the §6 checks of
// its snapshot against its record, module, owner and number (the record it holds when they pass).
func CheckSnapshot(row store.RevisionWithParent, module string) (model.Record, error) {
	return checkSnapshot(row, row.OwnerID, module, row.RecordID, row.Revision.Revision)
}

// CheckRevisionChain is what a read of a stored revision fails closed with next: its digest,
// chained on the revision's before it.
func CheckRevisionChain(row store.RevisionWithParent) error { return checkRevisionChain(row) }

// CheckExecution is what a read of a stored execution fails closed with: the digest of what it
// was written with, chained on its revision's.
func CheckExecution(e model.Execution, a store.Attestation) error { return checkExecutionDigest(e, a) }

// CheckPrintable is what the write boundary refuses in a title and a summary: a control
// character (but newline and tab in a summary). Verify looks for ones planted behind it.
func CheckPrintable(title, summary string) error {
	if err := checkControls("title", title, ""); err != nil {
		return err
	}
	return checkControls("summary", summary, "\n\t")
}
