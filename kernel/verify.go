package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/store"
)

// Invariants of the stored rows (SPEC §4, §6, §7), checked by `idemwork verify` and the TUI's
// Verify view. Each has a name, a count of violations and up to MaxExamples examples.
const (
	InvEnvelopeRestores      = "envelope_restores"
	InvProcessingPastExpiry  = "processing_past_expiry"
	InvRevisionsDense        = "revisions_dense"
	InvRecordIsLatest        = "record_is_latest_revision"
	InvSnapshotConsistent    = "snapshot_consistent"
	InvTextPrintable         = "text_printable"
	InvRevisionAudited       = "revision_audited"
	InvExecutionHasRecord    = "execution_has_record"
	InvExecutionAudited      = "execution_audited"
	InvOutboxAgrees          = "outbox_agrees"
	InvOutboxSettledOnce     = "outbox_settled_once"
	InvNoSecrets             = "no_secrets"
	MaxExamples              = 10
	DefaultVerifyBatch       = 500
	CodeInvariantViolations  = apperr.Code("INVARIANT_VIOLATIONS")
	verifyRevisionBatchShare = 4 // revisions carry whole snapshots: pages of a quarter the size
)

// invariantDescriptions says what each invariant requires, in the order reports list them.
var invariantDescriptions = []struct{ name, text string }{
	{InvEnvelopeRestores, "every SUCCEEDED envelope parses, passes its policy's whitelist and restores: the exact revision, an execution of the same record, feature and revision, inside its owner and module"},
	{InvProcessingPastExpiry, "no committed PROCESSING row is past its expiry (the reaper removes them)"},
	{InvRevisionsDense, "a record's revisions are exactly 1..N with N = record.revision"},
	{InvRecordIsLatest, "a record row is its latest revision's snapshot (title, summary, payload)"},
	{InvSnapshotConsistent, "every revision has its record and passes the §6 snapshot checks (ownerId, moduleCode, id, revision, JSON boundary)"},
	{InvTextPrintable, "no record title holds a control character, and no summary one but newline and tab, in its row or in a revision's snapshot (writes refuse them: an ESC starts a terminal sequence)"},
	{InvRevisionAudited, "every revision has an audit event"},
	{InvExecutionHasRecord, "every execution has its record, in its module, at the revision it was recorded at"},
	{InvExecutionAudited, "every execution has exactly one audit event of its run"},
	{InvOutboxAgrees, "every outbox execution has exactly one message, every message an outbox execution, and their statuses agree"},
	{InvOutboxSettledOnce, "a settled outbox execution has exactly one DELIVERED or FAILED audit event, matching its status; a pending one none"},
	{InvNoSecrets, "no envelope, audit detail or snapshot holds a bearer token or a connection string, and no envelope or audit detail MEM-001 content"},
}

type verifier struct {
	k      *Kernel
	opts   VerifyOptions
	rep    *InvariantReport
	byName map[string]*Invariant
}

func (v *verifier) violate(name string, ex Violation) {
	inv := v.byName[name]
	inv.Count++
	if len(inv.Examples) < MaxExamples {
		inv.Examples = append(inv.Examples, ex)
	}
}

// Patterns of secrets that must never be stored: a bearer credential and connection strings
// (URL or key=value with a password).
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}`),
	regexp.MustCompile(`(?i)\bpostgres(?:ql)?://\S`),
	regexp.MustCompile(`(?i)\b(?:password|passfile|sslpassword)\s*=`),
}

// memContentFields are MEM-001's content fields: an envelope or an audit detail never names them.
var memContentFields = []string{`"originalContent"`, `"currentContent"`}

