package inspect_test

import (
	"testing"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/kerneltest"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// testBundle is one test's kernel over its own fresh database (kerneltest.Bundle), with its
// parts under the short names the tests use.
type testBundle struct {
	*kerneltest.Bundle
	db    *testdb.DB
	clock *idem.OffsetClock
	k     *kernel.Kernel
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	kb := kerneltest.New(t)
	return &testBundle{Bundle: kb, db: kb.DB, clock: kb.Clock, k: kb.K}
}

var requireCode = kerneltest.RequireCode

// insertReceipt writes an idempotency row by hand.
func (b *testBundle) insertReceipt(t *testing.T, owner, key, operation, response string) {
	t.Helper()
	now := b.clock.Now()
	b.Exec(t, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
		VALUES ($1, $2, $3, repeat('0', 64), 'SUCCEEDED', $4::jsonb, $5, $6, $5)`, owner, key, operation, response, now, now.Add(idem.DefaultTTL))
}
