package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/demorows"
	"github.com/idemwork/idemwork/store/legacy"
	"github.com/idemwork/idemwork/store/readmodel"
)

// Owners are the owners demo seed writes for.
var Owners = []string{"alice", "bob"}

// SeedReport summarises a demo seed.
type SeedReport struct {
	Owners   []string       `json:"owners"`
	Writes   int            `json:"writes"`
	Outcomes map[string]int `json:"outcomes"`
	Legacy   int            `json:"legacyReceipts"`
	Skipped  bool           `json:"skipped"`
}

// demoFirstKey is the key of the seed's first write (alice's): a revision carrying it says the
// seed ran.
const demoFirstKey = "demo:alice:note-1"

// Seed writes, through k, a small, varied data set for two owners through the runner with fixed keys:
// rerunning it replays every write and creates nothing new. Legacy IDENTITY receipts (which no
// write path can produce any more) are inserted directly, once.
func Seed(ctx context.Context, k *kernel.Kernel) (SeedReport, error) {
	rep := SeedReport{Owners: Owners, Outcomes: map[string]int{}}
	if err := k.RequireWritable(); err != nil {
		return rep, err
	}
	// Once the first demo key has expired (24 h by default) a replay would execute again; the
	// revision it wrote says the seed already ran.
	seeded, keyLive, err := demorows.SeedState(ctx, k.DB(), "alice", demoFirstKey, k.Runner().Clock().Now())
	if err != nil {
		return rep, err
	}
	if seeded && !keyLive {
		rep.Skipped = true
		return rep, nil
	}
	count := func(res model.WriteResult, err error) (model.WriteResult, error) {
		if err == nil {
			rep.Writes++
			rep.Outcomes[string(res.Outcome)]++
		}
		return res, err
	}
	str := func(s string) *string { return &s }
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }

	// alice: a note that drifts (create, then two patches: a replay of the create returns rev 1).
	note, err := count(k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: demoFirstKey, Title: "Groceries",
		Summary: str("weekly list"), Payload: raw(map[string]any{"items": []string{"milk", "eggs"}})}))
	if err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}
	id := note.Record.ID
	steps := []model.PatchInput{
		{Owner: "alice", Module: kernel.ModuleNote, RecordID: id, Key: "demo:alice:note-1:patch-1", ExpectRevision: 1,
			Payload: raw(map[string]any{"items": []string{"milk", "eggs", "bread"}})},
		{Owner: "alice", Module: kernel.ModuleNote, RecordID: id, Key: "demo:alice:note-1:patch-2", ExpectRevision: 2,
			Title: str("Groceries (Saturday)"), Payload: raw(map[string]any{"items": []string{"milk", "eggs", "bread", "coffee"}})},
		{Owner: "alice", Module: kernel.ModuleNote, RecordID: id, Key: "demo:alice:note-1:patch-3", ExpectRevision: 3,
			Summary: str("weekly list, shared with bob")},
	}
	for _, p := range steps {
		if _, err := count(k.Patch(ctx, p)); err != nil {
			return rep, fmt.Errorf("seed: %w", err)
		}
	}
	old, err := count(k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "demo:alice:note-2", Title: "Old ideas",
		Payload: raw(map[string]any{"ideas": []string{"sourdough"}})}))
	if err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}
	if _, err := count(k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleNote, RecordID: old.Record.ID, FeatureID: "F01", Key: "demo:alice:note-2:archive"})); err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}

	// alice: MEM-001 rewritten internally, then a blocked publish.
	mem, err := count(k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleMem, Key: "demo:alice:mem-1", Title: "Meeting notes",
		Payload: raw(map[string]any{"originalContent": "  Ship   the   runner  ", "currentContent": "  Ship   the   runner  "})}))
	if err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}
	for _, f := range []struct{ feature, key string }{{"F01", "demo:alice:mem-1:rewrite"}, {"F02", "demo:alice:mem-1:publish"}} {
		if _, err := count(k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleMem, RecordID: mem.Record.ID, FeatureID: f.feature, Key: f.key})); err != nil {
			return rep, fmt.Errorf("seed: %w", err)
		}
	}

	// alice: commitments — one closed and reviewed, one notified through the outbox.
	c1, err := count(k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleCommitment, Key: "demo:alice:commit-1", Title: "Send the report",
		Payload: raw(map[string]any{"status": "OPEN", "due": "2026-12-01"})}))
	if err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}
	if _, err := count(k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleCommitment, RecordID: c1.Record.ID, FeatureID: "F01", Key: "demo:alice:commit-1:close"})); err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}
	rv, err := k.CreateReview(ctx, kernel.ReviewInput{Owner: "alice", RecordID: c1.Record.ID, Key: "demo:alice:commit-1:review", Verdict: "kept", Comment: "done a day early"})
	if err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}
	rep.Writes++
	rep.Outcomes[string(rv.Outcome)]++
	c2, err := count(k.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleCommitment, Key: "demo:alice:commit-2", Title: "Call the plumber",
		Payload: raw(map[string]any{"status": "OPEN"})}))
	if err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}
	if _, err := count(k.RunFeature(ctx, model.FeatureInput{Owner: "alice", Module: kernel.ModuleCommitment, RecordID: c2.Record.ID, FeatureID: "F02", Key: "demo:alice:commit-2:notify"})); err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}

	// bob: his own records, isolated from alice's even where keys coincide.
	if _, err := count(k.Create(ctx, model.CreateInput{Owner: "bob", Module: kernel.ModuleNote, Key: "demo:alice:note-1", Title: "Bob's note with alice's key",
		Payload: raw(map[string]any{"text": "keys are per owner"})})); err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}
	if _, err := count(k.Create(ctx, model.CreateInput{Owner: "bob", Module: kernel.ModuleMem, Key: "demo:bob:mem-1", Title: "Draft",
		Payload: raw(map[string]any{"originalContent": "hello", "currentContent": "hello"})})); err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}

	n, err := seedLegacyReceipts(ctx, k)
	if err != nil {
		return rep, err
	}
	rep.Legacy = n
	return rep, nil
}

