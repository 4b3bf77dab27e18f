package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/verifyrows"
)

// Invariants of the stored rows (SPEC §4, §6, §7; issue 22), checked by `idemwork verify` and the
// TUI's Verify view. Each has a name, a count of violations and up to MaxExamples examples.
const (
	InvEnvelopeRestores     = "envelope_restores"
	InvEnvelopeOwnRows      = "envelope_own_rows"
	InvProcessingPastExpiry = "processing_past_expiry"
	InvRevisionsDense       = "revisions_dense"
	InvRecordIsLatest       = "record_is_latest_revision"
	InvSnapshotConsistent   = "snapshot_consistent"
	InvRevisionChain        = "revision_chain"
	InvExecutionAttested    = "execution_attested"
	InvTextPrintable        = "text_printable"
	InvRevisionAudited      = "revision_audited"
	InvExecutionHasRecord   = "execution_has_record"
	InvExecutionAudited     = "execution_audited"
	InvKeyRowsOnce          = "key_rows_once"
	InvKeyRunsOnce          = "key_runs_once"
	InvOutboxAgrees         = "outbox_agrees"
	InvOutboxSettledOnce    = "outbox_settled_once"
	InvNoSecrets            = "no_secrets"
	MaxExamples             = 10
	DefaultVerifyBatch      = 500
	CodeInvariantViolations = apperr.Code("INVARIANT_VIOLATIONS")
	// CodeVerifyCancelled is a verify cut short (ctrl+c, the view's ctrl+x): no verdict.
	CodeVerifyCancelled      = apperr.Code("CANCELLED")
	verifyRevisionBatchShare = 4 // revisions carry whole snapshots: pages of a quarter the size
)

// invariantDescriptions says what each invariant requires, in the order reports list them.
var invariantDescriptions = []struct{ name, text string }{
	{InvEnvelopeRestores, "every SUCCEEDED envelope parses, passes its policy's whitelist and restores as a replay would: the exact revision, an execution of the same record, feature and revision, inside its owner and module, each matching its digest"},
	{InvEnvelopeOwnRows, "every SUCCEEDED envelope references rows written under its own key, by the transaction that reserved it (where the rows record one), and a create's its revision 1"},
	{InvProcessingPastExpiry, "no committed PROCESSING row is past its expiry (the reaper removes them)"},
	{InvRevisionsDense, "a record's revisions are exactly 1..N with N = record.revision"},
	{InvRecordIsLatest, "a record row is its latest revision's snapshot (title, summary, payload)"},
	{InvSnapshotConsistent, "every revision has its record and passes the §6 snapshot checks (ownerId, moduleCode, id, revision, JSON boundary)"},
	{InvRevisionChain, "every revision carries digest = H(the previous revision's digest, its canonical document: time, key, transaction, snapshot): a record's chain is unbroken from revision 1"},
	{InvExecutionAttested, "every execution carries digest = H(its revision's digest, its canonical document: time, key, transaction, input, output, status as written)"},
	{InvTextPrintable, "no record title holds a control character, and no summary one but newline and tab, in its row or in a revision's snapshot (writes refuse them: an ESC starts a terminal sequence)"},
	{InvRevisionAudited, "every revision has exactly one audit event of the write that wrote it (RECORD_CREATED, RECORD_PATCHED or FEATURE_<id>_EXECUTED)"},
	{InvExecutionHasRecord, "every execution has its record, in its module, at the revision it was recorded at"},
	{InvExecutionAudited, "every execution has exactly one audit event of its run"},
	{InvKeyRowsOnce, "each transaction that ran under a key wrote one run of the shape its audit event names (one revision for a create or patch, one execution for a feature, …, one audit event), and a PROCESSING key's transaction wrote nothing"},
	{InvKeyRunsOnce, "a key's transactions ran one after another's expiry, as the earlier one recorded it: two runs without an expiry between them ran twice"},
	{InvOutboxAgrees, "every outbox execution has exactly one message, every message an outbox execution of its key, and their statuses agree"},
	{InvOutboxSettledOnce, "a settled outbox execution has exactly one DELIVERED or FAILED audit event, matching its status; a pending one none"},
	{InvNoSecrets, "what idemwork itself writes — envelopes, audit details, outbox payload references — holds no bearer token, configured token or connection string, and no envelope or audit detail MEM-001 content (content the API accepted is the owner's and is not judged)"},
}

