package verifyrows_test

import (
	"testing"

	"github.com/idemwork/idemwork/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }
