package store_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/store"
)

// A jsonb value read into a json.RawMessage is the server's text of it, byte for byte (what
// `::text` prints), in every exec mode: escapes, non-ASCII, numbers as stored, nesting, and a
// NULL as nil. (The store copies it without running it through json.Unmarshal again.)
func TestAJSONBValueReadsAsTheServersTextOfIt(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	docs := []string{
		`{"a": 1, "b": [true, null, 1.50, -0, 1e400], "é": "x\"\\\n\u001b[2J", "n": {"m": {}}}`,
		`"plain"`, `[]`, `12345678901234567890`, `{"blob": "` + strings.Repeat("x", 60<<10) + `"}`,
	}
	dsn := testdb.DSNOf(t, testdb.NewDatabase(t))
	for _, mode := range store.ExecModes() {
		db := openVia(t, store.WithDSNParams(dsn, [][2]string{{"default_query_exec_mode", mode}}), store.Options{MaxConns: 1})
		for _, doc := range docs {
			var raw json.RawMessage
			var text string
			require.NoError(t, db.QueryRowAsIs(ctx, `SELECT $1::jsonb, $1::jsonb::text`, doc).Scan(&raw, &text), "%s: %s", mode, doc)
			require.Equal(t, text, string(raw), "%s: %s", mode, doc)
		}
		var null json.RawMessage = json.RawMessage(`"was set"`)
		require.NoError(t, db.QueryRowAsIs(ctx, `SELECT NULL::jsonb`).Scan(&null))
		require.Nil(t, null, mode)
	}
}
