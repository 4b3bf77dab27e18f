package cli_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/cli"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/storm"
)

// prodDB is a fresh migrated database reached as a user would reach production: through a
// pgbouncer, or on a hot standby.
type prodDB struct {
	name string
	dsn  string
	env  map[string]string
}

func (p prodDB) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	env := map[string]string{}
	for k, v := range p.env {
		env[k] = v
	}
	return run(t, env, append([]string{"--dsn", p.dsn}, args...)...)
}

func (p prodDB) ok(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, out, errOut := p.run(t, append(args, "--json")...)
	require.Equal(t, 0, code, "%v\nstdout: %s\nstderr: %s", args, out, errOut)
	return jsonObject(t, out)
}

func (p prodDB) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), testdb.DSNOf(t, p.name))
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func errorOf(t *testing.T, out string) map[string]any {
	t.Helper()
	e, ok := jsonObject(t, out)["error"].(map[string]any)
	require.True(t, ok, "an error object: %s", out)
	return e
}

// TestEveryCommandWorksThroughPgBouncer runs what a user runs against production behind
// pgbouncer — in transaction pooling (told by [database] pooler, here IDEMWORK_POOLER) and in
// session pooling (told by pooler= in the URL) — command after command, each a new client of
// the pooler: writes, replays, every read command, and storms of 200 requests from 2 processes
// with and without in-process sharing, more client connections than the transaction pool has
// server connections.
func TestEveryCommandWorksThroughPgBouncer(t *testing.T) {
	t.Parallel()
	for _, mode := range []store.Pooler{store.PoolerTransaction, store.PoolerSession} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			name := testdb.NewDatabase(t)
			b := testdb.PgBouncer(t, mode)
			p := prodDB{name: name, dsn: b.DSN(name), env: map[string]string{"IDEMWORK_POOLER": string(mode)}}
			if mode == store.PoolerSession {
				p = prodDB{name: name, dsn: b.PoolerDSN(name)}
			}
			w := func(args ...string) map[string]any { return p.ok(t, append([]string{"--allow-writes"}, args...)...) }

			created := w("create", "--owner", "o", "--module", "NOTE", "--key", "k1", "--title", "t", "--payload", `{"text":"x"}`)
			require.Equal(t, "EXECUTED", created["outcome"])
			id := created["record"].(map[string]any)["id"].(string)
			require.Equal(t, "REPLAYED", w("create", "--owner", "o", "--module", "NOTE", "--key", "k1", "--title", "t", "--payload", `{"text":"x"}`)["outcome"])
			require.Equal(t, float64(2), w("patch", "--owner", "o", "--module", "NOTE", "--record", id, "--expect-revision", "1",
				"--key", "p1", "--title", "t2")["record"].(map[string]any)["revision"])
			run := w("action", "--owner", "o", "--module", "NOTE", "--record", id, "--feature", "F01", "--key", "a1")
			require.Equal(t, "EXECUTED", run["outcome"])
			require.Equal(t, "REPLAYED", w("action", "--owner", "o", "--module", "NOTE", "--record", id, "--feature", "F01", "--key", "a1")["outcome"])

			// Every read command, read-only (no --allow-writes) as support staff run them.
			require.Len(t, p.ok(t, "record", "--owner", "o", "--module", "NOTE", "--record", id)["revisions"], 3)
			require.Len(t, p.ok(t, "keys", "--owner", "o")["keys"], 3)
			require.Equal(t, "SUCCEEDED", p.ok(t, "key", "--owner", "o", "--key", "p1")["status"])
			require.NotEmpty(t, p.ok(t, "history", "--owner", "o")["events"])
			require.Equal(t, float64(0), p.ok(t, "migrate", "--status")["pending"])
			code, out, _ := p.run(t, "create", "--owner", "o", "--module", "NOTE", "--key", "k9", "--title", "t", "--json")
			require.Equal(t, 3, code)
			require.Equal(t, "READ_ONLY", errorOf(t, out)["code"])

			for _, storm := range [][]string{
				{"storm", "--n", "200", "--processes", "2"},
				{"storm", "--n", "200", "--processes", "2", "--no-share"},
			} {
				key := fmt.Sprintf("s-%d", len(storm))
				s := w(append(storm, "create", "--owner", "o", "--module", "NOTE", "--key", key, "--title", "storm")...)
				require.Equal(t, map[string]any{"recordIds": float64(1), "revisions": float64(1), "executionIds": float64(0)}, s["distinct"], "%v", storm)
				outcomes := s["outcomes"].(map[string]any)
				require.Equal(t, float64(1), outcomes["EXECUTED"], "%v: %v", storm, outcomes)
				total := 0.0
				for o, n := range outcomes {
					require.Contains(t, []string{"EXECUTED", "REPLAYED", "JOINED"}, o, "%v: no request failed: %v", storm, outcomes)
					total += n.(float64)
				}
				require.Equal(t, float64(200), total)
				require.Equal(t, true, s["verified"].(map[string]any)["agrees"], "%v", s["verified"])
				require.NotContains(t, s, "error")
				require.Equal(t, 1, p.count(t, `SELECT count(*) FROM record_revision WHERE owner_id = 'o' AND idempotency_key = $1`, key))
			}
			if mode == store.PoolerTransaction {
				require.LessOrEqual(t, testdb.ServerBackends(t, name), b.PoolSize, "the storms queued in pgbouncer, within its pool")
			}
			require.Equal(t, 3, p.count(t, `SELECT count(*) FROM record WHERE owner_id = 'o'`))
		})
	}
}

