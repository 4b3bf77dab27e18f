// Package kerneltest is what the tests of the kernel's neighbours (demo, inspect, verify) share:
// one kernel over a fresh database of one test, and the writes and reads their tests repeat.
// Only tests import it.
package kerneltest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/outbox"
)

// Bundle is one test's kernel over its own fresh database, on a clock a test can move.
type Bundle struct {
	DB    *testdb.DB
	Clock *idem.OffsetClock
	K     *kernel.Kernel
}

// New is a Bundle over a fresh database of t (24 connections: enough for the storms of a test).
func New(t testing.TB) *Bundle {
	t.Helper()
	db := testdb.NewWith(t, testdb.Options{MaxConns: 24})
	clock := &idem.OffsetClock{}
	k := kernel.New(db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{Runner: idem.Options{Clock: clock}})
	return &Bundle{DB: db, Clock: clock, K: k}
}

// Exec runs query behind the kernel's back (raw pool) and returns the rows it affected.
func (b *Bundle) Exec(t testing.TB, query string, args ...any) int64 {
	t.Helper()
	tag, err := b.DB.Pool.Exec(context.Background(), query, args...)
	require.NoError(t, err)
	return tag.RowsAffected()
}

// Count reads one integer (a count, a revision) on the raw pool.
func (b *Bundle) Count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.DB.Pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

// Tables are every table a write can touch.
var Tables = []string{"record", "record_revision", "feature_execution", "audit_event", "idempotency_record",
	"outbox_message", "commitment_review"}

// Counts reads the row count of every table.
func (b *Bundle) Counts(t testing.TB) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, tb := range Tables {
		out[tb] = b.Count(t, "SELECT count(*) FROM "+tb)
	}
	return out
}

// CreateNote creates a NOTE of owner under key (none when empty).
func (b *Bundle) CreateNote(t testing.TB, owner, key, title string) model.WriteResult {
	t.Helper()
	res, err := b.K.Create(context.Background(), model.CreateInput{Owner: owner, Module: kernel.ModuleNote, Key: key, Title: title,
		Payload: Raw(map[string]any{"text": title})})
	require.NoError(t, err)
	return res
}

// CreateMem creates a MEM-001 memo of owner holding content.
func (b *Bundle) CreateMem(t testing.TB, owner, key, content string) model.WriteResult {
	t.Helper()
	res, err := b.K.Create(context.Background(), model.CreateInput{Owner: owner, Module: kernel.ModuleMem, Key: key, Title: "memo",
		Payload: Raw(map[string]any{"originalContent": content, "currentContent": content})})
	require.NoError(t, err)
	return res
}

// CreateCommitment creates an OPEN COMMITMENT of owner.
func (b *Bundle) CreateCommitment(t testing.TB, owner, key string) model.WriteResult {
	t.Helper()
	res, err := b.K.Create(context.Background(), model.CreateInput{Owner: owner, Module: kernel.ModuleCommitment, Key: key, Title: "promise",
		Payload: Raw(map[string]any{"status": "OPEN", "due": "2026-12-01"})})
	require.NoError(t, err)
	return res
}

// Raw is v as JSON.
func Raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Str is a pointer to s.
func Str(s string) *string { return &s }

// RequireCode asserts err carries code and returns it as an *apperr.Error.
func RequireCode(t testing.TB, err error, code apperr.Code) *apperr.Error {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, apperr.CodeOf(err), "error: %v", err)
	var ae *apperr.Error
	require.ErrorAs(t, err, &ae)
	return ae
}

// HostileTitle holds what escapes, reorders or widens in JSON and on a terminal: quotes, a
// backslash, a line separator, astral and combining characters.
const HostileTitle = `"quoted" \ back\slash · 𝄞 e` + "\u0301" + " \u2028 end"

// WriteEveryKindOfRow writes, through the kernel, a row of every kind a request writes (kernel's
// attest test writes the same): creates (hostile text, a 60 KB payload, no key), patches,
// internal features (a revision and an execution), a blocked feature, outbox features delivered
// and failed, and a review.
func (b *Bundle) WriteEveryKindOfRow(t testing.TB, owner string) {
	t.Helper()
	ctx := context.Background()
	note, err := b.K.Create(ctx, model.CreateInput{Owner: owner, Module: kernel.ModuleNote, Key: "a-create", Title: HostileTitle,
		Summary: Str("line one\nline\ttwo"), Payload: Raw(map[string]any{"n": 1.50, "nested": map[string]any{"z": []any{true, nil, "é"}}, "big": strings.Repeat("x", 60_000)})})
	require.NoError(t, err)
	for i := 1; i <= 3; i++ {
		_, err := b.K.Patch(ctx, model.PatchInput{Owner: owner, Module: kernel.ModuleNote, RecordID: note.Record.ID, ExpectRevision: i,
			Key: "a-patch-" + string(rune('0'+i)), Title: Str(HostileTitle + " v" + string(rune('0'+i)))})
		require.NoError(t, err)
	}
	_, err = b.K.RunFeature(ctx, model.FeatureInput{Owner: owner, Module: kernel.ModuleNote, RecordID: note.Record.ID, FeatureID: "F01", Key: "a-archive"})
	require.NoError(t, err)
	unkeyed, err := b.K.Create(ctx, model.CreateInput{Owner: owner, Module: kernel.ModuleNote, Title: "no key", Payload: Raw(map[string]any{})})
	require.NoError(t, err)
	_, err = b.K.Patch(ctx, model.PatchInput{Owner: owner, Module: kernel.ModuleNote, RecordID: unkeyed.Record.ID, ExpectRevision: 1, Title: Str("still none")})
	require.NoError(t, err)
	mem := b.CreateMem(t, owner, "a-mem", "  some   spaced \u00a0 text ")
	for _, f := range []string{"F01", "F02"} {
		_, err := b.K.RunFeature(ctx, model.FeatureInput{Owner: owner, Module: kernel.ModuleMem, RecordID: mem.Record.ID, FeatureID: f, Key: "a-mem-" + f})
		require.NoError(t, err)
	}
	p := outbox.NewMemoryProvider()
	w := outbox.NewWorker(b.DB.DB, outbox.Options{Providers: map[string]outbox.Provider{"notifier": p}, Clock: b.Clock, MaxAttempts: 1})
	for i, fail := range []bool{false, true, false} {
		c := b.CreateCommitment(t, owner, "a-commit-"+string(rune('a'+i)))
		_, err = b.K.RunFeature(ctx, model.FeatureInput{Owner: owner, Module: kernel.ModuleCommitment, RecordID: c.Record.ID, FeatureID: "F02", Key: "a-notify-" + string(rune('a'+i))})
		require.NoError(t, err)
		if fail {
			p.FailNext(1)
		}
		if i < 2 { // the last one stays PENDING
			_, err := w.RunOnce(ctx, 10)
			require.NoError(t, err)
		}
	}
	_, err = b.K.CreateReview(ctx, kernel.ReviewInput{Owner: owner, RecordID: b.CreateCommitment(t, owner, "").Record.ID, Key: "a-review", Verdict: "kept", Comment: "fine"})
	require.NoError(t, err)
}
