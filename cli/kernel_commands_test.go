package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/cli"
	"github.com/idemwork/idemwork/internal/testdb"
)

// kernelCLI runs the kernel's commands in-process against one test database, as a script would:
// --dsn with --allow-writes and --json.
type kernelCLI struct {
	t  *testing.T
	db *testdb.DB
}

func newKernelCLI(t *testing.T) *kernelCLI {
	t.Helper()
	return &kernelCLI{t: t, db: testdb.New(t)}
}

// exec runs one command line and returns the exit code, stdout and stderr.
func (c *kernelCLI) exec(args ...string) (int, string, string) {
	c.t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"XDG_CONFIG_HOME": c.t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	full := append([]string{"--dsn", c.db.DSN, "--allow-writes", "--json"}, args...)
	code := cli.Run(ctx, full, &out, &errb, func(k string) string { return env[k] })
	return code, out.String(), errb.String()
}

// object decodes stdout, failing unless it is exactly one JSON object.
func (c *kernelCLI) object(stdout string) map[string]any {
	c.t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	var m map[string]any
	require.NoError(c.t, dec.Decode(&m), "stdout must be a JSON object: %q", stdout)
	require.NotNil(c.t, m, "stdout must be a JSON object, not null: %q", stdout)
	var extra json.RawMessage
	require.ErrorIs(c.t, dec.Decode(&extra), io.EOF, "stdout must be exactly one JSON object: %q", stdout)
	return m
}

// ok runs a command that must succeed and returns its object.
func (c *kernelCLI) ok(args ...string) map[string]any {
	c.t.Helper()
	code, out, errOut := c.exec(args...)
	require.Equal(c.t, 0, code, "args %v: stdout %s stderr %s", args, out, errOut)
	require.Empty(c.t, errOut)
	return c.object(out)
}

// fails runs a command that must fail with exit code and returns the error object.
func (c *kernelCLI) fails(exit int, args ...string) map[string]any {
	c.t.Helper()
	code, out, errOut := c.exec(args...)
	require.Equal(c.t, exit, code, "args %v: stdout %s stderr %s", args, out, errOut)
	m := c.object(out)
	require.Equal(c.t, []string{"error"}, sortedKeys(m))
	e := m["error"].(map[string]any)
	require.Equal(c.t, []string{"code", "message", "status"}, sortedKeys(e))
	require.NotContains(c.t, e["message"], "SQLSTATE", "never a raw SQL error")
	require.NotContains(c.t, errOut, "goroutine", "never a stack trace")
	return e
}