// TestAHotStandbyIsReadOnlyInTheCLIWithItsOwnMessage: a standby opened with --allow-writes is
// still read-only, browsing works, and every write says it is a standby — demo seed included,
// with READ_ONLY rather than the server's raw refusal.
func TestAHotStandbyIsReadOnlyInTheCLIWithItsOwnMessage(t *testing.T) {
	t.Parallel()
	standby := testdb.HotStandby(t)
	name := testdb.NewDatabase(t)
	primary := prodDB{name: name, dsn: testdb.DSNOf(t, name)}
	id := primary.ok(t, "--allow-writes", "create", "--owner", "o", "--module", "NOTE", "--key", "k1", "--title", "t")["record"].(map[string]any)["id"].(string)
	standby.WaitCaughtUp(t)
	p := prodDB{name: name, dsn: standby.DSN(name)}

	// Every read command, with and without --allow-writes.
	for _, w := range [][]string{nil, {"--allow-writes"}} {
		require.Len(t, p.ok(t, append(w, "keys", "--owner", "o")...)["keys"], 1)
		require.Len(t, p.ok(t, append(w, "record", "--owner", "o", "--module", "NOTE", "--record", id)...)["revisions"], 1)
		require.Equal(t, "SUCCEEDED", p.ok(t, append(w, "key", "--owner", "o", "--key", "k1")...)["status"])
		require.NotEmpty(t, p.ok(t, append(w, "history", "--owner", "o")...)["events"])
		require.Equal(t, float64(0), p.ok(t, append(w, "migrate", "--status")...)["pending"])
	}
	for _, args := range [][]string{
		{"create", "--owner", "o", "--module", "NOTE", "--key", "k2", "--title", "t"},
		{"create", "--owner", "o", "--module", "NOTE", "--key", "k1", "--title", "t"}, // a replay: refused too
		{"patch", "--owner", "o", "--module", "NOTE", "--record", id, "--expect-revision", "1", "--title", "t2"},
		{"storm", "--n", "10", "create", "--owner", "o", "--module", "NOTE", "--key", "s", "--title", "t"},
		{"demo", "seed"},
		{"demo", "outbox"},
		{"migrate"},
	} {
		// With --allow-writes or without it: the standby's reason, never "reconnect with
		// --allow-writes", which would only lead here again.
		for _, w := range [][]string{{"--allow-writes", "--json"}, {"--json"}} {
			code, out, _ := p.run(t, append(w, args...)...)
			require.Equal(t, 3, code, "%v %v: %s", w, args, out)
			e := errorOf(t, out)
			require.Equal(t, "READ_ONLY", e["code"], "%v %v", w, args)
			require.Contains(t, e["message"], "this is a hot standby; writes go to the primary", "%v %v", w, args)
		}
	}
	code, _, errOut := p.run(t, "--allow-writes", "demo", "seed")
	require.Equal(t, 3, code)
	require.Contains(t, errOut, "READ_ONLY: this is a hot standby; writes go to the primary")
	require.Equal(t, 1, primary.count(t, `SELECT count(*) FROM idempotency_record`), "nothing was written")
}