// seedLegacyReceipts inserts two raw-json-v1 identity:create receipts for alice, once.
func seedLegacyReceipts(ctx context.Context, k *kernel.Kernel) (int, error) {
	now := k.Runner().Clock().Now()
	inserted := 0
	for i, body := range []string{
		`{"policy":"raw-json-v1","body":{"identityId":"legacy-1","displayName":"Alice A."}}`,
		`{"policy":"raw-json-v1","body":{"identityId":"legacy-2","displayName":"Alice B."}}`,
	} {
		ok, err := legacy.InsertReceipt(ctx, k.DB(), legacy.Receipt{OwnerID: "alice", Key: fmt.Sprintf("demo:alice:legacy-identity-%d", i+1),
			Operation: kernel.OpLegacyIdentityCreate, Fingerprint: fmt.Sprintf("%064d", i+1), Response: json.RawMessage(body),
			CreatedAt: now, ExpiresAt: now.Add(k.Runner().TTL())})
		if err != nil {
			return inserted, err
		}
		if ok {
			inserted++
		}
	}
	return inserted, nil
}

// Blocked walks through SPEC §7 on real rows, one step at a time (the CLI runs all
// steps, the TUI one per keypress): a MEM-001 record, its direct_external F02 failing closed
// (BLOCKED execution, revision unchanged, FEATURE_F02_BLOCKED audit), and a replay returning
// the very same execution. Every claim is checked against the database, never assumed. It is
// not safe for concurrent use: run one step at a time.
type Blocked struct {
	k      *kernel.Kernel
	owner  string
	prefix string
	next   int
	record *model.Record
	first  *model.Execution
}

// NewBlocked prepares the demo over k for owner; its keys start with keyPrefix.
func NewBlocked(k *kernel.Kernel, owner, keyPrefix string) *Blocked {
	return &Blocked{k: k, owner: owner, prefix: keyPrefix}
}

// Done reports whether every step ran.
func (d *Blocked) Done() bool { return d.next >= len(model.BlockedExternalSteps) }

// StepsDone is how many steps ran.
func (d *Blocked) StepsDone() int { return d.next }

// PublishKey is the Idempotency-Key of the demo's F02 request.
func (d *Blocked) PublishKey() string { return d.prefix + ":publish" }

func check(ok bool, claim, format string, args ...any) model.DemoCheck {
	return model.DemoCheck{OK: ok, Claim: claim, Text: fmt.Sprintf(format, args...)}
}