func (c *kernelCLI) count(query string, args ...any) int {
	c.t.Helper()
	var n int
	require.NoError(c.t, c.db.Pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func obj(t *testing.T, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	require.True(t, ok, "expected an object, got %#v", v)
	return m
}

var (
	writeShape  = []string{"envelope", "execution", "key", "operation", "outcome", "record", "waited"}
	recordShape = []string{"createdAt", "id", "moduleCode", "ownerId", "payload", "revision", "summary", "title", "updatedAt"}
)

func TestCreatePatchAndActionPrintTheWriteShapeAndReplayTheFirstRevision(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	create := []string{"create", "--owner", "alice", "--module", "NOTE", "--key", "k1", "--title", "Groceries", "--summary", "weekly",
		"--payload", `{"items":["milk"]}`}
	first := c.ok(create...)
	require.Equal(t, writeShape, sortedKeys(first))
	require.Equal(t, "EXECUTED", first["outcome"])
	require.Equal(t, false, first["waited"])
	require.Equal(t, "k1", first["key"])
	require.Equal(t, "NOTE:record:create", first["operation"])
	require.Nil(t, first["execution"])
	rec := obj(t, first["record"])
	require.Equal(t, recordShape, sortedKeys(rec))
	require.Equal(t, "alice", rec["ownerId"])
	require.Equal(t, float64(1), rec["revision"])
	env := obj(t, first["envelope"])
	require.Equal(t, []string{"policy", "result", "schemaVersion"}, sortedKeys(env))
	require.Equal(t, []string{"recordId", "revision"}, sortedKeys(obj(t, env["result"])))
	id := rec["id"].(string)

	again := c.ok(create...)
	require.Equal(t, "REPLAYED", again["outcome"])
	require.Equal(t, id, obj(t, again["record"])["id"])

	patched := c.ok("patch", "--owner", "alice", "--module", "NOTE", "--record", id, "--expect-revision", "1", "--key", "p1", "--title", "Groceries v2")
	require.Equal(t, writeShape, sortedKeys(patched))
	require.Equal(t, "NOTE:record:"+id+":patch", patched["operation"])
	require.Equal(t, float64(2), obj(t, patched["record"])["revision"])

	replayed := c.ok(create...)
	require.Equal(t, "REPLAYED", replayed["outcome"])
	require.Equal(t, float64(1), obj(t, replayed["record"])["revision"], "after a patch, replaying the create still returns revision 1")
	require.Equal(t, "Groceries", obj(t, replayed["record"])["title"])

	noKey := c.ok("create", "--owner", "alice", "--module", "NOTE", "--title", "no key")
	require.Nil(t, noKey["key"])
	require.Nil(t, noKey["envelope"])

	mem := obj(t, c.ok("create", "--owner", "alice", "--module", "MEM-001", "--key", "m1", "--title", "memo",
		"--payload", `{"originalContent":"hi","currentContent":"hi"}`)["record"])
	blocked := c.ok("action", "--owner", "alice", "--module", "MEM-001", "--record", mem["id"].(string), "--feature", "F02", "--key", "pub")
	require.Equal(t, writeShape, sortedKeys(blocked))
	require.Equal(t, "MEM-001:record:"+mem["id"].(string)+":feature:F02", blocked["operation"])
	exec := obj(t, blocked["execution"])
	require.Equal(t, "blocked_external", exec["mode"])
	require.Equal(t, "BLOCKED", exec["status"])
	require.Equal(t, float64(1), obj(t, blocked["record"])["revision"], "the revision is unchanged")
	require.Equal(t, []string{"executionId", "recordId", "revision"}, sortedKeys(obj(t, obj(t, blocked["envelope"])["result"])))
	replayedAction := c.ok("action", "--owner", "alice", "--module", "MEM-001", "--record", mem["id"].(string), "--feature", "F02", "--key", "pub")
	require.Equal(t, "REPLAYED", replayedAction["outcome"])
	require.Equal(t, exec["id"], obj(t, replayedAction["execution"])["id"])
}

func TestRecordKeysKeyAndHistoryPrintTheirShapes(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	created := c.ok("create", "--owner", "alice", "--module", "NOTE", "--key", "k1", "--title", "Secret title", "--payload", `{"body":"secret body"}`)
	id := obj(t, created["record"])["id"].(string)
	c.ok("patch", "--owner", "alice", "--module", "NOTE", "--record", id, "--expect-revision", "1", "--key", "k2", "--summary", "s")

	record := c.ok("record", "--owner", "alice", "--module", "NOTE", "--record", id)
	require.Equal(t, []string{"audit", "executions", "record", "revisions"}, sortedKeys(record))
	require.Equal(t, recordShape, sortedKeys(obj(t, record["record"])))
	require.Len(t, record["revisions"], 2)
	require.NotNil(t, record["executions"], "executions is a list even when empty, never null")
	require.Len(t, record["executions"], 0)
	audit := record["audit"].([]any)
	require.Len(t, audit, 2)
	for _, a := range audit {
		ev := obj(t, a)
		for _, k := range []string{"id", "action", "revision", "executionId", "key", "at"} {
			require.Contains(t, ev, k)
		}
	}
	require.Equal(t, "RECORD_CREATED", obj(t, audit[0])["action"])
	require.Equal(t, "k1", obj(t, audit[0])["key"])

	keys := c.ok("keys", "--owner", "alice")
	require.Equal(t, []string{"keys", "next"}, sortedKeys(keys))
	require.Nil(t, keys["next"])
	list := keys["keys"].([]any)
	require.Len(t, list, 2)
	for _, it := range list {
		require.Equal(t, []string{"createdAt", "expired", "expiresAt", "key", "operation", "policy", "status"}, sortedKeys(obj(t, it)))
		require.Equal(t, "record-snapshot-reference-v1", obj(t, it)["policy"])
		require.Equal(t, "SUCCEEDED", obj(t, it)["status"])
	}
	page1 := c.ok("keys", "--owner", "alice", "--limit", "1")
	require.Len(t, page1["keys"], 1)
	next, ok := page1["next"].(string)
	require.True(t, ok && next != "", "a full page has a next cursor")
	page2 := c.ok("keys", "--owner", "alice", "--limit", "1", "--cursor", next)
	require.Len(t, page2["keys"], 1)
	require.NotEqual(t, obj(t, page1["keys"].([]any)[0])["key"], obj(t, page2["keys"].([]any)[0])["key"])
	empty := c.ok("keys", "--owner", "nobody")
	require.NotNil(t, empty["keys"])
	require.Len(t, empty["keys"], 0)

	key := c.ok("key", "--owner", "alice", "--key", "k1")
	require.Equal(t, []string{"createdAt", "envelope", "expired", "expiresAt", "fingerprint", "key", "latest", "legacy", "lives", "next", "operation",
		"problems", "replay", "restored", "state", "status", "verdict", "verdictKind"}, sortedKeys(key))
	require.Equal(t, false, key["legacy"])
	restored := obj(t, key["restored"])
	require.Equal(t, []string{"execution", "record"}, sortedKeys(restored))
	require.Nil(t, restored["execution"])
	require.Equal(t, []string{"record"}, sortedKeys(obj(t, key["latest"])))
	require.Equal(t, recordShape, sortedKeys(obj(t, restored["record"])))
	require.Equal(t, float64(1), obj(t, restored["record"])["revision"])
	require.Equal(t, float64(2), obj(t, obj(t, key["latest"])["record"])["revision"], "drift is visible")
	envText, err := json.Marshal(key["envelope"])
	require.NoError(t, err)
	require.NotContains(t, string(envText), "Secret")
	require.NotContains(t, string(envText), "secret body")
	require.Equal(t, []string{"policy", "result", "schemaVersion"}, sortedKeys(obj(t, key["envelope"])))

	history := c.ok("history", "--owner", "alice")
	require.Equal(t, []string{"events", "next"}, sortedKeys(history))
	events := history["events"].([]any)
	require.NotEmpty(t, events)
	kinds := map[string]bool{}
	var last time.Time
	for _, e := range events {
		ev := obj(t, e)
		require.Contains(t, ev, "at")
		require.Contains(t, ev, "kind")
		kinds[ev["kind"].(string)] = true
		// Times, not their text: RFC 3339 drops trailing zeros, so "06.4886Z" is earlier than
		// "06.488619Z" though it sorts after it as a string.
		at, err := time.Parse(time.RFC3339Nano, ev["at"].(string))
		require.NoError(t, err)
		require.False(t, at.Before(last), "oldest first: %s after %s", at, last)
		last = at
	}
	require.Equal(t, map[string]bool{"audit": true, "key": true, "revision": true}, kinds)
	none := c.ok("history", "--owner", "nobody")
	require.NotNil(t, none["events"], "events is a list even when empty, never null")
	require.Len(t, none["events"], 0)
}

func TestExitCodesAndErrorObjectsFollowTheSpec(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	created := c.ok("create", "--owner", "alice", "--module", "NOTE", "--key", "k1", "--title", "t")
	id := obj(t, created["record"])["id"].(string)

	e := c.fails(3, "create", "--owner", "alice", "--module", "NOTE", "--key", "bad key", "--title", "t")
	require.Equal(t, "VALIDATION_FAILED", e["code"])
	require.Equal(t, float64(422), e["status"])
	require.True(t, strings.HasPrefix(e["message"].(string), "key:"), e["message"])

	e = c.fails(2, "create", "--owner", "alice", "--module", "NOTE", "--title", "t", "--no-such-flag")
	require.Equal(t, "USAGE", e["code"])
	e = c.fails(2, "create", "--owner", "alice", "--module", "NOTE")
	require.Equal(t, "USAGE", e["code"], "a missing required flag is usage")
	e = c.fails(2, "create", "--owner", "alice", "--module", "NOTE", "--title", "t", "--payload", "not json")
	require.Equal(t, "USAGE", e["code"])
	// --json after the bad flag is never parsed; the error is still the JSON object asked for.
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), []string{"--dsn", c.db.DSN, "create", "--owner", "alice", "--no-such-flag", "--json"},
		&out, &errOut, func(string) string { return "" })
	require.Equal(t, 2, code)
	require.Empty(t, errOut.String())
	require.Equal(t, "USAGE", obj(t, c.object(out.String())["error"])["code"])

	for _, bad := range []struct{ payload, field string }{
		{`[1,2]`, "payload:"},
		{`{"a":"\u0000"}`, "payload.a:"},
		{`{"a":"\ud800"}`, "payload.a:"},
		{`{"a":1e-99999}`, "payload.a:"},
	} {
		e = c.fails(3, "create", "--owner", "alice", "--module", "NOTE", "--key", "bad-payload", "--title", "t", "--payload", bad.payload)
		require.Equal(t, "VALIDATION_FAILED", e["code"], bad.payload)
		require.True(t, strings.HasPrefix(e["message"].(string), bad.field), e["message"])
	}
	e = c.fails(3, "create", "--owner", "alice", "--module", "NOTE", "--title", strings.Repeat("t", 201))
	require.Contains(t, e["message"], "title:")

	e = c.fails(3, "create", "--owner", "alice", "--module", "MEM-001", "--key", "k1", "--title", "t", "--payload", `{"originalContent":"a","currentContent":"a"}`)
	require.Equal(t, "IDEMPOTENCY_SCOPE_CONFLICT", e["code"])
	require.Equal(t, float64(409), e["status"])
	e = c.fails(3, "create", "--owner", "alice", "--module", "NOTE", "--key", "k1", "--title", "other")
	require.Equal(t, "IDEMPOTENCY_KEY_REUSED", e["code"])
	e = c.fails(3, "patch", "--owner", "alice", "--module", "NOTE", "--record", id, "--expect-revision", "7", "--title", "x")
	require.Equal(t, "REVISION_CONFLICT", e["code"])
	e = c.fails(3, "patch", "--owner", "bob", "--module", "NOTE", "--record", id, "--expect-revision", "1", "--title", "x")
	require.Equal(t, "RECORD_NOT_FOUND", e["code"])
	require.Equal(t, float64(404), e["status"])
	e = c.fails(3, "create", "--owner", "alice", "--module", "IDENTITY", "--key", "id", "--title", "me")
	require.Equal(t, "LEGACY_WRITE_DISABLED", e["code"])
	require.Equal(t, float64(410), e["status"])
	require.Zero(t, c.count(`SELECT count(*) FROM idempotency_record WHERE idempotency_key = 'id'`))

	_, err := c.db.Pool.Exec(context.Background(), `UPDATE idempotency_record SET response = jsonb_set(response, '{policy}', '"record-snapshot-reference-v0"') WHERE idempotency_key = 'k1'`)
	require.NoError(t, err)
	e = c.fails(4, "create", "--owner", "alice", "--module", "NOTE", "--key", "k1", "--title", "t")
	require.Equal(t, "IDEMPOTENCY_POLICY_MISMATCH", e["code"])
	require.Equal(t, float64(500), e["status"])
	// `key` shows why a replay would fail closed, without failing itself.
	key := c.ok("key", "--owner", "alice", "--key", "k1")
	require.Equal(t, "IDEMPOTENCY_POLICY_MISMATCH", obj(t, key["restoreError"])["code"])

	_, err = c.db.Pool.Exec(context.Background(), `UPDATE record_revision SET snapshot = jsonb_set(snapshot, '{ownerId}', '"mallory"') WHERE record_id = $1`, id)
	require.NoError(t, err)
	_, err = c.db.Pool.Exec(context.Background(), `UPDATE idempotency_record SET response = jsonb_set(response, '{policy}', '"record-snapshot-reference-v1"') WHERE idempotency_key = 'k1'`)
	require.NoError(t, err)
	e = c.fails(4, "create", "--owner", "alice", "--module", "NOTE", "--key", "k1", "--title", "t")
	require.Equal(t, "SNAPSHOT_INTEGRITY_VIOLATION", e["code"])
}