// TestAnUnmigratedDatabaseIsNeverMigratedByAReadCommand: read commands on a database given by
// URL read its schema state and stop with SCHEMA_NOT_READY saying what to run — read-only or
// with --allow-writes — and create nothing; a write without --allow-writes is READ_ONLY; only
// `migrate --allow-writes` migrates.
func TestAnUnmigratedDatabaseIsNeverMigratedByAReadCommand(t *testing.T) {
	t.Parallel()
	name := testdb.NewEmptyDatabase(t)
	p := prodDB{name: name, dsn: testdb.DSNOf(t, name)}
	tables := func() int { return p.count(t, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`) }
	for _, args := range [][]string{
		{"keys", "--owner", "o"},
		{"--allow-writes", "keys", "--owner", "o"},
		{"--allow-writes", "history", "--owner", "o"},
		{"--allow-writes", "create", "--owner", "o", "--module", "NOTE", "--title", "t"},
	} {
		code, out, _ := p.run(t, append(args, "--json")...)
		require.Equal(t, 4, code, "%v: %s", args, out)
		e := errorOf(t, out)
		require.Equal(t, "SCHEMA_NOT_READY", e["code"], "%v", args)
		require.Contains(t, e["message"], "not migrated")
		require.Contains(t, e["message"], "run 'idemwork migrate --allow-writes'")
		require.Zero(t, tables(), "%v created nothing", args)
	}
	code, out, _ := p.run(t, "create", "--owner", "o", "--module", "NOTE", "--title", "t", "--json")
	require.Equal(t, 3, code)
	require.Equal(t, "READ_ONLY", errorOf(t, out)["code"])

	st := p.ok(t, "migrate", "--status")
	require.Positive(t, st["pending"])
	require.Zero(t, tables(), "migrate --status only reads")
	code, out, _ = p.run(t, "migrate", "--json")
	require.Equal(t, 3, code)
	require.Equal(t, "READ_ONLY", errorOf(t, out)["code"])
	applied := p.ok(t, "--allow-writes", "migrate")
	require.Positive(t, applied["applied"])
	require.Equal(t, float64(0), applied["pending"])
	require.Positive(t, tables())
	require.Len(t, p.ok(t, "keys", "--owner", "o")["keys"], 0)

	// Through a transaction pooler migrations are refused with the reason, before any DDL.
	other := testdb.NewEmptyDatabase(t)
	viaBouncer := prodDB{name: other, dsn: testdb.PgBouncer(t, store.PoolerTransaction).PoolerDSN(other)}
	code, out, _ = viaBouncer.run(t, "--allow-writes", "migrate", "--json")
	require.NotEqual(t, 0, code, out)
	e := errorOf(t, out)
	require.Equal(t, "USAGE", e["code"])
	require.Contains(t, e["message"], "cannot run through a transaction pooler")
	require.Zero(t, viaBouncer.count(t, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`))
}