// secretIn names the first secret text holds ("" when none). withContent also looks for
// MEM-001 content: its field names, and the given contents themselves.
func (v *verifier) secretIn(text string, withContent bool, contents []string) string {
	for _, re := range secretPatterns {
		if loc := re.FindStringIndex(text); loc != nil {
			return "holds what looks like a secret: " + redact(text[loc[0]:loc[1]])
		}
	}
	for _, s := range v.opts.Secrets {
		if len(s) >= 8 && strings.Contains(text, s) {
			return "holds a configured bearer token: " + redact(s)
		}
	}
	if withContent {
		for _, f := range memContentFields {
			if strings.Contains(text, f) {
				return "names MEM-001 content (" + strings.Trim(f, `"`) + ")"
			}
		}
		for _, c := range contents {
			// As JSON renders it inside a string; short contents would match by chance.
			enc, _ := json.Marshal(c)
			if inner := string(enc[1 : len(enc)-1]); len(inner) >= 12 && strings.Contains(text, inner) {
				return "holds the record's MEM-001 content"
			}
		}
	}
	return ""
}

// redact shows enough of a secret to find it, never the whole of it.
func redact(s string) string {
	if len(s) <= 10 {
		return s[:min(len(s), 3)] + "…"
	}
	return s[:10] + "…"
}