func TestLegacyVerifyThenRedactPrintsTheCountAndIsSafeToRerun(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	c.ok("create", "--owner", "alice", "--module", "NOTE", "--key", "typed", "--title", "t")
	for _, k := range []string{"l1", "l2"} {
		_, err := c.db.Pool.Exec(context.Background(), `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
			VALUES ('alice', $1, 'identity:create', repeat('0', 64), 'SUCCEEDED', '{"policy":"raw-json-v1","body":{"name":"x"}}', now(), now() + interval '1 day', now())`, k)
		require.NoError(t, err)
	}
	e := c.fails(3, "legacy", "redact")
	require.Equal(t, "VALIDATION_FAILED", e["code"])
	require.Contains(t, e["message"], "legacy verify")
	require.Equal(t, 3, c.count(`SELECT count(*) FROM idempotency_record`))

	key := c.ok("key", "--owner", "alice", "--key", "l1")
	require.Equal(t, true, key["legacy"])

	verify := c.ok("legacy", "verify")
	require.Equal(t, "passed", verify["status"])
	require.Equal(t, float64(2), verify["receipts"])
	redact := c.ok("legacy", "redact")
	require.Equal(t, map[string]any{"deleted": float64(2)}, redact)
	require.Equal(t, 1, c.count(`SELECT count(*) FROM idempotency_record`))
	require.Equal(t, map[string]any{"deleted": float64(0)}, c.ok("legacy", "redact"))

	code, out, _ := c.exec("legacy", "redact")
	require.Equal(t, 0, code)
	require.Equal(t, `{"deleted":0}`, compactJSON(t, out))
}

