package inspect_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
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

func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func requireCode(t *testing.T, err error, code apperr.Code) *apperr.Error {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, apperr.CodeOf(err), "error: %v", err)
	var ae *apperr.Error
	require.ErrorAs(t, err, &ae)
	return ae
}

// insertReceipt writes an idempotency row by hand.
func (b *testBundle) insertReceipt(t *testing.T, owner, key, operation, response string) {
	t.Helper()
	now := b.clock.Now()
	b.exec(t, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
		VALUES ($1, $2, $3, repeat('0', 64), 'SUCCEEDED', $4::jsonb, $5, $6, $5)`, owner, key, operation, response, now, now.Add(idem.DefaultTTL))
}
