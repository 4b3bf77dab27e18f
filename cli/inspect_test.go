package cli_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/cli"
)

// text runs a command without --json, as a person at a terminal would, and returns stdout.
func (c *kernelCLI) text(args ...string) string {
	c.t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"XDG_CONFIG_HOME": c.t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code := cli.Run(ctx, append([]string{"--dsn", c.db.DSN, "--allow-writes"}, args...), &out, &errb, func(k string) string { return env[k] })
	require.Equal(c.t, 0, code, "args %v: stdout %s stderr %s", args, out.String(), errb.String())
	return out.String()
}

func (c *kernelCLI) sql(query string, args ...any) {
	c.t.Helper()
	_, err := c.db.Pool.Exec(context.Background(), query, args...)
	require.NoError(c.t, err)
}

// requireTerminalSafe fails if out holds anything a terminal would obey.
func requireTerminalSafe(t *testing.T, out string) {
	t.Helper()
	for _, r := range out {
		if r != '\n' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0)) {
			t.Fatalf("output holds control character %U: %q", r, out)
		}
	}
}

func TestKeyAndKeysShowEveryKeyState(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	c.ok("create", "--owner", "alice", "--module", "NOTE", "--key", "ok-1", "--title", "t")
	c.ok("create", "--owner", "alice", "--module", "NOTE", "--key", "tampered", "--title", "t")
	c.sql(`UPDATE idempotency_record SET response = response || '{"title": "smuggled"}' WHERE idempotency_key = 'tampered'`)
	c.sql(`INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at) VALUES
		('alice', 'stuck', 'NOTE:record:create', repeat('a', 64), 'PROCESSING', NULL, now(), now() + interval '1 hour', now()),
		('alice', 'gone', 'NOTE:record:create', repeat('b', 64), 'SUCCEEDED', (SELECT response FROM idempotency_record WHERE idempotency_key = 'ok-1'),
			now() - interval '2 days', now() - interval '1 day', now() - interval '2 days'),
		('alice', 'legacy', 'identity:create', repeat('c', 64), 'SUCCEEDED', '{"policy": "raw-json-v1", "body": {"id": "x"}}', now(), now() + interval '1 day', now())`)

	// keys lists every state, the PROCESSING row included, instead of failing the owner.
	list := c.ok("keys", "--owner", "alice")["keys"].([]any)
	byKey := map[string]map[string]any{}
	for _, it := range list {
		byKey[obj(t, it)["key"].(string)] = obj(t, it)
	}
	require.Len(t, byKey, 5)
	require.Equal(t, "PROCESSING", byKey["stuck"]["status"])
	require.Nil(t, byKey["stuck"]["policy"])
	require.Equal(t, true, byKey["gone"]["expired"])
	require.Equal(t, "raw-json-v1", byKey["legacy"]["policy"])

	states := map[string]string{"ok-1": "SUCCEEDED", "stuck": "PROCESSING", "gone": "EXPIRED", "legacy": "LEGACY", "tampered": "FAILS_CLOSED"}
	for k, want := range states {
		v := c.ok("key", "--owner", "alice", "--key", k)
		require.Equal(t, want, v["state"], "key %s", k)
		require.NotEmpty(t, v["verdict"])
	}
	stuck := c.ok("key", "--owner", "alice", "--key", "stuck")
	require.Nil(t, stuck["envelope"])
	require.Contains(t, stuck["verdict"], "409 IDEMPOTENCY_IN_PROGRESS")
	tampered := c.ok("key", "--owner", "alice", "--key", "tampered")
	require.Equal(t, "SNAPSHOT_INTEGRITY_VIOLATION", obj(t, tampered["restoreError"])["code"])
	require.Contains(t, obj(t, tampered["envelope"]), "title", "the stored envelope as it is")

	// The text forms say the same.
	out := c.text("key", "--owner", "alice", "--key", "stuck")
	require.Contains(t, out, "key stuck  PROCESSING")
	require.Contains(t, out, "envelope NULL")
	require.Contains(t, out, "409 IDEMPOTENCY_IN_PROGRESS")
	out = c.text("key", "--owner", "alice", "--key", "tampered")
	require.Contains(t, out, "a replay fails closed: 500 SNAPSHOT_INTEGRITY_VIOLATION")
	require.Contains(t, out, `"title":"smuggled"`)
	out = c.text("key", "--owner", "alice", "--key", "ok-1")
	require.Contains(t, out, "a replay returns revision 1")
	require.Contains(t, out, "current life (reserved")
	out = c.text("keys", "--owner", "alice")
	require.Contains(t, out, "PROCESSING")
	require.Contains(t, out, "SUCCEEDED (expired)")
}