func TestDemoSeedRerunWritesNothingNew(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	first := c.ok("demo", "seed")
	require.Greater(t, first["writes"], float64(0))
	counts := func() []int {
		var out []int
		for _, tb := range []string{"record", "record_revision", "feature_execution", "audit_event", "idempotency_record", "outbox_message", "commitment_review"} {
			out = append(out, c.count(`SELECT count(*) FROM `+tb))
		}
		return out
	}
	before := counts()
	second := c.ok("demo", "seed")
	require.Equal(t, before, counts())
	outcomes := obj(t, second["outcomes"])
	require.Equal(t, []string{"REPLAYED"}, sortedKeys(outcomes), "every write of a rerun replays")
	require.Equal(t, float64(0), second["legacyReceipts"])
}

func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, json.Compact(&b, []byte(s)))
	return b.String()
}

// demoSteps decodes a walk-through's steps and requires every check to hold.
func demoSteps(t *testing.T, out map[string]any, want int) []map[string]any {
	t.Helper()
	raw, ok := out["steps"].([]any)
	require.True(t, ok, "steps: %v", out)
	require.Len(t, raw, want)
	var steps []map[string]any
	for _, s := range raw {
		step := obj(t, s)
		for _, c := range step["checks"].([]any) {
			check := obj(t, c)
			require.Equal(t, true, check["ok"], "%s: %v", step["step"], check)
			require.NotEmpty(t, check["claim"], "every check names its claim")
			require.NotEmpty(t, check["text"], "and what the database showed")
		}
		steps = append(steps, step)
	}
	return steps
}