// actions lists audit events' actions, in order.
func actions(audit []model.AuditEvent) string {
	out := make([]string, len(audit))
	for i, a := range audit {
		out[i] = a.Action
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// Next runs the next step.
func (d *Blocked) Next(ctx context.Context) (model.DemoStep, error) {
	if d.Done() {
		return model.DemoStep{}, fmt.Errorf("the demo has no more steps")
	}
	step := model.DemoStep{Step: model.BlockedExternalSteps[d.next], Notes: []string{}, Checks: []model.DemoCheck{}}
	publish := model.FeatureInput{Owner: d.owner, Module: kernel.ModuleMem, FeatureID: "F02", Key: d.PublishKey()}
	switch d.next {
	case 0:
		res, err := d.k.Create(ctx, model.CreateInput{Owner: d.owner, Module: kernel.ModuleMem, Key: d.prefix + ":create", Title: "Blocked external demo",
			Payload: json.RawMessage(`{"originalContent":"publish me","currentContent":"publish me"}`)})
		if err != nil {
			return step, err
		}
		d.record = res.Record
		step.Outcome, step.Result, step.Record = res.Outcome, model.OutcomeText(res.Outcome, nil), res.Record
		step.Notes = append(step.Notes, fmt.Sprintf("%s: MEM-001 record %s at revision %d (key %s)", res.Outcome, res.Record.ID, res.Record.Revision, d.prefix+":create"),
			fmt.Sprintf("envelope %s — a reference, no content", res.Envelope))
	case 1:
		publish.RecordID = d.record.ID
		res, err := d.k.RunFeature(ctx, publish)
		if err != nil {
			return step, err
		}
		latest, err := readmodel.LatestRecord(ctx, d.k.DB(), store.RecordRef{Owner: d.owner, Module: kernel.ModuleMem, ID: d.record.ID})
		if err != nil {
			return step, err
		}
		audit, err := readmodel.AuditForKey(ctx, d.k.DB(), d.owner, publish.Key)
		if err != nil {
			return step, err
		}
		execs, err := demorows.ExecutionsForKey(ctx, d.k.DB(), d.owner, publish.Key)
		if err != nil {
			return step, err
		}
		messages := 0
		for _, e := range execs {
			m, err := demorows.OutboxForExecution(ctx, d.k.DB(), d.owner, e.ID)
			if err != nil {
				return step, err
			}
			messages += len(m)
		}
		e := res.Execution
		d.first = e
		stored := model.Execution{}
		if len(execs) == 1 {
			stored = execs[0]
		}
		step.Outcome, step.Result, step.Record, step.Execution = res.Outcome, model.OutcomeText(res.Outcome, e), res.Record, e
		step.Notes = append(step.Notes, fmt.Sprintf("%s: execution %s — the call committed the fact that the feature failed closed; the client gets it as {record, execution}",
			step.Result, e.ID))
		step.Checks = append(step.Checks,
			check(len(execs) == 1 && stored.ID == e.ID && stored.Mode == "blocked_external", "a direct_external feature fails closed to a blocked_external execution",
				"feature_execution rows of this key: %d, mode %s", len(execs), stored.Mode),
			check(stored.Status == "BLOCKED", "the execution is BLOCKED: a persisted fact, not a success", "feature_execution.status = %s", stored.Status),
			check(latest.Revision == d.record.Revision, "the record keeps its pre-request revision", "record.revision in the database = %d (before the request: %d)", latest.Revision, d.record.Revision),
			check(len(audit) == 1 && audit[0].Action == "FEATURE_F02_BLOCKED", "the audit event says BLOCKED", "audit events of this key: %s", actions(audit)),
			check(messages == 0, "nothing is queued for a provider", "outbox_message rows for the execution: %d", messages))
		step.Notes = append(step.Notes, "no provider was called: a database rollback could never undo it")
	default:
		publish.RecordID = d.record.ID
		res, err := d.k.RunFeature(ctx, publish)
		if err != nil && !failsClosed(err) {
			return step, err
		}
		execs, xerr := demorows.ExecutionsForKey(ctx, d.k.DB(), d.owner, publish.Key)
		if xerr != nil {
			return step, xerr
		}
		if err != nil {
			// The stored rows were changed behind the demo's back: the replay refuses them, and
			// the walk-through says so instead of stopping.
			ae := apperr.As(err)
			step.Result = "fails closed: " + string(ae.Code)
			step.Notes = append(step.Notes, "the replay fails closed: "+ae.Message)
			step.Checks = append(step.Checks,
				check(false, "a replay returns the stored result", "the replay fails closed: %s %s", ae.Code, ae.Message),
				check(false, "the same BLOCKED execution, not a new attempt", "nothing was returned"),
				check(len(execs) == 1, "the replay wrote nothing", "feature_execution rows for this key in the database: %d", len(execs)))
			break
		}
		step.Outcome, step.Result, step.Record, step.Execution = res.Outcome, model.OutcomeText(res.Outcome, res.Execution), res.Record, res.Execution
		step.Notes = append(step.Notes, fmt.Sprintf("%s: the client gets the same execution %s again — BLOCKED for good, nothing will ever deliver it", step.Result, res.Execution.ID))
		step.Checks = append(step.Checks,
			check(res.Outcome == idemtype.Replayed, "a replay returns the stored result", "outcome %s", res.Outcome),
			check(res.Execution.ID == d.first.ID && res.Execution.Status == "BLOCKED", "the same BLOCKED execution, not a new attempt",
				"execution %s, still %s", res.Execution.ID, res.Execution.Status),
			check(len(execs) == 1, "the replay wrote nothing", "feature_execution rows for this key in the database: %d", len(execs)))
	}
	d.next++
	return step, nil
}

// RunBlocked runs every step of the blocked_external demo.
func RunBlocked(ctx context.Context, k *kernel.Kernel, owner, keyPrefix string) ([]model.DemoStep, error) {
	d := NewBlocked(k, owner, keyPrefix)
	var steps []model.DemoStep
	for !d.Done() {
		s, err := d.Next(ctx)
		if err != nil {
			return steps, err
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// failsClosed reports whether err is a replay's refusal of what is stored (SPEC §9's 500s of a
// stored result that does not hold), as opposed to a failure to reach it.
func failsClosed(err error) bool {
	c := apperr.CodeOf(err)
	return c == apperr.SnapshotIntegrity || c == apperr.PolicyMismatch
}
