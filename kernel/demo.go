package kernel

import (
	"context"
	"encoding/json"
	"fmt"

	"idemwork/idem"
	"idemwork/store"
)

// DemoOwners are the owners demo seed writes for.
var DemoOwners = []string{"alice", "bob"}

// SeedReport summarises a demo seed.
type SeedReport struct {
	Owners   []string       `json:"owners"`
	Writes   int            `json:"writes"`
	Outcomes map[string]int `json:"outcomes"`
	Legacy   int            `json:"legacyReceipts"`
	Skipped  bool           `json:"skipped"`
}

// SeedDemo writes a small, varied data set for two owners through the runner with fixed keys:
// rerunning it replays every write and creates nothing new. Legacy IDENTITY receipts (which no
// write path can produce any more) are inserted directly, once.
func (k *Kernel) SeedDemo(ctx context.Context) (SeedReport, error) {
	rep := SeedReport{Owners: DemoOwners, Outcomes: map[string]int{}}
	// Once the first demo key has expired (24 h by default) a replay would execute again; the
	// revision it wrote says the seed already ran.
	var seeded, keyLive bool
	if err := k.db.Pool.QueryRow(ctx, `SELECT
			EXISTS (SELECT 1 FROM record_revision WHERE owner_id = 'alice' AND idempotency_key = 'demo:alice:note-1'),
			EXISTS (SELECT 1 FROM idempotency_record WHERE owner_id = 'alice' AND idempotency_key = 'demo:alice:note-1' AND expires_at > $1)`,
		k.runner.Clock().Now()).Scan(&seeded, &keyLive); err != nil {
		return rep, err
	}
	if seeded && !keyLive {
		rep.Skipped = true
		return rep, nil
	}
	count := func(res WriteResult, err error) (WriteResult, error) {
		if err == nil {
			rep.Writes++
			rep.Outcomes[string(res.Outcome)]++
		}
		return res, err
	}
	str := func(s string) *string { return &s }
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }

	// alice: a note that drifts (create, then two patches: a replay of the create returns rev 1).
	note, err := count(k.Create(ctx, CreateInput{Owner: "alice", Module: ModuleNote, Key: "demo:alice:note-1", Title: "Groceries",
		Summary: str("weekly list"), Payload: raw(map[string]any{"items": []string{"milk", "eggs"}})}))
	if err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}
	id := note.Record.ID
	steps := []PatchInput{
		{Owner: "alice", Module: ModuleNote, RecordID: id, Key: "demo:alice:note-1:patch-1", ExpectRevision: 1,
			Payload: raw(map[string]any{"items": []string{"milk", "eggs", "bread"}})},
		{Owner: "alice", Module: ModuleNote, RecordID: id, Key: "demo:alice:note-1:patch-2", ExpectRevision: 2,
			Title: str("Groceries (Saturday)"), Payload: raw(map[string]any{"items": []string{"milk", "eggs", "bread", "coffee"}})},
		{Owner: "alice", Module: ModuleNote, RecordID: id, Key: "demo:alice:note-1:patch-3", ExpectRevision: 3,
			Summary: str("weekly list, shared with bob")},
	}
	for _, p := range steps {
		if _, err := count(k.Patch(ctx, p)); err != nil {
			return rep, fmt.Errorf("seed: %w", err)
		}
	}
	old, err := count(k.Create(ctx, CreateInput{Owner: "alice", Module: ModuleNote, Key: "demo:alice:note-2", Title: "Old ideas",
		Payload: raw(map[string]any{"ideas": []string{"sourdough"}})}))
	if err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}
	if _, err := count(k.RunFeature(ctx, FeatureInput{Owner: "alice", Module: ModuleNote, RecordID: old.Record.ID, FeatureID: "F01", Key: "demo:alice:note-2:archive"})); err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}

	// alice: MEM-001 rewritten internally, then a blocked publish.
	mem, err := count(k.Create(ctx, CreateInput{Owner: "alice", Module: ModuleMem, Key: "demo:alice:mem-1", Title: "Meeting notes",
		Payload: raw(map[string]any{"originalContent": "  Ship   the   runner  ", "currentContent": "  Ship   the   runner  "})}))
	if err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}
	for _, f := range []struct{ feature, key string }{{"F01", "demo:alice:mem-1:rewrite"}, {"F02", "demo:alice:mem-1:publish"}} {
		if _, err := count(k.RunFeature(ctx, FeatureInput{Owner: "alice", Module: ModuleMem, RecordID: mem.Record.ID, FeatureID: f.feature, Key: f.key})); err != nil {
			return rep, fmt.Errorf("seed: %w", err)
		}
	}

	// alice: commitments — one closed and reviewed, one notified through the outbox.
	c1, err := count(k.Create(ctx, CreateInput{Owner: "alice", Module: ModuleCommitment, Key: "demo:alice:commit-1", Title: "Send the report",
		Payload: raw(map[string]any{"status": "OPEN", "due": "2026-12-01"})}))
	if err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}
	if _, err := count(k.RunFeature(ctx, FeatureInput{Owner: "alice", Module: ModuleCommitment, RecordID: c1.Record.ID, FeatureID: "F01", Key: "demo:alice:commit-1:close"})); err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}
	rv, err := k.CreateReview(ctx, ReviewInput{Owner: "alice", RecordID: c1.Record.ID, Key: "demo:alice:commit-1:review", Verdict: "kept", Comment: "done a day early"})
	if err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}
	rep.Writes++
	rep.Outcomes[string(rv.Outcome)]++
	c2, err := count(k.Create(ctx, CreateInput{Owner: "alice", Module: ModuleCommitment, Key: "demo:alice:commit-2", Title: "Call the plumber",
		Payload: raw(map[string]any{"status": "OPEN"})}))
	if err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}
	if _, err := count(k.RunFeature(ctx, FeatureInput{Owner: "alice", Module: ModuleCommitment, RecordID: c2.Record.ID, FeatureID: "F02", Key: "demo:alice:commit-2:notify"})); err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}

	// bob: his own records, isolated from alice's even where keys coincide.
	if _, err := count(k.Create(ctx, CreateInput{Owner: "bob", Module: ModuleNote, Key: "demo:alice:note-1", Title: "Bob's note with alice's key",
		Payload: raw(map[string]any{"text": "keys are per owner"})})); err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}
	if _, err := count(k.Create(ctx, CreateInput{Owner: "bob", Module: ModuleMem, Key: "demo:bob:mem-1", Title: "Draft",
		Payload: raw(map[string]any{"originalContent": "hello", "currentContent": "hello"})})); err != nil {
		return rep, fmt.Errorf("seed: %w", err)
	}

	n, err := k.seedLegacyReceipts(ctx)
	if err != nil {
		return rep, err
	}
	rep.Legacy = n
	return rep, nil
}

