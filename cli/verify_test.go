package cli_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/wire"
)

func TestVerifyCommandExits0CleanAnd4WithViolations(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	created := c.ok("create", "--owner", "alice", "--module", "NOTE", "--key", "v1", "--title", "t")
	id := obj(t, created["record"])["id"].(string)
	c.ok("action", "--owner", "alice", "--module", "NOTE", "--record", id, "--feature", "F01", "--key", "v2")

	rep := c.ok("verify", "--all")
	require.Equal(t, []string{"batches", "checked", "invariants", "ok", "owner", "passMs", "tookMs", "unattributed", "violations"}, sortedKeys(rep))
	require.Equal(t, true, rep["ok"])
	invs := rep["invariants"].([]any)
	require.Len(t, invs, 17)
	require.Equal(t, []string{"count", "description", "examples", "name"}, sortedKeys(obj(t, invs[0])))

	_, err := c.db.Pool.Exec(t.Context(), `UPDATE record SET revision = 5 WHERE id = $1`, id)
	require.NoError(t, err)
	code, out, errOut := c.exec("verify", "--owner", "alice")
	require.Equal(t, wire.ExitInternal, code, out)
	rep = c.object(out)
	require.Equal(t, false, rep["ok"])
	require.Equal(t, "alice", rep["owner"])
	require.EqualValues(t, 2, rep["violations"], "revisions_dense and record_is_latest_revision")
	require.Contains(t, errOut, "INVARIANT_VIOLATIONS")
	var dense map[string]any
	for _, inv := range rep["invariants"].([]any) {
		if obj(t, inv)["name"] == "revisions_dense" {
			dense = obj(t, inv)
		}
	}
	require.EqualValues(t, 1, dense["count"])
	ex := obj(t, dense["examples"].([]any)[0])
	require.Equal(t, "alice", ex["owner"])
	require.Equal(t, id, ex["record"])
	require.Contains(t, ex["detail"], "record.revision is 5 but it has 2 revision(s) numbered 1..2")

	// Another owner is clean.
	require.Equal(t, true, c.ok("verify", "--owner", "bob")["ok"])

	c.fails(wire.ExitUsage, "verify")
	c.fails(wire.ExitUsage, "verify", "--owner", "alice", "--all")
	c.fails(wire.ExitUsage, "verify", "--all", "--since", "yesterday")
	c.fails(wire.ExitUsage, "verify", "--all", "--progress", "sometimes")
}

// flagged are the keys each invariant of a verify report names in its examples.
func flagged(t *testing.T, rep map[string]any) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, inv := range rep["invariants"].([]any) {
		i := obj(t, inv)
		for _, ex := range i["examples"].([]any) {
			if k, ok := obj(t, ex)["key"].(string); ok {
				out[i["name"].(string)] = append(out[i["name"].(string)], k)
			}
		}
	}
	return out
}