// TestAPrivilegeProblemIsCodedWithTheGrantToAskFor: PostgreSQL 15 gives a new role no CREATE on
// public; migrate says so and how a schema of its own works, and with [database] schema it does.
func TestAPrivilegeProblemIsCodedWithTheGrantToAskFor(t *testing.T) {
	t.Parallel()
	name := testdb.NewEmptyDatabase(t)
	role := testdb.NewRole(t, "tool", name)
	p := prodDB{name: name, dsn: store.WithDSNParams(testdb.DSNOf(t, name), [][2]string{{"user", role}})}
	code, out, _ := p.run(t, "--allow-writes", "migrate", "--json")
	require.Equal(t, 3, code, out)
	e := errorOf(t, out)
	require.Equal(t, "PERMISSION_DENIED", e["code"])
	require.Equal(t, float64(403), e["status"])
	require.Contains(t, e["message"], "lacks CREATE on schema public")
	require.Contains(t, e["message"], `set [database] schema = "idemwork"`)

	testdb.AdminIn(t, name, "CREATE SCHEMA idemwork AUTHORIZATION "+role)
	p.env = map[string]string{"IDEMWORK_SCHEMA": "idemwork"}
	p.ok(t, "--allow-writes", "migrate")
	p.ok(t, "--allow-writes", "create", "--owner", "o", "--module", "NOTE", "--key", "k", "--title", "t")
	require.Equal(t, 1, p.count(t, `SELECT count(*) FROM idemwork.record`))
	require.Zero(t, p.count(t, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`))
}

// TestConnectionProblemsNeverShowThePassword: unparseable URLs and failed connections name what
// went wrong, never the password, and lead with the real cause.
func TestConnectionProblemsNeverShowThePassword(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		"postgres://u:SECRET@[::1/x",
		"postgres://u@127.0.0.1:1/db?password=SECRET&connect_timeout=2",
		"host=127.0.0.1 port=1 password='abc SECRET' connect_timeout=2",
	} {
		code, out, errOut := run(t, nil, "--dsn", dsn, "keys", "--owner", "o", "--json")
		require.NotEqual(t, 0, code)
		require.NotContains(t, out+errOut, "SECRET", dsn)
		msg := errorOf(t, out)["message"].(string)
		require.NotContains(t, msg, "tls error", dsn)
		if strings.Contains(dsn, "127.0.0.1:1") || strings.Contains(dsn, "port=1") {
			require.Contains(t, msg, "connection refused", dsn)
		}
	}
}

// TestServeOnAStandbySaysSoAndRefusesWritesWithItsReason: serve's startup line names the
// standby, and a write over HTTP is 403 READ_ONLY with the standby's message.
func TestServeOnAStandbySaysSoAndRefusesWritesWithItsReason(t *testing.T) {
	t.Parallel()
	standby := testdb.HotStandby(t)
	name := testdb.NewDatabase(t)
	standby.WaitCaughtUp(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb syncWriter
	env := map[string]string{"XDG_CONFIG_HOME": t.TempDir()}
	exited := make(chan int, 1)
	go func() {
		exited <- cli.Run(ctx, []string{"--dsn", standby.DSN(name), "--allow-writes", "serve", "--dev-auth", "--addr", "127.0.0.1:0"},
			&out, &errb, func(k string) string { return env[k] })
	}()
	var line string
	require.Eventually(t, func() bool { line = out.String(); return strings.Contains(line, "listening on") },
		time.Minute, 20*time.Millisecond, "stderr: %s", errb.String())
	require.Contains(t, line, "read-only: this is a hot standby; writes go to the primary")
	url := strings.Fields(strings.SplitN(line, "listening on ", 2)[1])[0]

	req, err := http.NewRequest(http.MethodPost, url+"/v1/modules/NOTE/records", strings.NewReader(`{"title":"t"}`))
	require.NoError(t, err)
	req.Header.Set("X-Owner-Id", "o")
	req.Header.Set("Idempotency-Key", "k")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, string(body))
	require.Contains(t, string(body), `"READ_ONLY"`)
	require.Contains(t, string(body), "hot standby")
	cancel()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// TestTheWorkbenchOpensReadOnlyThroughPgBouncerAndOnAStandby runs the real workbench (this test
// binary re-executed as idemwork) in tmux at 80×24 with NO_COLOR: read-only through a
// transaction-pooling pgbouncer, and on a hot standby opened with --allow-writes. It reads the
// primary's record on screen, the header's READ-ONLY badge (with "hot standby"), the refusal a
// write gets, and quits cleanly.
func TestTheWorkbenchOpensReadOnlyThroughPgBouncerAndOnAStandby(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed: install it (Debian/Ubuntu: apt-get install tmux; .ci/run does)")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	name := testdb.NewDatabase(t)
	primary := prodDB{name: name, dsn: testdb.DSNOf(t, name)}
	primary.ok(t, "--allow-writes", "create", "--owner", "o", "--module", "NOTE", "--key", "k1", "--title", "from primary")
	standby := testdb.HotStandby(t)
	standby.WaitCaughtUp(t)

	for _, c := range []struct {
		name, dsn, extra, badge, refusal, stormRefusal string
	}{
		{"pgbouncer", testdb.PgBouncer(t, store.PoolerTransaction).PoolerDSN(name), "", "READ-ONLY",
			"READ_ONLY: this session is read-only", "a storm writes: READ_ONLY: this session is read-only"},
		{"standby", standby.DSN(name), "--allow-writes", "READ-ONLY · hot standby",
			"READ_ONLY: this is a hot standby; writes go to the primary", "a storm writes: READ_ONLY: this is a hot standby;"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sess := fmt.Sprintf("idemwork-test-%d-%s", os.Getpid(), c.name)
			// A tmux server of its own (-L): a shared one can be shutting down, its last session
			// just closed by another test or script, at the moment this one asks it for a session.
			tmux := func(args ...string) *exec.Cmd { return exec.Command("tmux", append([]string{"-L", sess}, args...)...) }
			cmd := fmt.Sprintf("env %s=1 NO_COLOR=1 XDG_CONFIG_HOME=%s '%s' --dsn '%s' %s --owner o; echo WORKBENCH-EXITED-$?; sleep 60",
				storm.WorkerEnvVar, t.TempDir(), exe, c.dsn, c.extra)
			out, err := tmux("new-session", "-d", "-s", sess, "-x", "80", "-y", "24", cmd).CombinedOutput()
			require.NoError(t, err, "tmux new-session: %s", out)
			t.Cleanup(func() { _ = tmux("kill-server").Run() })
			screen := func() string {
				out, _ := tmux("capture-pane", "-p", "-t", sess).Output()
				return string(out)
			}
			waitFor := func(text string) {
				t.Helper()
				require.Eventually(t, func() bool { return strings.Contains(screen(), text) }, 30*time.Second, 50*time.Millisecond,
					"never saw %q; the screen:\n%s", text, screen())
			}
			waitFor("Records of o")
			waitFor("from primary")
			require.Contains(t, strings.SplitN(screen(), "\n", 2)[0], c.badge)
			require.NoError(t, tmux("send-keys", "-t", sess, "c").Run())
			waitFor(c.refusal)
			// The storm view refuses with the session's own reason too (a standby's, not
			// "reconnect with --allow-writes").
			require.NoError(t, tmux("send-keys", "-t", sess, "6").Run())
			waitFor("> 6 Storm")
			require.NoError(t, tmux("send-keys", "-t", sess, "f").Run())
			waitFor(c.stormRefusal)
			require.NoError(t, tmux("send-keys", "-t", sess, "q").Run())
			waitFor("WORKBENCH-EXITED-0")
		})
	}
}

// TestTheURLAUserPastesWorksThroughAnUndeclaredPooler: support staff paste the production URL,
// and production is behind a transaction-pooling pgbouncer nobody told idemwork about; command
// after command — each a new client of the pooler meeting server connections earlier ones used,
// reads while the connection opens, writes, a schema given only in the environment — works:
// idemwork sees the pooler (its backend key is not the server's pid) and uses exec.
func TestTheURLAUserPastesWorksThroughAnUndeclaredPooler(t *testing.T) {
	t.Parallel()
	name := testdb.NewEmptyDatabase(t)
	direct := prodDB{name: name, dsn: testdb.DSNOf(t, name), env: map[string]string{"IDEMWORK_SCHEMA": "app"}}
	direct.ok(t, "--allow-writes", "migrate")
	p := prodDB{name: name, dsn: testdb.PgBouncer(t, store.PoolerTransaction).DSN(name), env: map[string]string{"IDEMWORK_SCHEMA": "app"}}
	for i := range 6 {
		created := p.ok(t, "--allow-writes", "create", "--owner", "o", "--module", "NOTE", "--key", fmt.Sprintf("k%d", i), "--title", "t")
		require.Equal(t, "EXECUTED", created["outcome"])
		require.Len(t, p.ok(t, "keys", "--owner", "o")["keys"], i+1)
	}
	require.Equal(t, 6, p.count(t, `SELECT count(*) FROM app.record`))
	require.Zero(t, p.count(t, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`), "nothing anywhere else")

	// A forced exec mode that cannot work there is refused before anything is written, with the
	// sentence that fixes it.
	forced := prodDB{name: name, dsn: store.WithDSNParams(p.dsn, [][2]string{{"default_query_exec_mode", "cache_statement"}}), env: p.env}
	code, out, _ := forced.run(t, "--allow-writes", "create", "--owner", "o", "--module", "NOTE", "--key", "forced", "--title", "t", "--json")
	require.Equal(t, 4, code, out)
	e := errorOf(t, out)
	require.Equal(t, "POOLER_MISCONFIGURED", e["code"])
	require.Contains(t, e["message"], "remove default_query_exec_mode from the URL")
	require.Equal(t, 6, p.count(t, `SELECT count(*) FROM app.record`))

	// migrate through the pooler is refused with the reason, and creates nothing.
	code, out, _ = p.run(t, "--allow-writes", "migrate", "--json")
	require.Equal(t, 2, code, out)
	require.Contains(t, errorOf(t, out)["message"], "reaches PostgreSQL directly")

	// A URL's own options= that pgbouncer refuses is POOLER_MISCONFIGURED saying to remove it, not
	// a database to retry.
	own := prodDB{name: name, dsn: store.WithDSNParams(p.dsn, [][2]string{{"options", "-c statement_timeout=5s"}})}
	code, out, _ = own.run(t, "keys", "--owner", "o", "--json")
	require.Equal(t, 4, code, out)
	e = errorOf(t, out)
	require.Equal(t, "POOLER_MISCONFIGURED", e["code"], out)
	require.Contains(t, e["message"], "refused the URL's options startup parameter")
	require.NotContains(t, e["message"], "retry")
}