// VerifyInvariants checks every invariant over the stored rows of one owner or of all, in
// keyset pages inside one read-only snapshot. It never writes; it works on a read-only session.
func (k *Kernel) VerifyInvariants(ctx context.Context, opts VerifyOptions) (InvariantReport, error) {
	start := time.Now()
	if opts.Owner != "" {
		if err := idemtype.ValidateOwner(opts.Owner); err != nil {
			return InvariantReport{}, err
		}
	}
	if opts.Batch <= 0 {
		opts.Batch = DefaultVerifyBatch
	}
	if opts.Now.IsZero() {
		opts.Now = k.runner.Clock().Now()
	}
	rep := InvariantReport{Owner: opts.Owner, Checked: map[string]int64{}}
	v := &verifier{k: k, opts: opts, rep: &rep, byName: map[string]*Invariant{}}
	for _, d := range invariantDescriptions {
		rep.Invariants = append(rep.Invariants, Invariant{Name: d.name, Description: d.text, Examples: []Violation{}})
	}
	for i := range rep.Invariants {
		v.byName[rep.Invariants[i].Name] = &rep.Invariants[i]
	}
	err := k.db.ReadSnapshot(ctx, func(ctx context.Context) error {
		for _, step := range []func(context.Context) error{v.keys, v.records, v.revisions, v.executions, v.outbox, v.audit} {
			if err := step(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return InvariantReport{}, err
	}
	for _, inv := range rep.Invariants {
		rep.Violations += inv.Count
	}
	rep.OK = rep.Violations == 0
	rep.TookMs = float64(time.Since(start).Microseconds()) / 1000
	return rep, nil
}

// pages reads a table page by page, each page starting after the last row of the one before.
func pages[T interface{ Cursor() store.VerifyCursor }](ctx context.Context, v *verifier, table string, limit int,
	read func(ctx context.Context, p store.VerifyPage) ([]T, error), check func(ctx context.Context, row T)) error {
	p := store.VerifyPage{Owner: v.opts.Owner, Limit: max(limit, 1)}
	for {
		rows, err := read(ctx, p)
		if err != nil {
			return err
		}
		v.rep.Batches++
		v.rep.Checked[table] += int64(len(rows))
		for _, r := range rows {
			check(ctx, r)
		}
		if len(rows) < p.Limit {
			return nil
		}
		p.After = rows[len(rows)-1].Cursor()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (v *verifier) keys(ctx context.Context) error {
	return pages(ctx, v, "keys", v.opts.Batch, v.k.db.VerifyKeys,
		func(ctx context.Context, r store.VerifyKeyRow) {
			ex := Violation{Owner: r.OwnerID, Key: r.Key}
			if r.Status == "PROCESSING" {
				if !r.ExpiresAt.After(v.opts.Now) {
					ex.Detail = fmt.Sprintf("a committed PROCESSING row (a request that never finished) expired at %s and is still stored", r.ExpiresAt.UTC().Format(time.RFC3339))
					v.violate(InvProcessingPastExpiry, ex)
				}
				return
			}
			if s := v.secretIn(string(r.Response), true, nil); s != "" {
				ex.Detail = "the envelope " + s
				v.violate(InvNoSecrets, ex)
			}
			env, err := idemtype.ParseEnvelope(r.Response)
			if err == nil && env.Legacy {
				if r.Operation != OpLegacyIdentityCreate {
					ex.Detail = "a raw-json-v1 receipt outside identity:create (" + r.Operation + ")"
					v.violate(InvEnvelopeRestores, ex)
				}
				return // a legacy receipt is readable only; it is never restored
			}
			if err == nil {
				_, _, _, err = v.k.RestoreKey(ctx, r.OwnerID, r.Operation, r.Response)
			}
			if err != nil {
				ex.Detail = fmt.Sprintf("%s: %s", apperr.As(err).Code, apperr.As(err).Message)
				v.violate(InvEnvelopeRestores, ex)
			}
		})
}

func (v *verifier) records(ctx context.Context) error {
	return pages(ctx, v, "records", v.opts.Batch, v.k.db.VerifyRecords,
		func(_ context.Context, r store.VerifyRecordRow) {
			ex := Violation{Owner: r.OwnerID, Record: r.ID}
			if r.Revisions != r.Revision || r.MinRevision != 1 || r.MaxRevision != r.Revision {
				ex.Detail = fmt.Sprintf("record.revision is %d but it has %d revision(s) numbered %d..%d", r.Revision, r.Revisions, r.MinRevision, r.MaxRevision)
				v.violate(InvRevisionsDense, ex)
			}
			if !r.LatestMatches {
				ex.Detail = fmt.Sprintf("the row differs from revision %d's snapshot (or that revision is missing)", r.Revision)
				v.violate(InvRecordIsLatest, ex)
			}
			v.printable(Violation{Owner: r.OwnerID, Record: r.ID}, "the row's", r.Title, r.Summary)
		})
}

// printable flags a title or summary holding a control character the write boundary refuses
// (CheckTitle, CheckSummary): planted behind the kernel's back, it is damage, and Verify is where
// it is looked for. where says whose text it is ("the row's", "the snapshot's").
func (v *verifier) printable(ex Violation, where, title, summary string) {
	for _, err := range []error{checkControls("title", title, ""), checkControls("summary", summary, "\n\t")} {
		if err != nil {
			ex.Detail = where + " " + apperr.As(err).Message
			v.violate(InvTextPrintable, ex)
			return
		}
	}
}

func (v *verifier) revisions(ctx context.Context) error {
	return pages(ctx, v, "revisions", v.opts.Batch/verifyRevisionBatchShare, v.k.db.VerifyRevisions,
		func(_ context.Context, r store.VerifyRevisionRow) {
			ex := Violation{Owner: r.OwnerID, Record: r.RecordID, Revision: r.Revision.Revision}
			switch {
			case !r.HasParent:
				ex.Detail = "the revision's record does not exist"
				v.violate(InvSnapshotConsistent, ex)
			default:
				snap, err := checkSnapshot(r.RevisionWithParent, r.OwnerID, r.ParentModule, r.RecordID, r.Revision.Revision)
				if err != nil {
					ex.Detail = apperr.As(err).Message
					v.violate(InvSnapshotConsistent, ex)
				} else {
					v.printable(ex, "the snapshot's", snap.Title, snap.Summary)
				}
			}
			if !r.Audited {
				ex.Detail = "no audit event names this revision"
				v.violate(InvRevisionAudited, ex)
			}
			if s := v.secretIn(string(r.Snapshot), false, nil); s != "" {
				ex.Detail = "the snapshot " + s
				v.violate(InvNoSecrets, ex)
			}
		})
}

func (v *verifier) executions(ctx context.Context) error {
	return pages(ctx, v, "executions", v.opts.Batch, v.k.db.VerifyExecutions,
		func(_ context.Context, r store.VerifyExecutionRow) {
			ex := Violation{Owner: r.OwnerID, Record: r.RecordID, Execution: r.ID}
			switch {
			case !r.HasRecord:
				ex.Detail = fmt.Sprintf("execution of %s %s: the record does not exist in its module", r.ModuleCode, r.FeatureID)
				v.violate(InvExecutionHasRecord, ex)
			case !r.AtRevision:
				ex.Detail = fmt.Sprintf("recorded at revision %d, which the record does not have", r.RecordRevision)
				v.violate(InvExecutionHasRecord, ex)
			}
			if r.RunAudits != 1 {
				ex.Detail = fmt.Sprintf("%d audit events of its run (FEATURE_%s_EXECUTED/BLOCKED/QUEUED), want 1", r.RunAudits, r.FeatureID)
				v.violate(InvExecutionAudited, ex)
			}
			if r.Mode != string(ModeOutbox) {
				if r.SettleAudits > 0 {
					ex.Detail = fmt.Sprintf("a %s execution with %d outbox settle audit event(s)", r.Mode, r.SettleAudits)
					v.violate(InvOutboxSettledOnce, ex)
				}
				return // a message of a non-outbox execution is reported from the message's side
			}
			if r.Messages != 1 {
				ex.Detail = fmt.Sprintf("an outbox execution with %d outbox message(s), want 1", r.Messages)
				v.violate(InvOutboxAgrees, ex)
			}
			switch r.Status {
			case "PENDING":
				if r.SettleAudits != 0 {
					ex.Detail = fmt.Sprintf("PENDING but %d settle audit event(s) (%s)", r.SettleAudits, r.SettledAs)
					v.violate(InvOutboxSettledOnce, ex)
				}
			case "DELIVERED", "FAILED":
				if want := store.FeatureAction(r.FeatureID, r.Status); r.SettleAudits != 1 || r.SettledAs != want {
					ex.Detail = fmt.Sprintf("%s with %d settle audit event(s), want exactly one %s", r.Status, r.SettleAudits, want)
					v.violate(InvOutboxSettledOnce, ex)
				}
			default:
				ex.Detail = "an outbox execution in status " + r.Status
				v.violate(InvOutboxAgrees, ex)
			}
		})
}

func (v *verifier) outbox(ctx context.Context) error {
	return pages(ctx, v, "outboxMessages", v.opts.Batch, v.k.db.VerifyOutbox,
		func(_ context.Context, r store.VerifyOutboxRow) {
			ex := Violation{Owner: r.OwnerID, Message: r.ID, Execution: r.ExecutionID}
			switch {
			case !r.HasExecution:
				ex.Detail = "the message's execution does not exist"
			case r.ExecutionMode != string(ModeOutbox):
				ex.Detail = "the message belongs to a " + r.ExecutionMode + " execution"
			case r.Status != r.ExecutionStatus:
				ex.Detail = fmt.Sprintf("the message is %s but its execution is %s", r.Status, r.ExecutionStatus)
			default:
				return
			}
			v.violate(InvOutboxAgrees, ex)
		})
}

func (v *verifier) audit(ctx context.Context) error {
	return pages(ctx, v, "auditEvents", v.opts.Batch*2, v.k.db.VerifyAudit,
		func(_ context.Context, r store.VerifyAuditRow) {
			if s := v.secretIn(r.Detail, true, r.Contents); s != "" {
				ex := Violation{Owner: r.OwnerID, Audit: r.ID, Detail: r.Action + ": the detail " + s}
				if r.RecordID != nil {
					ex.Record = *r.RecordID
				}
				v.violate(InvNoSecrets, ex)
			}
		})
}
