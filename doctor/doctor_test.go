package doctor

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// SPEC §10.2: doctor's JSON keeps its fixed parts in their order; a section comes after them
// under its own key, and may not replace one of them.
func TestSectionsFollowTheFixedPartsInOrder(t *testing.T) {
	r := Report{Server: "PostgreSQL 15", Host: "127.0.0.1", Port: 7651, Reasons: []string{},
		Sections: map[string]any{"zeta": 1, "cluster": map[string]string{"source": "monitor"}}}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal(b, &back), "%s", b)
	require.Equal(t, map[string]any{"source": "monitor"}, back["cluster"])
	s, at := string(b), -1
	for _, k := range []string{`"server"`, `"host"`, `"port"`, `"replication"`, `"writesSafe"`, `"reasons"`, `"cluster"`, `"zeta"`} {
		i := strings.Index(s, k)
		require.Greater(t, i, at, "%s in its place in %s", k, s)
		at = i
	}
	r.Sections = map[string]any{"host": "elsewhere"}
	_, err = json.Marshal(r)
	require.ErrorContains(t, err, "would replace a part of the report")
}
