package kernel_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/internal/testgate"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// testBundle is one test's kernel over its own fresh database.
type testBundle struct {
	db     *testdb.DB
	clock  *idem.OffsetClock
	runner *idem.Runner
	k      *kernel.Kernel
	seen   *observed
}

// observed counts the prepare-time steps the kernel reports through Options.Observe.
type observed struct {
	mu    sync.Mutex
	count map[string]int
	order []string
}

func (o *observed) note(step string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.count[step]++
	o.order = append(o.order, step)
}

func (o *observed) get(step string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.count[step]
}

func (o *observed) total() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, c := range o.count {
		n += c
	}
	return n
}

func (o *observed) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.count = map[string]int{}
	o.order = nil
}

func setup(t *testing.T) *testBundle {
	return setupWith(t, testdb.Options{MaxConns: 24})
}

func setupWith(t *testing.T, opts testdb.Options) *testBundle {
	t.Helper()
	db := testdb.NewWith(t, opts)
	clock := &idem.OffsetClock{}
	seen := &observed{count: map[string]int{}}
	k := kernel.New(db.DB, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{Observe: seen.note, Runner: idem.Options{Clock: clock}})
	return &testBundle{db: db, clock: clock, runner: k.Runner(), k: k, seen: seen}
}

// tables are every table a write can touch.
var tables = []string{"record", "record_revision", "feature_execution", "audit_event", "idempotency_record",
	"outbox_message", "commitment_review"}

// counts reads the row count of every table.
func (b *testBundle) counts(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, tb := range tables {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+tb).Scan(&n))
		out[tb] = n
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

// rawResponse reads idempotency_record.response exactly as stored.
func (b *testBundle) rawResponse(t *testing.T, owner, key string) map[string]json.RawMessage {
	t.Helper()
	var raw []byte
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT response FROM idempotency_record WHERE owner_id = $1 AND idempotency_key = $2`, owner, key).Scan(&raw))
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}

// resultKeys is the set of keys of the stored envelope's result.
func (b *testBundle) resultKeys(t *testing.T, owner, key string) []string {
	t.Helper()
	var keys []string
	rows, err := b.db.Pool.Query(context.Background(), `SELECT jsonb_object_keys(response->'result') FROM idempotency_record
		WHERE owner_id = $1 AND idempotency_key = $2 ORDER BY 1`, owner, key)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		keys = append(keys, k)
	}
	require.NoError(t, rows.Err())
	return keys
}

// topKeys is the set of top-level keys of the stored envelope.
func (b *testBundle) topKeys(t *testing.T, owner, key string) []string {
	t.Helper()
	var keys []string
	rows, err := b.db.Pool.Query(context.Background(), `SELECT jsonb_object_keys(response) FROM idempotency_record
		WHERE owner_id = $1 AND idempotency_key = $2 ORDER BY 1`, owner, key)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		keys = append(keys, k)
	}
	require.NoError(t, rows.Err())
	return keys
}

func str(s string) *string { return &s }
func boolp(b bool) *bool   { return &b }

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

func (b *testBundle) createCommitment(t *testing.T, owner, key string) model.WriteResult {
	t.Helper()
	res, err := b.k.Create(context.Background(), model.CreateInput{Owner: owner, Module: kernel.ModuleCommitment, Key: key, Title: "promise",
		Payload: raw(map[string]any{"status": "OPEN", "due": "2026-12-01"})})
	require.NoError(t, err)
	return res
}

// revisionsOf lists the revision numbers of a record.
func (b *testBundle) revisionsOf(t *testing.T, owner, recordID string) []int {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT revision FROM record_revision WHERE owner_id = $1 AND record_id = $2 ORDER BY revision`, owner, recordID)
	require.NoError(t, err)
	defer rows.Close()
	var out []int
	for rows.Next() {
		var n int
		require.NoError(t, rows.Scan(&n))
		out = append(out, n)
	}
	require.NoError(t, rows.Err())
	return out
}

// currentRevision reads record.revision.
func (b *testBundle) currentRevision(t *testing.T, owner, recordID string) int {
	t.Helper()
	return b.count(t, `SELECT revision FROM record WHERE owner_id = $1 AND id = $2`, owner, recordID)
}

// waitingOnLocks counts the sessions of this test's database that wait on a heavyweight lock.
func waitingOnLocks(ctx context.Context, db *store.DB) (int, error) {
	var n int
	err := db.Q(ctx).QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'`).Scan(&n)
	return n, err
}

// waitForLockWaiters polls until exactly n sessions wait on a lock, failing after a while.
func waitForLockWaiters(t *testing.T, db *store.DB, n int) {
	t.Helper()
	ctx := context.Background()
	var got int
	for i := 0; i < 1500; i++ {
		var err error
		got, err = waitingOnLocks(ctx, db)
		require.NoError(t, err)
		if got == n {
			return
		}
		sleep(10)
	}
	t.Fatalf("expected %d sessions waiting on a lock, saw %d", n, got)
}

func sleep(ms int) { time.Sleep(time.Duration(ms) * time.Millisecond) }

// waitForFollowers polls until n followers are parked on in-process leaders of k.
func waitForFollowers(t *testing.T, k *kernel.Kernel, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return k.Followers() == n }, 15*time.Second, time.Millisecond,
		"expected %d followers parked on the flight", n)
}

// gate holds a step of the commit unit open until the test opens it (see testgate).
type gate = testgate.Gate

func newGate(t testing.TB) *gate { return testgate.New(t) }