// TestAStatementTimeoutSaysWhatHappenedAndWhatToDo: a write waiting behind a transaction that
// holds its key, on a role whose statement_timeout is 300 ms (here in the DSN), exits 4 with
// DATABASE_UNAVAILABLE naming statement_timeout — not INTERNAL with pgx's rendering of the
// server's error, on stdout or stderr.
func TestAStatementTimeoutSaysWhatHappenedAndWhatToDo(t *testing.T) {
	t.Parallel()
	name := testdb.NewDatabase(t)
	ctx := context.Background()
	holder, err := pgx.Connect(ctx, testdb.DSNOf(t, name))
	require.NoError(t, err)
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, created_at, expires_at, updated_at)
		VALUES ('o', 'held', 'NOTE:record:create', 'v1:held', 'PROCESSING', now(), now() + interval '1 hour', now())`)
	require.NoError(t, err)
	p := prodDB{name: name, dsn: testdb.WithParam(testdb.DSNOf(t, name), "statement_timeout", "300")}
	args := []string{"--allow-writes", "create", "--owner", "o", "--module", "NOTE", "--key", "held", "--title", "t"}
	code, out, _ := p.run(t, append(args, "--json")...)
	require.Equal(t, 4, code, out)
	e := errorOf(t, out)
	require.Equal(t, "DATABASE_UNAVAILABLE", e["code"])
	require.Equal(t, float64(503), e["status"])
	require.Contains(t, e["message"], "statement_timeout (SQLSTATE 57014)")
	code, _, errOut := p.run(t, args...)
	require.Equal(t, 4, code)
	require.True(t, strings.HasPrefix(errOut, "idemwork: DATABASE_UNAVAILABLE: the database cancelled the statement"), errOut)
	require.NotContains(t, errOut, "canceling statement due to statement timeout")
}

// The workbench is where a broken stored row is looked into, so --demo opens it even when the
// demo data cannot be seeded because one of its keys' envelopes was tampered with (the seed's
// replay of that key fails closed): before, it exited 4 with SNAPSHOT_INTEGRITY_VIOLATION.
func TestTheWorkbenchOpensWithDemoOverATamperedDemoKey(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	require.NoError(t, err)
	name := testdb.NewDatabase(t)
	p := prodDB{name: name, dsn: testdb.DSNOf(t, name)}
	p.ok(t, "--allow-writes", "demo", "seed")
	conn, err := pgx.Connect(context.Background(), p.dsn)
	require.NoError(t, err)
	tag, err := conn.Exec(context.Background(), `UPDATE idempotency_record SET response = jsonb_set(response, '{unknownField}', '"x"')
		WHERE owner_id = 'alice' AND idempotency_key = 'demo:alice:note-1:patch-1'`)
	require.NoError(t, err)
	require.Equal(t, int64(1), tag.RowsAffected())
	conn.Close(context.Background())
	code, out, _ := p.run(t, "--allow-writes", "--json", "demo", "seed")
	require.Equal(t, 4, code, "the seed itself still says what failed: %s", out)
	require.Equal(t, "SNAPSHOT_INTEGRITY_VIOLATION", errorOf(t, out)["code"])

	sess := fmt.Sprintf("idemwork-test-%d-demo", os.Getpid())
	tmux := func(args ...string) *exec.Cmd { return exec.Command("tmux", append([]string{"-L", sess}, args...)...) }
	cmd := fmt.Sprintf("env %s=1 NO_COLOR=1 XDG_CONFIG_HOME=%s '%s' --dsn '%s' --allow-writes --demo; echo WORKBENCH-EXITED-$?; sleep 60",
		storm.WorkerEnvVar, t.TempDir(), exe, p.dsn)
	tout, err := tmux("new-session", "-d", "-s", sess, "-x", "80", "-y", "24", cmd).CombinedOutput()
	require.NoError(t, err, "tmux new-session: %s", tout)
	t.Cleanup(func() { _ = tmux("kill-server").Run() })
	screen := func() string { s, _ := tmux("capture-pane", "-p", "-t", sess).Output(); return string(s) }
	require.Eventually(t, func() bool { return strings.Contains(screen(), "Records of alice") }, 30*time.Second, 50*time.Millisecond,
		"the workbench never opened; the screen:\n%s", screen())
	require.NotContains(t, screen(), "WORKBENCH-EXITED")
	require.NoError(t, tmux("send-keys", "-t", sess, "q").Run())
	require.Eventually(t, func() bool { return strings.Contains(screen(), "WORKBENCH-EXITED-0") }, 20*time.Second, 50*time.Millisecond,
		"the screen:\n%s", screen())
	require.Contains(t, screen(), "demo data is not fully seeded: SNAPSHOT_INTEGRITY_VIOLATION", "said once the workbench is closed")
}

// A URL without its schema setting, on a database migrated into another schema: every command
// names the schema that holds the tables and the setting, and migrate --status lists it.
func TestAForgottenSchemaSettingIsNamedNotMigratedOver(t *testing.T) {
	t.Parallel()
	name := testdb.NewEmptyDatabase(t)
	withSchema := prodDB{name: name, dsn: store.WithDSNParams(testdb.DSNOf(t, name), [][2]string{{"search_path", "app"}})}
	require.Positive(t, withSchema.ok(t, "--allow-writes", "migrate")["applied"])

	p := prodDB{name: name, dsn: testdb.DSNOf(t, name)}
	code, out, _ := p.run(t, "keys", "--owner", "o", "--json")
	require.Equal(t, 4, code, out)
	e := errorOf(t, out)
	require.Equal(t, "SCHEMA_NOT_READY", e["code"])
	require.Contains(t, e["message"], `but schema "app" has them: set [database] schema = "app"`)
	st := p.ok(t, "migrate", "--status")
	require.Equal(t, "public", st["schema"])
	require.Equal(t, []any{"app"}, st["elsewhere"])
	require.NotContains(t, withSchema.ok(t, "migrate", "--status"), "elsewhere")
}