func TestDemoOutboxChecksEveryStepAndASecondRunSaysWhatItReused(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	first := c.ok("demo", "outbox")
	steps := demoSteps(t, first, 9)
	require.Equal(t, []any{}, first["reused"], "a first run reuses nothing")
	require.Equal(t, "PENDING (outcome EXECUTED)", steps[1]["result"])
	require.Equal(t, "FAILED", obj(t, steps[7]["outboxMessage"])["status"])
	record := obj(t, steps[0]["record"])["id"].(string)

	second := c.ok("demo", "outbox")
	steps = demoSteps(t, second, 9)
	reused := second["reused"].([]any)
	require.Len(t, reused, 1)
	require.Contains(t, reused[0], record, "the second run names the record it reused")
	require.Equal(t, "REPLAYED", steps[0]["outcome"])
	require.Equal(t, 1, c.count(`SELECT count(*) FROM record WHERE module_code = 'COMMITMENT'`))
	require.Equal(t, 6, c.count(`SELECT count(*) FROM outbox_message`))

	blocked := c.ok("demo", "blocked-external")
	steps = demoSteps(t, blocked, 3)
	require.Equal(t, "BLOCKED (outcome EXECUTED)", steps[1]["result"])
	require.NotContains(t, blocked, "reused")
}

// The CLI builds a write as the workbench's form does: `create` with or without --summary ""
// and --payload '{}' is one request, so a create made in the form replays from the CLI with the
// flags the form shows; a different body is IDEMPOTENCY_KEY_REUSED naming the fields that differ.
func TestTheCLIsCreateWithTheFormsFlagsReplaysIt(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	first := c.ok("create", "--owner", "alice", "--module", "NOTE", "--key", "form-1", "--title", "form record", "--summary", "", "--payload", "{}")
	require.Equal(t, "EXECUTED", first["outcome"])
	again := c.ok("create", "--owner", "alice", "--module", "NOTE", "--key", "form-1", "--title", "form record")
	require.Equal(t, "REPLAYED", again["outcome"])
	require.Equal(t, obj(t, first["record"])["id"], obj(t, again["record"])["id"])
	e := c.fails(3, "create", "--owner", "alice", "--module", "NOTE", "--key", "form-1", "--title", "other", "--payload", `{"a":1}`)
	require.Equal(t, "IDEMPOTENCY_KEY_REUSED", e["code"])
	require.Contains(t, e["message"], "this request differs from the key's first request in title, payload (at payload.a)")
}