// Issue 22, item 1: each class of planted damage that changes what a client gets or what support
// would conclude — each planted with SQL on real PostgreSQL, as psql would — makes verify exit 4
// naming its invariant and the key. (Each class may break more than one invariant; the one named
// here is the class's own.)
func TestVerifyExits4NamingTheInvariantAndTheKeyForEachClassOfTampering(t *testing.T) {
	t.Parallel()
	type history struct {
		c       *kernelCLI
		note    string // a NOTE created under c1, patched under p2, p3, p4
		mem     string // a MEM-001 record created under m1, rewritten (F01) under r1
		rewrite string // r1's execution
	}
	// The history is written once through the CLI, into a template; each case tampers with a
	// copy of it (the ids read back from the copy, which are the template's).
	setupHistory := func(t *testing.T) history {
		name := testdb.NewDatabaseFrom(t, "verify-history", func(tb testing.TB, name string) {
			tt := tb.(*testing.T)
			c := &kernelCLI{t: tt, db: &testdb.DB{DSN: testdb.DSNOf(tb, name), Name: name}}
			c.ok("migrate")
			note := obj(tt, c.ok("create", "--owner", "alice", "--module", "NOTE", "--key", "c1", "--title", "one", "--payload", `{"text":"one"}`)["record"])["id"].(string)
			for i, k := range []string{"p2", "p3", "p4"} {
				c.ok("patch", "--owner", "alice", "--module", "NOTE", "--record", note, "--expect-revision", fmt.Sprint(i+1), "--key", k, "--title", k)
			}
			mem := obj(tt, c.ok("create", "--owner", "alice", "--module", "MEM-001", "--key", "m1", "--title", "memo",
				"--payload", `{"originalContent":"  a   b ","currentContent":"  a   b "}`)["record"])["id"].(string)
			c.ok("action", "--owner", "alice", "--module", "MEM-001", "--record", mem, "--feature", "F01", "--key", "r1")
			require.Equal(tt, true, c.ok("verify", "--owner", "alice")["ok"], "clean before the damage")
		})
		dsn := testdb.DSNOf(t, name)
		pool, err := pgxpool.New(context.Background(), dsn)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		h := history{c: &kernelCLI{t: t, db: &testdb.DB{DSN: dsn, Pool: pool, Name: name}}}
		for q, v := range map[string]*string{
			`SELECT id FROM record WHERE module_code = 'NOTE'`:              &h.note,
			`SELECT id FROM record WHERE module_code = 'MEM-001'`:           &h.mem,
			`SELECT id FROM feature_execution WHERE idempotency_key = 'r1'`: &h.rewrite,
		} {
			require.NoError(t, pool.QueryRow(context.Background(), q).Scan(v), q)
		}
		return h
	}
	cases := []struct {
		name      string
		plant     func(h history)
		invariant string
		key       string
	}{
		{"a patch key's envelope redirected to revision 3, written by another key", func(h history) {
			h.c.sql(`UPDATE idempotency_record SET response = jsonb_set(response, '{result,revision}', '3') WHERE idempotency_key = 'p2'`)
		}, "envelope_own_rows", "p2"},
		{"a create key's envelope pointed at revision 4", func(h history) {
			h.c.sql(`UPDATE idempotency_record SET response = jsonb_set(response, '{result,revision}', '4') WHERE idempotency_key = 'c1'`)
		}, "envelope_own_rows", "c1"},
		{"a ghost key holding a copy of another key's envelope", func(h history) {
			h.c.sql(`INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at)
				SELECT owner_id, 'ghost', operation, fingerprint, status, response, created_at, expires_at, updated_at FROM idempotency_record WHERE idempotency_key = 'p3'`)
		}, "envelope_own_rows", "ghost"},
		{"an old snapshot's payload changed with psql", func(h history) {
			h.c.sql(`UPDATE record_revision SET snapshot = jsonb_set(snapshot, '{payload,text}', '"HACKED"') WHERE record_id = $1 AND revision = 1`, h.note)
		}, "revision_chain", "c1"},
		{"an old snapshot's title changed with psql", func(h history) {
			h.c.sql(`UPDATE record_revision SET snapshot = jsonb_set(snapshot, '{title}', '"HACKED"') WHERE record_id = $1 AND revision = 2`, h.note)
		}, "revision_chain", "p2"},
		{"the latest snapshot and the record row changed together", func(h history) {
			h.c.sql(`UPDATE record_revision SET snapshot = jsonb_set(snapshot, '{title}', '"HACKED"') WHERE record_id = $1 AND revision = 4`, h.note)
			h.c.sql(`UPDATE record SET title = 'HACKED' WHERE id = $1`, h.note)
		}, "revision_chain", "p4"},
		{"an execution's output changed", func(h history) {
			h.c.sql(`UPDATE feature_execution SET output = '{"rewritten": "HACKED"}' WHERE id = $1`, h.rewrite)
		}, "execution_attested", "r1"},
		{"a duplicate execution with its own audit event under one key", func(h history) {
			h.c.sql(`INSERT INTO feature_execution SELECT owner_id, id || '-dup', module_code, record_id, feature_id, mode, status, record_revision,
				input, output, idempotency_key, created_at, updated_at, written_xid, digest FROM feature_execution WHERE id = $1`, h.rewrite)
			h.c.sql(`INSERT INTO audit_event SELECT owner_id, id || '-dup', module_code, record_id, action, revision, execution_id || '-dup',
				idempotency_key, detail, at, written_xid, key_expires_at FROM audit_event WHERE execution_id = $1`, h.rewrite)
		}, "key_rows_once", "r1"},
		{"a duplicate create (a second record, revision and audit) under one key", func(h history) {
			h.c.sql(`INSERT INTO record (owner_id, id, module_code, revision, title, summary, payload, created_at, updated_at)
				SELECT owner_id, 'TWIN' || id, module_code, 1, 'one', '', '{"text":"one"}', created_at, created_at FROM record WHERE id = $1`, h.note)
			h.c.sql(`INSERT INTO record_revision (owner_id, record_id, revision, snapshot, idempotency_key, created_at)
				SELECT owner_id, 'TWIN' || record_id, 1, jsonb_set(snapshot, '{id}', to_jsonb('TWIN' || record_id)), idempotency_key, created_at
				FROM record_revision WHERE record_id = $1 AND revision = 1`, h.note)
			h.c.sql(`INSERT INTO audit_event (owner_id, id, module_code, record_id, action, revision, idempotency_key, detail, at)
				SELECT owner_id, 'TWIN' || id, module_code, 'TWIN' || record_id, action, revision, idempotency_key, detail, at
				FROM audit_event WHERE record_id = $1 AND action = 'RECORD_CREATED'`, h.note)
		}, "key_runs_once", "c1"},
		{"two revisions carrying one key", func(h history) {
			h.c.sql(`UPDATE record_revision SET idempotency_key = 'c1' WHERE record_id = $1 AND revision = 2`, h.note)
		}, "key_rows_once", "c1"},
		{"a duplicate audit event for one revision", func(h history) {
			h.c.sql(`INSERT INTO audit_event (owner_id, id, module_code, record_id, action, revision, idempotency_key, detail, at)
				SELECT owner_id, id || '-dup', module_code, record_id, action, revision, idempotency_key, detail, at
				FROM audit_event WHERE idempotency_key = 'p3'`)
		}, "revision_audited", "p3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := setupHistory(t)
			tc.plant(h)
			code, out, errOut := h.c.exec("verify", "--owner", "alice")
			require.Equal(t, wire.ExitInternal, code, "stdout %s stderr %s", out, errOut)
			require.Contains(t, errOut, "INVARIANT_VIOLATIONS")
			rep := h.c.object(out)
			got := flagged(t, rep)
			t.Logf("flagged: %v", got)
			require.Contains(t, got[tc.invariant], tc.key, "verify names %s and key %s: %v", tc.invariant, tc.key, got)
			// The text report names it too, for a person.
			text := h.c.textExit(wire.ExitInternal, "verify", "--owner", "alice")
			require.Contains(t, text, "✗ "+tc.invariant)
			require.Contains(t, text, "key "+tc.key)
			require.NotContains(t, text, `\"`, "a detail's quotes are shown as typed, not escaped")
		})
	}
}

// A clean demo database, and the content of issue 22's item 2 (what the API accepts), exit 0.
func TestVerifyExits0OnTheDemoDataAndOnContentTheAPIAccepted(t *testing.T) {
	t.Parallel()
	c := newKernelCLI(t)
	c.ok("demo", "seed")
	c.ok("create", "--owner", "carol", "--module", "NOTE", "--key", "dsn", "--title", "a connection string",
		"--payload", `{"url":"postgres://user:pass@db.example/app"}`)
	c.ok("create", "--owner", "carol", "--module", "NOTE", "--key", "bearer", "--title", "a header",
		"--summary", "Authorization: Bearer abcdef123456")
	require.Equal(t, true, c.ok("verify", "--owner", "carol")["ok"])
	rep := c.ok("verify", "--all")
	require.Equal(t, true, rep["ok"], "%v", rep["invariants"])
	text := c.text("verify", "--all")
	require.NotContains(t, text, "✗")
	require.True(t, strings.HasPrefix(text, "verify every owner: "), text)
}
