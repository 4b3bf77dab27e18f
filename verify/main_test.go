package verify_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/outbox"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// testBundle is one test's kernel over its own fresh database.
type testBundle struct {
	db    *testdb.DB
	clock *idem.OffsetClock
	k     *kernel.Kernel
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	db := testdb.NewWith(t, testdb.Options{MaxConns: 24})
	clock := &idem.OffsetClock{}
	k := kernel.New(db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{Runner: idem.Options{Clock: clock}})
	return &testBundle{db: db, clock: clock, k: k}
}

func (b *testBundle) exec(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	tag, err := b.db.Pool.Exec(context.Background(), query, args...)
	require.NoError(t, err)
	return tag.RowsAffected()
}

func (b *testBundle) createNote(t *testing.T, owner, key, title string) model.WriteResult {
	t.Helper()
	res, err := b.k.Create(context.Background(), model.CreateInput{Owner: owner, Module: kernel.ModuleNote, Key: key, Title: title,
		Payload: raw(map[string]any{"text": title})})
	require.NoError(t, err)
	return res
}

func (b *testBundle) createMem(t *testing.T, owner, key, content string) model.WriteResult {
	t.Helper()
	res, err := b.k.Create(context.Background(), model.CreateInput{Owner: owner, Module: kernel.ModuleMem, Key: key, Title: "memo",
		Payload: raw(map[string]any{"originalContent": content, "currentContent": content})})
	require.NoError(t, err)
	return res
}

func str(s string) *string { return &s }

func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// tables are every table a write can touch.
var tables = []string{"record", "record_revision", "feature_execution", "audit_event", "idempotency_record",
	"outbox_message", "commitment_review"}

// counts reads the row count of every table.
func (b *testBundle) counts(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, tb := range tables {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+tb).Scan(&n))
		out[tb] = n
	}
	return out
}

func (b *testBundle) createCommitment(t *testing.T, owner, key string) model.WriteResult {
	t.Helper()
	res, err := b.k.Create(context.Background(), model.CreateInput{Owner: owner, Module: kernel.ModuleCommitment, Key: key, Title: "promise",
		Payload: raw(map[string]any{"status": "OPEN", "due": "2026-12-01"})})
	require.NoError(t, err)
	return res
}

// hostileTitle holds what escapes, reorders or widens in JSON and on a terminal: quotes, a
// backslash, a line separator, astral and combining characters.
const hostileTitle = `"quoted" \ back\slash · 𝄞 e` + "\u0301" + " \u2028 end"

// writeEveryKindOfRow writes, through the kernel, a row of every kind a request writes (kernel's attest test writes the same): creates
// (hostile text, a 60 KB payload, no key), patches, internal features (a revision and an
// execution), a blocked feature, outbox features delivered and failed, and a review.
func (b *testBundle) writeEveryKindOfRow(t *testing.T, owner string) {
	t.Helper()
	ctx := context.Background()
	note, err := b.k.Create(ctx, model.CreateInput{Owner: owner, Module: kernel.ModuleNote, Key: "a-create", Title: hostileTitle,
		Summary: str("line one\nline\ttwo"), Payload: raw(map[string]any{"n": 1.50, "nested": map[string]any{"z": []any{true, nil, "é"}}, "big": strings.Repeat("x", 60_000)})})
	require.NoError(t, err)
	for i := 1; i <= 3; i++ {
		_, err := b.k.Patch(ctx, model.PatchInput{Owner: owner, Module: kernel.ModuleNote, RecordID: note.Record.ID, ExpectRevision: i,
			Key: "a-patch-" + string(rune('0'+i)), Title: str(hostileTitle + " v" + string(rune('0'+i)))})
		require.NoError(t, err)
	}
	_, err = b.k.RunFeature(ctx, model.FeatureInput{Owner: owner, Module: kernel.ModuleNote, RecordID: note.Record.ID, FeatureID: "F01", Key: "a-archive"})
	require.NoError(t, err)
	unkeyed, err := b.k.Create(ctx, model.CreateInput{Owner: owner, Module: kernel.ModuleNote, Title: "no key", Payload: raw(map[string]any{})})
	require.NoError(t, err)
	_, err = b.k.Patch(ctx, model.PatchInput{Owner: owner, Module: kernel.ModuleNote, RecordID: unkeyed.Record.ID, ExpectRevision: 1, Title: str("still none")})
	require.NoError(t, err)
	mem := b.createMem(t, owner, "a-mem", "  some   spaced \u00a0 text ")
	for _, f := range []string{"F01", "F02"} {
		_, err := b.k.RunFeature(ctx, model.FeatureInput{Owner: owner, Module: kernel.ModuleMem, RecordID: mem.Record.ID, FeatureID: f, Key: "a-mem-" + f})
		require.NoError(t, err)
	}
	p := outbox.NewMemoryProvider()
	w := outbox.NewWorker(b.db.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": p}, Clock: b.clock, MaxAttempts: 1})
	for i, fail := range []bool{false, true, false} {
		c := b.createCommitment(t, owner, "a-commit-"+string(rune('a'+i)))
		_, err = b.k.RunFeature(ctx, model.FeatureInput{Owner: owner, Module: kernel.ModuleCommitment, RecordID: c.Record.ID, FeatureID: "F02", Key: "a-notify-" + string(rune('a'+i))})
		require.NoError(t, err)
		if fail {
			p.FailNext(1)
		}
		if i < 2 { // the last one stays PENDING
			_, err := w.RunOnce(ctx, 10)
			require.NoError(t, err)
		}
	}
	_, err = b.k.CreateReview(ctx, kernel.ReviewInput{Owner: owner, RecordID: b.createCommitment(t, owner, "").Record.ID, Key: "a-review", Verdict: "kept", Comment: "fine"})
	require.NoError(t, err)
}
