package demo_test

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

// testBundle is one test's kernel over its own fresh database, on a clock the outbox
// walk-through can move.
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

// tables are every table a write can touch.
var tables = []string{"record", "record_revision", "feature_execution", "audit_event", "idempotency_record",
	"outbox_message", "commitment_review"}

// counts reads the row count of every table.
func (b *testBundle) counts(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, tb := range tables {
		out[tb] = b.count(t, "SELECT count(*) FROM "+tb)
	}
	return out
}

func (b *testBundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

func (b *testBundle) exec(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	tag, err := b.db.Pool.Exec(context.Background(), query, args...)
	require.NoError(t, err)
	return tag.RowsAffected()
}

// currentRevision reads record.revision.
func (b *testBundle) currentRevision(t *testing.T, owner, recordID string) int {
	t.Helper()
	return b.count(t, `SELECT revision FROM record WHERE owner_id = $1 AND id = $2`, owner, recordID)
}

func (b *testBundle) createCommitment(t *testing.T, owner, key string) model.WriteResult {
	t.Helper()
	res, err := b.k.Create(context.Background(), model.CreateInput{Owner: owner, Module: kernel.ModuleCommitment, Key: key, Title: "promise",
		Payload: raw(map[string]any{"status": "OPEN", "due": "2026-12-01"})})
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
