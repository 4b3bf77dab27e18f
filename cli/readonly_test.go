package cli_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
)

func TestAReadOnlySessionRefusesEveryWriteCommandEvenAReplay(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	code, _, errOut := run(t, nil, "--dsn", db.DSN, "--allow-writes", "create", "--owner", "o", "--module", "NOTE", "--key", "k", "--title", "t", "--json")
	require.Equal(t, 0, code, errOut)

	for _, args := range [][]string{
		{"create", "--owner", "o", "--module", "NOTE", "--key", "k", "--title", "t"}, // a replay: it would only read
		{"create", "--owner", "o", "--module", "NOTE", "--key", "new", "--title", "t"},
		{"review", "--owner", "o", "--record", "01J0000000000000000000000", "--verdict", "kept", "--comment", "c"},
	} {
		code, out, _ := run(t, nil, append([]string{"--dsn", db.DSN, "--json"}, args...)...)
		require.Equal(t, 3, code, "%v", args)
		require.Equal(t, "READ_ONLY", decode(t, out)["error"].(map[string]any)["code"], "%v", args)
	}

	code, out, _ := run(t, nil, "--dsn", db.DSN, "--json", "keys", "--owner", "o")
	require.Equal(t, 0, code, "reads work")
	require.Len(t, decode(t, out)["keys"], 1, "and nothing new was written")
}

func TestAStormOnAReadOnlySessionIsRefusedBeforeItStarts(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	code, out, _ := run(t, nil, "--dsn", db.DSN, "--json", "storm", "--n", "5", "create", "--owner", "o", "--module", "NOTE", "--key", "s", "--title", "t")
	require.Equal(t, 3, code)
	require.Equal(t, "READ_ONLY", decode(t, out)["error"].(map[string]any)["code"])
}