func TestKeysByPrefixAndHistoryByKeyAndAction(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	for _, k := range []string{"ticket-9", "ticket-10", "other"} {
		c.ok("create", "--owner", "alice", "--module", "NOTE", "--key", k, "--title", "t "+k)
	}
	page := c.ok("keys", "--owner", "alice", "--prefix", "ticket-")
	var got []string
	for _, it := range page["keys"].([]any) {
		got = append(got, obj(t, it)["key"].(string))
	}
	require.Equal(t, []string{"ticket-10", "ticket-9"}, got, "exactly the keys with the prefix, A→Z")
	e := c.fails(3, "keys", "--owner", "alice", "--prefix", "bad prefix")
	require.Equal(t, "VALIDATION_FAILED", e["code"])

	one := c.ok("history", "--owner", "alice", "--key", "other")["events"].([]any)
	require.Len(t, one, 3, "the key row, its revision and its audit event")
	for _, ev := range one {
		require.Equal(t, "other", obj(t, ev)["key"])
	}
	created := c.ok("history", "--owner", "alice", "--action", "RECORD_CREATED", "--desc")["events"].([]any)
	require.Len(t, created, 3)
	for _, ev := range created {
		require.Equal(t, "audit", obj(t, ev)["kind"])
	}
	byPrefix := c.ok("history", "--owner", "alice", "--key-prefix", "ticket-")["events"].([]any)
	require.Len(t, byPrefix, 6)
}

func TestHistoryExportsTheWholeOwnerAsCSVOrOneJSONObject(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	for i := 0; i < 3; i++ {
		c.ok("create", "--owner", "alice", "--module", "NOTE", "--title", "t")
	}
	c.sql(`INSERT INTO audit_event (owner_id, id, module_code, action, detail, at)
		SELECT 'alice', 'bulk' || lpad(g::text, 6, '0'), 'NOTE', 'BULK', '{}', now() + g * interval '1 ms' FROM generate_series(1, 1200) g`)
	total := 3*2 + 1200 // each unkeyed create: a revision and an audit event

	doc := c.ok("history", "--owner", "alice", "--format", "json")
	require.Len(t, doc["events"], total, "every entry, across three pages of 500")
	require.Nil(t, doc["next"])

	out := c.text("history", "--owner", "alice", "--format", "csv")
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, total+1)
	require.Equal(t, "at", rows[0][0])

	limited := c.ok("history", "--owner", "alice", "--format", "json", "--limit", "10")
	require.Len(t, limited["events"], 10)
	require.NotNil(t, limited["next"], "a bounded export says where to continue")

	e := c.fails(2, "history", "--owner", "alice", "--format", "xml")
	require.Equal(t, "USAGE", e["code"])
}

// Issue 28: a --limit outside 1–500 (a page) is USAGE, never "everything" with exit 0; an export
// takes any positive limit.
func TestALimitOutsideItsRangeIsUsage(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	c.ok("create", "--owner", "alice", "--module", "NOTE", "--title", "t")
	for _, args := range [][]string{
		{"history", "--owner", "alice", "--limit", "-1"},
		{"history", "--owner", "alice", "--limit", "0"},
		{"history", "--owner", "alice", "--limit", "501"},
		{"history", "--owner", "alice", "--format", "json", "--limit", "0"},
		{"keys", "--owner", "alice", "--limit", "0"},
		{"keys", "--owner", "alice", "--limit", "501"},
	} {
		e := c.fails(2, args...)
		require.Equal(t, "USAGE", e["code"], "%v", args)
		require.Contains(t, e["message"], "--limit", "%v", args)
	}
	require.Len(t, c.ok("history", "--owner", "alice", "--limit", "1")["events"], 1)
	require.Len(t, c.ok("history", "--owner", "alice", "--format", "json", "--limit", "1000")["events"], 2)
}