type verifier struct {
	k      *kernel.Kernel
	opts   model.VerifyOptions
	rep    *model.InvariantReport
	byName map[string]*model.Invariant
	// progress: rows read so far and the run's estimate.
	checked, estimate int64
	// judged is what the revisions and executions passes found wrong with the rows they read,
	// when they read every one in scope (no --since): the keys pass, after them, judges what an
	// envelope references by it rather than reading and checking each row again.
	judged *kernel.Judgement
}

// judge records what a pass found wrong with a revision or an execution.
func (v *verifier) judgeRevision(owner, record string, revision int, err error) {
	if v.judged != nil {
		v.judged.Revision(owner, record, revision, err)
	}
}

func (v *verifier) judgeExecution(owner, id string, err error) {
	if v.judged != nil {
		v.judged.Execution(owner, id, err)
	}
}

func (v *verifier) violate(name string, ex model.Violation) {
	inv := v.byName[name]
	inv.Count++
	if len(inv.Examples) < MaxExamples {
		inv.Examples = append(inv.Examples, ex)
	}
}

// Patterns of secrets that idemwork must never write: a bearer credential and connection strings
// (URL or key=value with a password).
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}`),
	regexp.MustCompile(`(?i)\bpostgres(?:ql)?://\S`),
	regexp.MustCompile(`(?i)\b(?:password|passfile|sslpassword)\s*=`),
}

// memContentFields are MEM-001's content fields: an envelope or an audit detail never names them.
var memContentFields = []string{`"originalContent"`, `"currentContent"`}

