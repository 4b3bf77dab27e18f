package cli_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/wire"
)

// plantExpired inserts n SUCCEEDED keys of owner that expired an hour ago and one valid key.
func plantExpired(t *testing.T, db *testdb.DB, owner string, n int) {
	t.Helper()
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
		SELECT $1, 'old-' || i, 'NOTE:record:create', 'fp', 'SUCCEEDED',
			'{"schemaVersion":1,"policy":"record-snapshot-reference-v1","result":{"recordId":"r","revision":1}}'::jsonb,
			now() - interval '25 hours', now() - interval '1 hour', now() - interval '25 hours'
		FROM generate_series(1, $2) i
		UNION ALL SELECT $1, 'valid', 'NOTE:record:create', 'fp', 'PROCESSING', NULL::jsonb, now(), now() + interval '1 hour', now()`, owner, n)
	require.NoError(t, err)
}

func TestReapCommandPrintsDeletedBatchesAndTook(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	plantExpired(t, c.db, "alice", 5)
	plantExpired(t, c.db, "bob", 3)

	dry := c.ok("reap", "--dry-run", "--batch", "2")
	require.Equal(t, []string{"batches", "deleted", "dryRun", "tookMs"}, sortedKeys(dry))
	require.EqualValues(t, 8, dry["deleted"])
	require.EqualValues(t, 4, dry["batches"])
	require.Equal(t, 10, c.count(`SELECT count(*) FROM idempotency_record`), "a dry run deletes nothing")

	bob := c.ok("reap", "--owner", "bob")
	require.EqualValues(t, 3, bob["deleted"])
	require.EqualValues(t, 1, bob["batches"])

	all := c.ok("reap", "--batch", "2")
	require.EqualValues(t, 5, all["deleted"])
	require.EqualValues(t, 3, all["batches"])
	require.Equal(t, 2, c.count(`SELECT count(*) FROM idempotency_record`), "the valid keys stay")

	e := c.fails(wire.ExitUsage, "reap", "--batch", "0")
	require.Contains(t, e["message"], "--batch")
	c.fails(wire.ExitRejected, "reap", "--owner", "bad owner!")
}

func TestServeReapsExpiredKeysEveryReapInterval(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	plantExpired(t, db, "alice", 30)
	cfgPath := filepath.Join(t.TempDir(), "config.toml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("[idempotency]\nreap_interval = \"1s\"\n"), 0o600))

	url, stop := startServe(t, db, cfgPath)
	require.Eventually(t, func() bool {
		return countRows(t, db, `SELECT count(*) FROM idempotency_record WHERE expires_at <= now()`) == 0
	}, 30*time.Second, 50*time.Millisecond, "serve never reaped the expired keys")
	require.Equal(t, 1, countRows(t, db, `SELECT count(*) FROM idempotency_record`), "the valid key stays")
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(metrics), "idemwork_reaper_deleted_total 30", "the reaper's counters are on /metrics")
	require.Regexp(t, `idemwork_reaper_runs_total [1-9]`, string(metrics))
	require.Contains(t, string(metrics), "idemwork_reaper_failures_total 0")

	code, stderr := stop()
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "reaper: expired keys deleted")
	require.Contains(t, stderr, "deleted=30")
}