func TestTextCommandsShowHostileStoredStringsTerminalSafe(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	created := c.ok("create", "--owner", "alice", "--module", "NOTE", "--key", "hostile", "--title", "plain")
	id := obj(t, created["record"])["id"].(string)
	// Data planted the way an old database or psql holds it.
	c.sql(`UPDATE record SET title = E'\x1b[31mRED\x1b[0m \x1b[2J\nsecond\tline' WHERE id = $1`, id)
	c.sql(`UPDATE audit_event SET action = E'RECORD_\x1b[2JCREATED' WHERE record_id = $1`, id)
	c.sql(`UPDATE idempotency_record SET operation = E'NOTE:record:create\x1b]52;c;aGk=\x07' WHERE idempotency_key = 'hostile'`)

	out := c.text("record", "--owner", "alice", "--module", "NOTE", "--record", id)
	requireTerminalSafe(t, out)
	require.Contains(t, out, `"\u001b[31mRED\u001b[0m \u001b[2J\nsecond\tline"`)
	require.Contains(t, out, "RECORD_␛[2JCREATED")
	for _, args := range [][]string{{"keys", "--owner", "alice"}, {"key", "--owner", "alice", "--key", "hostile"}, {"history", "--owner", "alice"}} {
		out := c.text(args...)
		requireTerminalSafe(t, out)
		require.Contains(t, out, "␛]52;c;aGk=␇", "%v", args)
	}
}

// `key` shows what a client gets back for a retry: its replay's body is, indented, what the
// CLI prints for that retry, and the CLI exits with the replay's exit code — a REPLAYED create,
// a PROCESSING leftover (exit 3, 409) and a tampered envelope (exit 4, 500) alike. The text
// form shows the status line and headers too.
func TestKeyShowsWhatTheCLIPrintsForARetry(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	create := func(key string) []string {
		return []string{"create", "--owner", "alice", "--module", "NOTE", "--key", key, "--title", "hello <&>", "--payload", `{"n":1e3}`}
	}
	c.ok(create("ok-1")...)
	c.ok(create("tampered")...)
	c.sql(`UPDATE idempotency_record SET response = response || '{"title": "smuggled"}' WHERE idempotency_key = 'tampered'`)
	c.sql(`INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at) VALUES
		('alice', 'stuck', 'NOTE:record:create', repeat('a', 64), 'PROCESSING', NULL, now(), now() + interval '1 hour', now())`)
	for key, exit := range map[string]int{"ok-1": 0, "stuck": 3, "tampered": 4} {
		replay := obj(t, c.ok("key", "--owner", "alice", "--key", key)["replay"])
		code, out, _ := c.exec(create(key)...)
		require.Equal(t, exit, code, key)
		require.Equal(t, float64(exit), replay["exitCode"], key)
		var indented bytes.Buffer
		require.NoError(t, json.Indent(&indented, []byte(replay["body"].(string)), "", "  "))
		require.Equal(t, indented.String(), out, "%s: the replay's body is what the CLI printed", key)
	}
	text := c.text("key", "--owner", "alice", "--key", "ok-1")
	require.Contains(t, text, "what a client gets back for a retry (the CLI exits 0 with this body, indented):\n  HTTP 201 Created\n")
	require.Contains(t, text, "  Idempotent-Replayed: true\n")
	require.Contains(t, text, `  {"outcome":"REPLAYED","waited":false,"key":"ok-1",`)
	text = c.text("key", "--owner", "alice", "--key", "stuck")
	require.Contains(t, text, "  HTTP 409 Conflict\n")
}