// secretIn names the first secret text holds ("" when none). withContent also looks for
// MEM-001 content: its field names, and the given contents themselves. It is applied only to
// what idemwork itself writes (SPEC §5's envelope whitelist, the audit details it composes, the
// outbox references), never to a title, summary, payload or input the API accepted.
func (v *verifier) secretIn(text string, withContent bool, contents []string) string {
	// The patterns run only on text holding one of their words: a regular expression over every
	// envelope and audit detail of a million-event owner is most of a verify's time otherwise.
	// (Non-ASCII text goes to the patterns whatever it holds: (?i) folds ſ to s and K to k.)
	if !isASCII(text) || containsFoldASCII(text, "bearer") || containsFoldASCII(text, "postgres") || containsFoldASCII(text, "pass") {
		for _, re := range secretPatterns {
			if loc := re.FindStringIndex(text); loc != nil {
				return "holds what looks like a secret: " + redact(text[loc[0]:loc[1]])
			}
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

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// containsFoldASCII reports whether s holds word (lower-case ASCII) in any case.
func containsFoldASCII(s, word string) bool {
	first := word[0]
	for i := 0; i+len(word) <= len(s); i++ {
		if c := s[i] | 0x20; c != first {
			continue
		}
		j := 1
		for j < len(word) && s[i+j]|0x20 == word[j] {
			j++
		}
		if j == len(word) {
			return true
		}
	}
	return false
}

// redact shows enough of a secret to find it, never the whole of it.
func redact(s string) string {
	if len(s) <= 10 {
		return s[:min(len(s), 3)] + "…"
	}
	return s[:10] + "…"
}

// VerifyInvariants checks every invariant over the stored rows of one owner or of all, streaming
// keyset pages inside one read-only snapshot. It never writes; it works on a read-only session.
// It has no deadline of its own: it runs until it is done or ctx ends (a canceled ctx returns
// ctx's error). opts.Progress hears how far it is after every page.
func Invariants(ctx context.Context, k *kernel.Kernel, opts model.VerifyOptions) (model.InvariantReport, error) {
	start := time.Now()
	if opts.Owner != "" {
		if err := idemtype.ValidateOwner(opts.Owner); err != nil {
			return model.InvariantReport{}, err
		}
	}
	if opts.Batch <= 0 {
		opts.Batch = DefaultVerifyBatch
	}
	if opts.Now.IsZero() {
		opts.Now = k.Runner().Clock().Now()
	}
	rep := model.InvariantReport{Owner: opts.Owner, Checked: map[string]int64{}, Unattributed: map[string]int64{}, PassMs: map[string]float64{}}
	if !opts.Since.IsZero() {
		since := opts.Since.UTC()
		rep.Since = &since
	}
	v := &verifier{k: k, opts: opts, rep: &rep, byName: map[string]*model.Invariant{}}
	if opts.Since.IsZero() {
		v.judged = kernel.NewJudgement()
	}
	for _, d := range invariantDescriptions {
		rep.Invariants = append(rep.Invariants, model.Invariant{Name: d.name, Description: d.text, Examples: []model.Violation{}})
	}
	for i := range rep.Invariants {
		v.byName[rep.Invariants[i].Name] = &rep.Invariants[i]
	}
	err := k.DB().ReadSnapshot(ctx, func(ctx context.Context) error {
		if opts.Progress != nil {
			est, err := verifyrows.Estimate(ctx, k.DB(), opts.Owner, opts.Since)
			if err != nil {
				return err
			}
			for _, n := range est {
				v.estimate += n
			}
			v.estimate += est["auditEvents"] // the lives pass reads the keyed ones again
			v.report("records")
		}
		for _, step := range []struct {
			table string
			run   func(context.Context) error
		}{{"records", v.records}, {"revisions", v.revisions}, {"executions", v.executions}, {"keys", v.keys},
			{"outboxMessages", v.outbox}, {"auditEvents", v.audit}, {"keyLives", v.lives}} {
			began := time.Now()
			if err := step.run(ctx); err != nil {
				return err
			}
			rep.PassMs[step.table] = float64(time.Since(began).Microseconds()) / 1000
		}
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return model.InvariantReport{}, ctx.Err()
		}
		return model.InvariantReport{}, err
	}
	for _, inv := range rep.Invariants {
		rep.Violations += inv.Count
	}
	rep.OK = rep.Violations == 0
	rep.TookMs = float64(time.Since(start).Microseconds()) / 1000
	return rep, nil
}

// report tells opts.Progress how far the run is.
func (v *verifier) report(table string) {
	if v.opts.Progress != nil {
		v.opts.Progress(model.VerifyProgress{Table: table, Checked: v.checked, Estimate: v.estimate})
	}
}

// page is the keyset page the run reads next of a table, limit rows long.
func (v *verifier) page(limit int) verifyrows.Page {
	return verifyrows.Page{Owner: v.opts.Owner, Limit: max(limit, 1), Since: v.opts.Since}
}

// pages reads a table page by page, each page starting after the last row of the one before.
// It reads the next page while check judges the current one (the connection would sit idle
// otherwise while Go works, and the database while it waits): check must not use the database.
// idle, when set, runs after each page's checks at a point where nothing else is reading — for
// what a check had to put off because it needed a read.
//
// Without --since, scan (when set) reads the whole scope instead, one streamed statement whose
// related rows PostgreSQL joins set-wise (verifyrows.Scope): the checks run as the rows arrive,
// the progress is told every limit rows, and idle runs once at the end.
func pages[T interface {
	Cursor() verifyrows.Cursor
}](ctx context.Context, v *verifier, table string, limit int,
	read func(ctx context.Context, p verifyrows.Page) ([]T, error), scan func(ctx context.Context, s verifyrows.Scope, fn func(T) error) error,
	check func(row T), idle func(ctx context.Context) error) error {
	if scan != nil && v.opts.Since.IsZero() {
		return scanned(ctx, v, table, limit, scan, check, idle)
	}
	type page struct {
		rows []T
		err  error
	}
	p := v.page(limit)
	rows, err := read(ctx, p)
	for {
		if err != nil {
			return err
		}
		var next chan page
		if len(rows) == p.Limit {
			p.After = rows[len(rows)-1].Cursor()
			next = make(chan page, 1)
			go func(p verifyrows.Page) {
				rows, err := read(ctx, p)
				next <- page{rows, err}
			}(p)
		}
		v.rep.Batches++
		v.rep.Checked[table] += int64(len(rows))
		for _, r := range rows {
			check(r)
		}
		var ahead page
		if next != nil {
			ahead = <-next // always waited for: the connection is the run's transaction
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if idle != nil {
			if err := idle(ctx); err != nil {
				return err
			}
		}
		v.checked += int64(len(rows))
		v.report(table)
		if next == nil {
			return nil
		}
		rows, err = ahead.rows, ahead.err
	}
}

// scanned is pages' whole-scope read: the rows of one streamed statement, checked as they come,
// counted in batches of limit rows (each told to the progress, after ctx is checked).
func scanned[T any](ctx context.Context, v *verifier, table string, limit int,
	scan func(ctx context.Context, s verifyrows.Scope, fn func(T) error) error, check func(row T), idle func(ctx context.Context) error) error {
	limit = max(limit, 1)
	n := 0
	flush := func() error {
		v.rep.Batches++
		v.rep.Checked[table] += int64(n)
		v.checked += int64(n)
		n = 0
		v.report(table)
		return ctx.Err()
	}
	err := scan(ctx, verifyrows.Scope{Owner: v.opts.Owner}, func(r T) error {
		check(r)
		if n++; n == limit {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	if idle != nil {
		if err := idle(ctx); err != nil {
			return err
		}
	}
	if n > 0 || v.rep.Checked[table] == 0 {
		return flush()
	}
	return ctx.Err()
}

func (v *verifier) keys(ctx context.Context) error {
	light := v.judged != nil
	read := func(ctx context.Context, p verifyrows.Page) ([]verifyrows.KeyRow, error) {
		return verifyrows.Keys(ctx, v.k.DB(), kernel.ResultRefs, p, light)
	}
	// The keys whose restore needs a row the page did not bring (a damaged reference, mostly):
	// judged again once the connection is free.
	var putOff []verifyrows.KeyRow
	judge := func(ctx context.Context, r verifyrows.KeyRow, offline bool) bool {
		ex := model.Violation{Owner: r.OwnerID, Key: r.Key}
		if r.Status == "PROCESSING" {
			if !r.ExpiresAt.After(v.opts.Now) {
				ex.Detail = fmt.Sprintf("a committed PROCESSING row (a request that never finished) expired at %s and is still stored", r.ExpiresAt.UTC().Format(time.RFC3339))
				v.violate(InvProcessingPastExpiry, ex)
			}
			return true
		}
		env, err := idemtype.ParseEnvelope(r.Response)
		if err == nil && !env.Legacy {
			err = v.k.CheckStoredKey(ctx, r, v.judged, offline)
			if kernel.NeedsRead(err) {
				return false
			}
		}
		if s := v.secretIn(string(r.Response), true, nil); s != "" {
			ex.Detail = "the envelope " + s
			v.violate(InvNoSecrets, ex)
		}
		if err == nil && env.Legacy {
			if r.Operation != kernel.OpLegacyIdentityCreate {
				ex.Detail = "a raw-json-v1 receipt outside identity:create (" + r.Operation + ")"
				v.violate(InvEnvelopeRestores, ex)
			}
			return true // a legacy receipt is readable only; it is never restored
		}
		if err != nil {
			ex.Detail = fmt.Sprintf("%s: %s", apperr.As(err).Code, apperr.As(err).Message)
			if kernel.RefersToForeignRows(err) {
				v.violate(InvEnvelopeOwnRows, ex)
			} else {
				v.violate(InvEnvelopeRestores, ex)
			}
		}
		return true
	}
	var scan func(ctx context.Context, s verifyrows.Scope, fn func(verifyrows.KeyRow) error) error
	if light {
		scan = func(ctx context.Context, s verifyrows.Scope, fn func(verifyrows.KeyRow) error) error {
			return verifyrows.KeysScan(ctx, v.k.DB(), kernel.ResultRefs, s, fn) // the light columns: what the scan reads
		}
	}
	return pages(ctx, v, "keys", v.opts.Batch, read, scan,
		func(r verifyrows.KeyRow) {
			if !judge(ctx, r, true) {
				putOff = append(putOff, r)
			}
		},
		func(ctx context.Context) error {
			for _, r := range putOff {
				judge(ctx, r, false)
			}
			putOff = putOff[:0]
			return ctx.Err()
		})
}

func (v *verifier) records(ctx context.Context) error {
	return pages(ctx, v, "records", v.opts.Batch, readOn(v.k.DB(), verifyrows.Records), scanOn(v.k.DB(), verifyrows.RecordsScan),
		func(r verifyrows.RecordRow) {
			ex := model.Violation{Owner: r.OwnerID, Record: r.ID}
			if r.Revisions != r.Revision || r.MinRevision != 1 || r.MaxRevision != r.Revision {
				ex.Detail = fmt.Sprintf("record.revision is %d but it has %d revision(s) numbered %d..%d", r.Revision, r.Revisions, r.MinRevision, r.MaxRevision)
				v.violate(InvRevisionsDense, ex)
			}
			if !r.LatestMatches {
				ex.Detail = fmt.Sprintf("the row differs from revision %d's snapshot (or that revision is missing)", r.Revision)
				v.violate(InvRecordIsLatest, ex)
			}
			v.printable(model.Violation{Owner: r.OwnerID, Record: r.ID}, "the row's", r.Title, r.Summary)
		}, nil)
}

// printable flags a title or summary holding a control character the write boundary refuses
// (CheckTitle, CheckSummary): planted behind the kernel's back, it is damage, and Verify is where
// it is looked for. where says whose text it is ("the row's", "the snapshot's").
func (v *verifier) printable(ex model.Violation, where, title, summary string) {
	if err := kernel.CheckPrintable(title, summary); err != nil {
		ex.Detail = where + " " + apperr.As(err).Message
		v.violate(InvTextPrintable, ex)
	}
}

func (v *verifier) revisions(ctx context.Context) error {
	return pages(ctx, v, "revisions", v.opts.Batch/verifyRevisionBatchShare, readOn(v.k.DB(), verifyrows.Revisions), scanOn(v.k.DB(), verifyrows.RevisionsScan),
		func(r verifyrows.RevisionRow) {
			ex := model.Violation{Owner: r.OwnerID, Key: deref(r.IdempotencyKey), Record: r.RecordID, Revision: r.Revision.Revision}
			var bad error // what a read of the revision fails closed with
			switch {
			case !r.HasParent:
				ex.Detail = "the revision's record does not exist"
				v.violate(InvSnapshotConsistent, ex)
			default:
				snap, err := kernel.CheckSnapshot(r.RevisionWithParent, r.ParentModule)
				if err != nil {
					bad = err
					ex.Detail = apperr.As(err).Message
					v.violate(InvSnapshotConsistent, ex)
				} else {
					v.printable(ex, "the snapshot's", snap.Title, snap.Summary)
				}
			}
			if err := kernel.CheckRevisionChain(r.RevisionWithParent); err != nil {
				if bad == nil {
					bad = err
				}
				ex.Detail = apperr.As(err).Message
				v.violate(InvRevisionChain, ex)
			}
			v.judgeRevision(r.OwnerID, r.RecordID, r.Revision.Revision, bad)
			if r.WriteAudits != 1 {
				ex.Detail = fmt.Sprintf("%d audit events of a write name this revision, want 1", r.WriteAudits)
				if r.WriteAudits == 0 {
					ex.Detail = "no audit event of a write names this revision"
				}
				v.violate(InvRevisionAudited, ex)
			}
		}, nil)
}

func (v *verifier) executions(ctx context.Context) error {
	return pages(ctx, v, "executions", v.opts.Batch, readOn(v.k.DB(), verifyrows.Executions), scanOn(v.k.DB(), verifyrows.ExecutionsScan),
		func(r verifyrows.ExecutionRow) {
			ex := model.Violation{Owner: r.OwnerID, Key: deref(r.IdempotencyKey), Record: r.RecordID, Execution: r.ID}
			switch {
			case !r.HasRecord:
				ex.Detail = fmt.Sprintf("execution of %s %s: the record does not exist in its module", r.ModuleCode, r.FeatureID)
				v.violate(InvExecutionHasRecord, ex)
			case !r.AtRevision:
				ex.Detail = fmt.Sprintf("recorded at revision %d, which the record does not have", r.RecordRevision)
				v.violate(InvExecutionHasRecord, ex)
			}
			if err := kernel.CheckExecution(r.Execution, r.Attest); err != nil {
				v.judgeExecution(r.OwnerID, r.ID, err)
				ex.Detail = apperr.As(err).Message
				v.violate(InvExecutionAttested, ex)
			}
			if r.RunAudits != 1 {
				ex.Detail = fmt.Sprintf("%d audit events of its run (FEATURE_%s_EXECUTED/BLOCKED/QUEUED), want 1", r.RunAudits, r.FeatureID)
				v.violate(InvExecutionAudited, ex)
			}
			if r.Mode != string(kernel.ModeOutbox) {
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
		}, nil)
}

func (v *verifier) outbox(ctx context.Context) error {
	return pages(ctx, v, "outboxMessages", v.opts.Batch, readOn(v.k.DB(), verifyrows.Outbox), scanOn(v.k.DB(), verifyrows.OutboxScan),
		func(r verifyrows.OutboxRow) {
			ex := model.Violation{Owner: r.OwnerID, Key: deref(r.Key), Message: r.ID, Execution: r.ExecutionID}
			if s := v.secretIn(r.PayloadRef, false, nil); s != "" {
				ex.Detail = "the payload reference " + s
				v.violate(InvNoSecrets, ex)
			}
			switch {
			case !r.HasExecution:
				ex.Detail = "the message's execution does not exist"
			case r.ExecutionMode != string(kernel.ModeOutbox):
				ex.Detail = "the message belongs to a " + r.ExecutionMode + " execution"
			case r.Status != r.ExecutionStatus:
				ex.Detail = fmt.Sprintf("the message is %s but its execution is %s", r.Status, r.ExecutionStatus)
			case deref(r.Key) != deref(r.ExecutionKey):
				ex.Detail = fmt.Sprintf("the message carries key %s, its execution key %s", quoteKey(deref(r.Key)), quoteKey(deref(r.ExecutionKey)))
			default:
				return
			}
			v.violate(InvOutboxAgrees, ex)
		}, nil)
}

func (v *verifier) audit(ctx context.Context) error {
	return pages(ctx, v, "auditEvents", v.opts.Batch*2, readOn(v.k.DB(), verifyrows.Audit), scanOn(v.k.DB(), verifyrows.AuditScan),
		func(r verifyrows.AuditRow) {
			if s := v.secretIn(r.Detail, true, r.Contents); s != "" {
				ex := model.Violation{Owner: r.OwnerID, Audit: r.ID, Detail: r.Action + ": the detail " + s}
				if r.RecordID != nil {
					ex.Record = *r.RecordID
				}
				v.violate(InvNoSecrets, ex)
			}
		}, nil)
}

// lives judges every key's lives (judgeLives), key range by key range in key order: the rows each
// transaction wrote under the key, and the key row.
func (v *verifier) lives(ctx context.Context) error {
	type page struct {
		keys []verifyrows.KeyLives
		next verifyrows.Cursor
		more bool
		read int
		err  error
	}
	readPage := func(p verifyrows.Page) page {
		var x page
		x.keys, x.next, x.more, x.read, x.err = verifyrows.KeyLivesPage(ctx, v.k.DB(), p)
		return x
	}
	if v.opts.Since.IsZero() {
		return v.livesScanned(ctx)
	}
	p := v.page(v.opts.Batch * 2)
	cur := readPage(p)
	for {
		if cur.err != nil {
			return cur.err
		}
		// The next page is read while this one is judged (judgeKey reads nothing).
		var ahead chan page
		if cur.more {
			p.After = cur.next
			ahead = make(chan page, 1)
			go func(p verifyrows.Page) { ahead <- readPage(p) }(p)
		}
		v.rep.Batches++
		v.rep.Checked["keyLives"] += int64(len(cur.keys))
		v.checked += int64(cur.read)
		for _, k := range cur.keys {
			v.judgeKey(k)
		}
		v.report("keyLives")
		if ahead == nil {
			return nil
		}
		cur = <-ahead
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// livesScanned is lives over the whole scope: every key's lives in one streamed statement.
func (v *verifier) livesScanned(ctx context.Context) error {
	limit := max(v.opts.Batch*2, 1)
	keys, read := 0, 0
	flush := func() error {
		v.rep.Batches++
		v.rep.Checked["keyLives"] += int64(keys)
		v.checked += int64(read)
		keys, read = 0, 0
		v.report("keyLives")
		return ctx.Err()
	}
	err := verifyrows.KeyLivesScan(ctx, v.k.DB(), verifyrows.Scope{Owner: v.opts.Owner}, func(k verifyrows.KeyLives, n int) error {
		v.judgeKey(k)
		keys++
		if read += n; read >= limit {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}

func (v *verifier) judgeKey(k verifyrows.KeyLives) {
	// --since: a page holds the owner's older keys too (verifyrows.KeyLivesPage); a key none of
	// whose lives ends since is neither judged nor counted.
	if !v.opts.Since.IsZero() && !slices.ContainsFunc(k.Lives, func(l verifyrows.Life) bool { return !l.Last.Before(v.opts.Since) }) {
		return
	}
	lives := make([]life, 0, len(k.Lives))
	for _, l := range k.Lives {
		if l.XID == nil {
			for table, n := range map[string]int{"revisions": l.Revisions, "executions": l.Executions, "reviews": l.Reviews,
				"outboxMessages": l.Messages, "auditEvents": l.RunAudits} {
				if n > 0 {
					v.rep.Unattributed[table] += int64(n)
				}
			}
			continue
		}
		lives = append(lives, life{xid: *l.XID, first: l.First, last: l.Last, revisions: l.Revisions, executions: l.Executions,
			reviews: l.Reviews, messages: l.Messages, runAudits: l.RunAudits, actions: l.Actions, keyExpiresAt: l.KeyExpiresAt})
	}
	for _, p := range judgeLives(k.Key, k.Row, lives) {
		v.violate(p.Invariant, model.Violation{Owner: k.OwnerID, Key: k.Key, Detail: p.Detail})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// quoteKey shows a key in a message ("k7"), quoted with Go's rules (a planted key may hold
// anything).
func quoteKey(k string) string { return strconv.Quote(k) }

// readOn binds a page read of verifyrows to the session db.
func readOn[T any](db *store.DB, read func(context.Context, *store.DB, verifyrows.Page) ([]T, error)) func(context.Context, verifyrows.Page) ([]T, error) {
	return func(ctx context.Context, p verifyrows.Page) ([]T, error) { return read(ctx, db, p) }
}

// scanOn binds a whole-scope scan of verifyrows to the session db.
func scanOn[T any](db *store.DB, scan func(context.Context, *store.DB, verifyrows.Scope, func(T) error) error) func(context.Context, verifyrows.Scope, func(T) error) error {
	return func(ctx context.Context, s verifyrows.Scope, fn func(T) error) error { return scan(ctx, db, s, fn) }
}
