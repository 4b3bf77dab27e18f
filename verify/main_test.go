package verify_test

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

var (
	raw = kerneltest.Raw
	str = kerneltest.Str
)
