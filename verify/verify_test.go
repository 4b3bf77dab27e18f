package verify_test

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/demo"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/outbox"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/verify"
)

// realisticHistory writes a bit of everything through the kernel: the demo seed (legacy
// receipts included), internal, blocked and outbox features, an outbox message delivered and
// one that failed for good, and a review.
func (b *testBundle) realisticHistory(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	_, err := demo.Seed(ctx, b.k)
	require.NoError(t, err)
	note := b.CreateNote(t, "carol", "c-note", "carol's")
	_, err = b.k.RunFeature(ctx, model.FeatureInput{Owner: "carol", Module: kernel.ModuleNote, RecordID: note.Record.ID, FeatureID: "F01", Key: "c-archive"})
	require.NoError(t, err)
	mem := b.CreateMem(t, "carol", "c-mem", "  private   words that must not leak ")
	for _, f := range []string{"F01", "F02"} {
		_, err = b.k.RunFeature(ctx, model.FeatureInput{Owner: "carol", Module: kernel.ModuleMem, RecordID: mem.Record.ID, FeatureID: f, Key: "c-mem-" + f})
		require.NoError(t, err)
	}
	p := outbox.NewMemoryProvider()
	w := outbox.NewWorker(b.db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": p}, Clock: b.clock, MaxAttempts: 1})
	_, err = w.RunOnce(ctx, 100) // the demo's notification
	require.NoError(t, err)
	for i, fail := range []bool{false, true} {
		c := b.CreateCommitment(t, "carol", "c-commit-"+string(rune('a'+i)))
		_, err = b.k.RunFeature(ctx, model.FeatureInput{Owner: "carol", Module: kernel.ModuleCommitment, RecordID: c.Record.ID, FeatureID: "F02", Key: "c-notify-" + string(rune('a'+i))})
		require.NoError(t, err)
		if fail {
			p.FailNext(1)
		}
		rep, err := w.RunOnce(ctx, 10)
		require.NoError(t, err)
		require.Equal(t, 1, rep.Claimed)
	}
	_, err = b.k.CreateReview(ctx, kernel.ReviewInput{Owner: "carol", RecordID: b.CreateCommitment(t, "carol", "").Record.ID, Key: "c-review", Verdict: "kept", Comment: "fine"})
	require.NoError(t, err)
}

// Verify never fails on what the kernel writes — content the API accepted included: a payload
// holding a connection string, a summary holding a bearer header, a title naming a configured
// token are the owner's content, not something idemwork wrote (no_secrets judges envelopes, audit
// details and outbox references only).
func TestVerifyFindsNothingWrongWithWhatTheKernelWrites(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.realisticHistory(t)
	b.WriteEveryKindOfRow(t, "dave")
	for i, in := range []model.CreateInput{
		{Owner: "carol", Module: kernel.ModuleNote, Key: "paste-dsn", Title: "dsn", Payload: raw(map[string]any{"url": "postgres://user:pass@db.example/app"})},
		{Owner: "carol", Module: kernel.ModuleNote, Key: "paste-bearer", Title: "header", Summary: str("Authorization: Bearer abcdef123456")},
		{Owner: "carol", Module: kernel.ModuleNote, Title: "uses config-token-0042", Payload: raw(map[string]any{"password": "x", "conn": "host=db password=hunter2"})},
	} {
		res, err := b.k.Create(ctx, in)
		require.NoError(t, err, "content %d is accepted", i)
		_, err = b.k.RunFeature(ctx, model.FeatureInput{Owner: "carol", Module: kernel.ModuleNote, RecordID: res.Record.ID, FeatureID: "F01",
			Input: raw(map[string]any{"why": "Bearer abcdefghijk postgres://u:p@h/d"})})
		require.NoError(t, err)
	}
	for _, owner := range []string{"", "carol"} {
		rep, err := verify.Invariants(ctx, b.k, model.VerifyOptions{Owner: owner, Secrets: []string{"config-token-0042"}})
		require.NoError(t, err)
		require.True(t, rep.OK, "violations: %+v", rep.Failed())
		require.Zero(t, rep.Violations)
		require.Len(t, rep.Invariants, 17)
		require.Empty(t, rep.Unattributed, "every row was written after migration 0004 and names its transaction")
		for _, table := range []string{"keys", "records", "revisions", "executions", "outboxMessages", "auditEvents", "keyLives"} {
			require.Positive(t, rep.Checked[table], "%s of %q", table, owner)
		}
	}
}

// inOwnTx runs statements on one connection in one transaction.
func (b *testBundle) inOwnTx(t *testing.T, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	for _, s := range stmts {
		_, err := tx.Exec(ctx, s)
		require.NoError(t, err, s)
	}
	require.NoError(t, tx.Commit(ctx))
}

func TestVerifyFindsEveryKindOfPlantedViolation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.realisticHistory(t)
	noKey := func(owner string) model.CreateInput {
		return model.CreateInput{Owner: owner, Module: kernel.ModuleNote, Title: "t", Payload: raw(map[string]any{"a": 1})}
	}
	create := func(in model.CreateInput) string {
		res, err := b.k.Create(ctx, in)
		require.NoError(t, err)
		return res.Record.ID
	}
	feature := func(owner, module, recordID, featureID string) string {
		res, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: owner, Module: module, RecordID: recordID, FeatureID: featureID})
		require.NoError(t, err)
		return res.Execution.ID
	}
	memOf := func(owner string) string {
		return create(model.CreateInput{Owner: owner, Module: kernel.ModuleMem, Title: "m",
			Payload: raw(map[string]any{"originalContent": "the secret draft of a letter", "currentContent": "the secret draft of a letter"})})
	}
	commitmentOf := func(owner string) string {
		return create(model.CreateInput{Owner: owner, Module: kernel.ModuleCommitment, Title: "c", Payload: raw(map[string]any{"status": "OPEN"})})
	}
	want := map[string][]string{}

	// An envelope that no longer restores: it points at a revision that never existed.
	b.CreateNote(t, "v-env", "env-key", "e")
	b.Exec(t, `UPDATE idempotency_record SET response = jsonb_set(response, '{result,revision}', '7') WHERE owner_id = 'v-env'`)
	want["v-env"] = []string{verify.InvEnvelopeRestores}

	// A create's own transaction wrote two revisions under its key (a second record's, with the
	// create's transaction id, as a buggy module or a bad import could): one life, two revisions,
	// one RECORD_CREATED.
	rows := b.CreateNote(t, "v-rows", "rows-key", "r")
	b.Exec(t, `INSERT INTO record (owner_id, id, module_code, revision, title, summary, payload, created_at, updated_at)
		SELECT owner_id, 'TWIN' || id, module_code, 1, title, summary, payload, created_at, updated_at FROM record WHERE id = $1`, rows.Record.ID)
	b.Exec(t, `INSERT INTO record_revision (owner_id, record_id, revision, snapshot, idempotency_key, created_at, written_xid, digest)
		SELECT owner_id, 'TWIN' || record_id, 1, jsonb_set(snapshot, '{id}', to_jsonb('TWIN' || record_id)), idempotency_key, created_at, written_xid, digest
		FROM record_revision WHERE record_id = $1`, rows.Record.ID)
	want["v-rows"] = []string{verify.InvKeyRowsOnce, verify.InvRevisionAudited, verify.InvRevisionChain} // the second revision has no audit event, and its digest is another record's

	// A committed PROCESSING row past its expiry.
	b.Exec(t, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, created_at, expires_at, updated_at)
		VALUES ('v-proc', 'stuck', 'NOTE:record:create', 'fp', 'PROCESSING', now() - interval '2 days', now() - interval '1 day', now() - interval '2 days')`)
	want["v-proc"] = []string{verify.InvProcessingPastExpiry}

	// record.revision says 3, the revisions are 1..2.
	dense := create(noKey("v-dense"))
	_, err := b.k.Patch(ctx, model.PatchInput{Owner: "v-dense", Module: kernel.ModuleNote, RecordID: dense, ExpectRevision: 1, Title: str("t2")})
	require.NoError(t, err)
	b.Exec(t, `UPDATE record SET revision = 3 WHERE id = $1`, dense)
	want["v-dense"] = []string{verify.InvRecordIsLatest, verify.InvRevisionsDense}

	// The record row changed behind its revisions' back.
	latest := create(noKey("v-latest"))
	b.Exec(t, `UPDATE record SET title = 'edited in place' WHERE id = $1`, latest)
	want["v-latest"] = []string{verify.InvRecordIsLatest}

	// A snapshot claiming another owner (its key's envelope then fails to restore too, and the
	// revision no longer matches its digest).
	snap := b.CreateNote(t, "v-snap", "snap-key", "s")
	b.Exec(t, `UPDATE record_revision SET snapshot = jsonb_set(snapshot, '{ownerId}', '"mallory"') WHERE record_id = $1`, snap.Record.ID)
	want["v-snap"] = []string{verify.InvEnvelopeRestores, verify.InvRevisionChain, verify.InvSnapshotConsistent}

	// Control characters planted in a title and a summary, in the row and its snapshot alike (so
	// the row is still its latest revision): writes refuse them, Verify names them. A summary's
	// newline and tab, which writes allow, are not flagged.
	ctrl := create(noKey("v-ctrl"))
	b.Exec(t, `UPDATE record SET title = E'a\x1b[2Jb' WHERE id = $1`, ctrl)
	b.Exec(t, `UPDATE record_revision SET snapshot = jsonb_set(snapshot, '{title}', to_jsonb(E'a\x1b[2Jb'::text)) WHERE record_id = $1`, ctrl)
	bell := create(noKey("v-ctrl"))
	b.Exec(t, `UPDATE record SET summary = E'ring\x07' WHERE id = $1`, bell)
	b.Exec(t, `UPDATE record_revision SET snapshot = jsonb_set(snapshot, '{summary}', to_jsonb(E'ring\x07'::text)) WHERE record_id = $1`, bell)
	create(model.CreateInput{Owner: "v-ctrl", Module: kernel.ModuleNote, Title: "lines", Summary: str("one\ntwo\tthree"), Payload: raw(map[string]any{})})
	want["v-ctrl"] = []string{verify.InvRevisionChain, verify.InvTextPrintable}

	// A revision whose audit event is gone.
	ra := create(noKey("v-revaudit"))
	_, err = b.k.Patch(ctx, model.PatchInput{Owner: "v-revaudit", Module: kernel.ModuleNote, RecordID: ra, ExpectRevision: 1, Title: str("t2")})
	require.NoError(t, err)
	b.Exec(t, `DELETE FROM audit_event WHERE owner_id = 'v-revaudit' AND action = 'RECORD_PATCHED'`)
	want["v-revaudit"] = []string{verify.InvRevisionAudited}

	// An execution without its record (foreign keys bypassed, as a restore or a bad import can).
	b.inOwnTx(t, `SET LOCAL session_replication_role = replica`,
		`INSERT INTO feature_execution (owner_id, id, module_code, record_id, feature_id, mode, status, record_revision, created_at, updated_at)
			VALUES ('v-exec', 'EXEC-ORPHAN', 'NOTE', 'NO-SUCH-RECORD', 'F01', 'internal', 'SUCCEEDED', 1, now(), now())`,
		`INSERT INTO audit_event (owner_id, id, module_code, record_id, action, revision, execution_id, at)
			VALUES ('v-exec', 'AUDIT-ORPHAN', 'NOTE', 'NO-SUCH-RECORD', 'FEATURE_F01_EXECUTED', 1, 'EXEC-ORPHAN', now())`)
	want["v-exec"] = []string{verify.InvExecutionAttested, verify.InvExecutionHasRecord}

	// An execution recorded at a revision its record does not have.
	er := memOf("v-execrev")
	erx := feature("v-execrev", kernel.ModuleMem, er, "F02")
	b.Exec(t, `UPDATE feature_execution SET record_revision = 9 WHERE id = $1`, erx)
	want["v-execrev"] = []string{verify.InvExecutionAttested, verify.InvExecutionHasRecord}

	// An execution whose audit event is gone.
	ea := memOf("v-execaudit")
	eax := feature("v-execaudit", kernel.ModuleMem, ea, "F02")
	b.Exec(t, `DELETE FROM audit_event WHERE execution_id = $1`, eax)
	want["v-execaudit"] = []string{verify.InvExecutionAudited}

	// A message DELIVERED while its execution is still PENDING.
	ob := commitmentOf("v-outbox")
	obx := feature("v-outbox", kernel.ModuleCommitment, ob, "F02")
	b.Exec(t, `UPDATE outbox_message SET status = 'DELIVERED' WHERE execution_id = $1`, obx)
	want["v-outbox"] = []string{verify.InvOutboxAgrees}

	// Two DELIVERED audit events for one delivery (the unfenced settle's double delivery).
	tw := commitmentOf("v-twice")
	twx := feature("v-twice", kernel.ModuleCommitment, tw, "F02")
	w := outbox.NewWorker(b.db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": outbox.NewMemoryProvider()}, Clock: b.clock})
	rep, err := w.RunOnce(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Delivered)
	b.Exec(t, `INSERT INTO audit_event (owner_id, id, module_code, record_id, action, revision, execution_id, detail, at)
		SELECT owner_id, id || '-again', module_code, record_id, action, revision, execution_id, detail, at FROM audit_event
		WHERE execution_id = $1 AND action = 'FEATURE_F02_DELIVERED'`, twx)
	want["v-twice"] = []string{verify.InvOutboxSettledOnce}

	// Secrets in what idemwork writes: a DSN in an audit detail (planted), beside a bearer token
	// and a configured token in content the API accepted (the owner's, not judged).
	create(model.CreateInput{Owner: "v-secret", Module: kernel.ModuleNote, Title: "paste", Payload: raw(map[string]any{"header": "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9"})})
	create(model.CreateInput{Owner: "v-secret", Module: kernel.ModuleNote, Title: "uses config-token-0042", Payload: raw(map[string]any{})})
	leak := create(noKey("v-secret"))
	b.Exec(t, `UPDATE audit_event SET detail = '{"dsn":"postgres://app:hunter2@db.internal/prod"}' WHERE record_id = $1`, leak)
	want["v-secret"] = []string{verify.InvNoSecrets}

	// MEM-001 content in an audit detail, by name and by value.
	ml := memOf("v-memleak")
	feature("v-memleak", kernel.ModuleMem, ml, "F02")
	b.Exec(t, `UPDATE audit_event SET detail = '{"note":"the secret draft of a letter"}' WHERE record_id = $1 AND action = 'RECORD_CREATED'`, ml)
	b.Exec(t, `UPDATE audit_event SET detail = detail || '{"currentContent":"x"}' WHERE record_id = $1 AND action = 'FEATURE_F02_BLOCKED'`, ml)
	want["v-memleak"] = []string{verify.InvNoSecrets}

	// Everything is read by whole-table scans, counted in batches of 500 rows and of 3; and
	// --since before every row reads the same rows in keyset pages of 3 rows (each page's
	// related rows looked up by key), which must find exactly the same.
	for _, run := range []struct {
		batch int
		since time.Time
	}{{500, time.Time{}}, {3, time.Time{}}, {3, time.Unix(0, 0)}} {
		batch := run.batch
		rep, err := verify.Invariants(ctx, b.k, model.VerifyOptions{Batch: batch, Since: run.since, Secrets: []string{"config-token-0042"}})
		require.NoError(t, err)
		require.False(t, rep.OK)
		got := map[string][]string{}
		for _, inv := range rep.Invariants {
			require.LessOrEqual(t, len(inv.Examples), verify.MaxExamples)
			require.EqualValues(t, len(inv.Examples), min(inv.Count, verify.MaxExamples), inv.Name)
			for _, ex := range inv.Examples {
				require.True(t, strings.HasPrefix(ex.Owner, "v-"), "batch %d: %s flags the clean owner %s: %s", batch, inv.Name, ex.Owner, ex.Detail)
				if !slices.Contains(got[ex.Owner], inv.Name) {
					got[ex.Owner] = append(got[ex.Owner], inv.Name)
				}
			}
		}
		for owner := range got {
			sort.Strings(got[owner])
		}
		for owner := range want {
			sort.Strings(want[owner])
		}
		require.Equal(t, want, got, "batch %d: each planted violation is found, and nothing else", batch)
		secrets := rep.Invariants[slices.IndexFunc(rep.Invariants, func(i model.Invariant) bool { return i.Name == verify.InvNoSecrets })]
		require.EqualValues(t, 3, secrets.Count, "the DSN, MEM-001 content by value and by name (the content the API accepted is not judged): %+v", secrets.Examples)
		for _, ex := range secrets.Examples {
			require.NotContains(t, ex.Detail, "hunter2", "a report never repeats the secret it found")
			require.NotContains(t, ex.Detail, "eyJhbGciOiJIUzI1NiJ9")
		}
		printable := rep.Invariants[slices.IndexFunc(rep.Invariants, func(i model.Invariant) bool { return i.Name == verify.InvTextPrintable })]
		require.EqualValues(t, 4, printable.Count, "the title and the summary, each in the row and in the snapshot: %+v", printable.Examples)
		var details []string
		for _, ex := range printable.Examples {
			details = append(details, ex.Detail)
		}
		require.Contains(t, details, "the row's title: holds the control character U+001B (character 2); a title holds no control character")
		require.Contains(t, details, "the snapshot's summary: holds the control character U+0007 (character 5); a summary holds no control character but newline and tab")
		if batch == 3 {
			require.Greater(t, rep.Batches, int(rep.Checked["auditEvents"]/6), "small batches: the progress was told batch by batch")
		}
	}

	// One owner's check sees only that owner.
	clean, err := verify.Invariants(ctx, b.k, model.VerifyOptions{Owner: "carol"})
	require.NoError(t, err)
	require.True(t, clean.OK, "%+v", clean.Failed())
	one, err := verify.Invariants(ctx, b.k, model.VerifyOptions{Owner: "v-twice"})
	require.NoError(t, err)
	require.EqualValues(t, 1, one.Violations)
}

func TestVerifyRunsOnAReadOnlySession(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.realisticHistory(t)
	ro, err := store.Open(context.Background(), b.db.DSN, store.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	k := kernel.New(ro, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
	before := b.Counts(t)
	rep, err := verify.Invariants(context.Background(), k, model.VerifyOptions{})
	require.NoError(t, err)
	require.True(t, rep.OK, "%+v", rep.Failed())
	require.Equal(t, before, b.Counts(t))
}
