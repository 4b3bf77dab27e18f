package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/faultproxy"
	"github.com/idemwork/idemwork/internal/testdb"
)

// setupOverProxy serves the API with its database reached through a fault proxy.
func setupOverProxy(t *testing.T) (*testBundle, *faultproxy.Proxy) {
	t.Helper()
	db := testdb.New(t)
	p := faultproxy.Start(t, db.DSN)
	return serveOver(t, db, p.DSN()), p
}

func TestAWriteWhoseCommitWasLostAnswers503CommitUnknownAndTheRetryTellsTheTruth(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	for _, tc := range []struct {
		name      string
		mode      faultproxy.Mode
		committed bool
	}{
		{"the connection died after the server committed", faultproxy.AfterCommit, true},
		{"the connection died before COMMIT reached the server", faultproxy.BeforeCommit, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, p := setupOverProxy(t)
			body := `{"title":"lost in commit","payload":{"n":1}}`
			p.Arm(tc.mode)
			lost := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", body, key("k-commit")...)
			<-p.Fired()
			require.Equal(t, http.StatusServiceUnavailable, lost.status, lost.raw)
			require.Equal(t, "COMMIT_UNKNOWN", lost.code())
			require.Equal(t, idemtype.OutcomeUnknown, lost.header.Get(idemtype.HeaderOutcome))
			require.Contains(t, lost.body["error"].(map[string]any)["message"], "retry with the same Idempotency-Key")
			require.NotContains(t, lost.raw, "EOF", "never the driver's words")

			var records int
			require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM record`).Scan(&records))
			require.Equal(t, map[bool]int{true: 1, false: 0}[tc.committed], records)

			retry := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", body, key("k-commit")...)
			require.Equal(t, http.StatusCreated, retry.status, retry.raw)
			want := map[bool]string{true: "REPLAYED", false: "EXECUTED"}[tc.committed]
			require.Equal(t, want, retry.body["outcome"], "the retry with the same key says what really happened")
			require.Equal(t, want, retry.header.Get(idemtype.HeaderOutcome))
			require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM record`).Scan(&records))
			require.Equal(t, 1, records, "exactly once either way")
		})
	}
}