// seedLegacyReceipts inserts two raw-json-v1 identity:create receipts for alice, once.
func (k *Kernel) seedLegacyReceipts(ctx context.Context) (int, error) {
	now := k.runner.Clock().Now()
	inserted := 0
	for i, body := range []string{
		`{"policy":"raw-json-v1","body":{"identityId":"legacy-1","displayName":"Alice A."}}`,
		`{"policy":"raw-json-v1","body":{"identityId":"legacy-2","displayName":"Alice B."}}`,
	} {
		tag, err := k.db.Pool.Exec(ctx, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
			VALUES ('alice', $1, $2, $3, 'SUCCEEDED', $4, $5, $6, $5) ON CONFLICT DO NOTHING`,
			fmt.Sprintf("demo:alice:legacy-identity-%d", i+1), OpLegacyIdentityCreate, fmt.Sprintf("%064d", i+1), body, now, now.Add(k.runner.TTL()))
		if err != nil {
			return inserted, fmt.Errorf("seed legacy receipts: %w", err)
		}
		inserted += int(tag.RowsAffected())
	}
	return inserted, nil
}

// DemoStep is one step of the guided blocked_external demo.
type DemoStep struct {
	Step      string           `json:"step"`
	Outcome   idem.Outcome     `json:"outcome,omitempty"`
	Record    *store.Record    `json:"record,omitempty"`
	Execution *store.Execution `json:"execution,omitempty"`
	Audit     []string         `json:"audit,omitempty"`
	Note      string           `json:"note"`
}

// DemoBlockedExternal walks through SPEC §7 on real rows: create a MEM-001 record, run the
// direct_external F02, show the BLOCKED execution with the revision unchanged and the
// FEATURE_F02_BLOCKED audit event, then replay the key and get the same execution back.
func (k *Kernel) DemoBlockedExternal(ctx context.Context, owner, keyPrefix string) ([]DemoStep, error) {
	var steps []DemoStep
	created, err := k.Create(ctx, CreateInput{Owner: owner, Module: ModuleMem, Key: keyPrefix + ":create", Title: "Blocked external demo",
		Payload: json.RawMessage(`{"originalContent":"publish me","currentContent":"publish me"}`)})
	if err != nil {
		return steps, err
	}
	steps = append(steps, DemoStep{Step: "create", Outcome: created.Outcome, Record: created.Record,
		Note: fmt.Sprintf("MEM-001 record %s at revision %d", created.Record.ID, created.Record.Revision)})
	in := FeatureInput{Owner: owner, Module: ModuleMem, RecordID: created.Record.ID, FeatureID: "F02", Key: keyPrefix + ":publish"}
	first, err := k.RunFeature(ctx, in)
	if err != nil {
		return steps, err
	}
	audit, err := k.db.AuditForKey(ctx, owner, in.Key)
	if err != nil {
		return steps, err
	}
	var actions []string
	for _, a := range audit {
		actions = append(actions, a.Action)
	}
	steps = append(steps, DemoStep{Step: "run F02 (publish, direct_external)", Outcome: first.Outcome, Record: first.Record, Execution: first.Execution, Audit: actions,
		Note: fmt.Sprintf("execution %s is %s/%s; the record stays at revision %d; no provider was called",
			first.Execution.ID, first.Execution.Mode, first.Execution.Status, first.Record.Revision)})
	replay, err := k.RunFeature(ctx, in)
	if err != nil {
		return steps, err
	}
	same := "the same"
	if replay.Execution.ID != first.Execution.ID {
		same = "a DIFFERENT" // would be a bug; shown, never hidden
	}
	steps = append(steps, DemoStep{Step: "replay F02 with the same key", Outcome: replay.Outcome, Record: replay.Record, Execution: replay.Execution,
		Note: fmt.Sprintf("the replay returns %s BLOCKED execution %s; BLOCKED is a persisted fact, not a success", same, replay.Execution.ID)})
	return steps, nil
}
