package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/cli"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/libinspect"
	"github.com/idemwork/idemwork/model"
)

// The workbench against a service built on the runner library, as a user meets it: the
// reference service examples/shop (its own module, built here), two instances on one database,
// stormed over HTTP, then inspected with keys, key and verify.

// buildShop builds examples/shop into a temporary directory (offline: its dependencies come from
// the module cache).
func buildShop(t *testing.T) string {
	t.Helper()
	// go test runs a package's tests in its directory, so the checkout is the parent (not
	// runtime.Caller's file name, which -trimpath makes a module path).
	src, err := filepath.Abs(filepath.Join("..", "examples", "shop"))
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "shop")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(t), "build", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

// startShop runs the shop over dsn on a free loopback port until the test ends, and returns its
// base URL.
func startShop(t *testing.T, bin, dsn string) string {
	t.Helper()
	cmd := exec.Command(bin, "--dsn", dsn, "--addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, url, ok := strings.Cut(sc.Text(), "listening on "); ok {
				found <- strings.Fields(url)[0]
			}
		}
	}()
	select {
	case url := <-found:
		return url
	case <-time.After(time.Minute):
		t.Fatal("the shop did not start listening")
		return ""
	}
}

// order posts an order with key to base as alice.
func order(t *testing.T, base, key, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/orders", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Owner-Id", "alice")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(raw)
}

// runService runs a command line against a service's database (no --allow-writes: it only reads).
func runService(t *testing.T, dsn string, args ...string) (int, string, string) {
	t.Helper()
	return runWithOptions(t, cli.Options{}, append([]string{"--dsn", dsn, "--schema", "shop"}, args...)...)
}

func runWithOptions(t *testing.T, opts cli.Options, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"XDG_CONFIG_HOME": t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	code := cli.RunWith(ctx, args, &out, &errb, func(k string) string { return env[k] }, opts)
	return code, out.String(), errb.String()
}

func TestTwoShopInstancesStormedExecuteOnceAndTheWorkbenchInspectsTheirDatabase(t *testing.T) {
	t.Parallel()
	bin := buildShop(t)
	dsn := testdb.DSNOf(t, testdb.NewEmptyDatabase(t))
	a, b := startShop(t, bin, dsn), startShop(t, bin, dsn)

	code, out, errOut := runService(t, dsn, "--json", "storm", "--n", "400", "--url", a+"/orders", "--url", b+"/orders",
		"--method", "POST", "--body", `{"sku":"tea","quantity":2}`, "--key", "k-storm", "--owner", "alice", "--header", "X-Owner-Id: alice",
		"--count-sql", "SELECT count(*) FROM shop.orders WHERE idempotency_key = $1 AND owner_id = $2")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	sum := jsonObject(t, out)
	outcomes := sum["outcomes"].(map[string]any)
	require.Equal(t, float64(1), outcomes["EXECUTED"], "%v", outcomes)
	require.Equal(t, float64(400), outcomes["EXECUTED"].(float64)+num(outcomes["REPLAYED"])+num(outcomes["JOINED"]), "%v", outcomes)
	require.Equal(t, float64(1), sum["distinct"].(map[string]any)["bodies"], "every answer the same bytes")
	verified := sum["verified"].(map[string]any)
	require.Equal(t, "SUCCEEDED", verified["keyStatus"])
	require.Equal(t, float64(1), verified["serviceRows"], "one order row")
	require.Equal(t, "agrees", sum["verdict"].(map[string]any)["verdict"])
	for _, sv := range sum["byServer"].([]any) {
		require.Equal(t, float64(200), sv.(map[string]any)["requests"], "both instances answered")
	}
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	defer pool.Close()
	var outbox int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM shop.payment_outbox p JOIN shop.orders o
		ON o.owner_id = p.owner_id AND o.id = p.order_id WHERE o.idempotency_key = 'k-storm'`).Scan(&outbox))
	require.Equal(t, 1, outbox, "one payment message")

	code, out, errOut = runService(t, dsn, "--json", "keys", "--owner", "alice")
	require.Equal(t, 0, code, errOut)
	keys := jsonObject(t, out)["keys"].([]any)
	require.Len(t, keys, 1)
	require.Equal(t, "SUCCEEDED", keys[0].(map[string]any)["status"])
	require.Equal(t, "shop-order-reference-v1", keys[0].(map[string]any)["policy"])
	code, out, errOut = runService(t, dsn, "verify", "--all")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.Contains(t, out, "not checked: 1 key(s)' results were not restored", "a result this workbench cannot restore is never passed as checked")
	code, out, errOut = runService(t, dsn, "--json", "key", "--owner", "alice", "--key", "k-storm")
	require.Equal(t, 0, code, errOut)
	view := jsonObject(t, out)
	require.Equal(t, "SUCCEEDED", view["state"])
	require.Equal(t, libinspect.ViaReference, view["restored"].(map[string]any)["via"])
	// Without the service's policy the workbench cannot tell whether a replay returns the first
	// result or fails closed (an edited row): it says so, never that the replay works.
	require.Equal(t, model.VerdictUnchecked, view["verdictKind"])
	require.True(t, strings.HasPrefix(view["verdict"].(string), "unchecked: the service's policy "), view["verdict"])
	require.NotEmpty(t, view["next"])
	code, _, errOut = runService(t, dsn, "history", "--owner", "alice")
	require.Equal(t, 0, code, errOut)

	// A write through the workbench's session is refused: the database is the service's.
	code, out, _ = runService(t, dsn, "--allow-writes", "--json", "create", "--owner", "alice", "--module", "NOTE", "--title", "t")
	require.Equal(t, 3, code, out)
	require.Contains(t, out, "a service's idempotency keys")

	// The order row edited behind the service's back: its replay fails closed.
	status, _, first := order(t, a, "k-edit", `{"sku":"mate","quantity":1}`)
	require.Equal(t, http.StatusCreated, status, first)
	_, err = pool.Exec(context.Background(), `UPDATE shop.orders SET amount_cents = 1 WHERE idempotency_key = 'k-edit'`)
	require.NoError(t, err)
	status, _, replay := order(t, b, "k-edit", `{"sku":"mate","quantity":1}`)
	require.Equal(t, http.StatusInternalServerError, status, replay)
	require.Contains(t, replay, `"code":"SNAPSHOT_INTEGRITY_VIOLATION"`)
	require.Contains(t, replay, "changed since it was first returned")
}

func num(v any) float64 {
	if f, ok := v.(float64); ok {
		return f
	}
	return 0
}

// A service's policy registered with the workbench (cli.Options.Plugins) restores its results
// in key and verify as a replay would: the exact first result, or the error a replay fails
// closed with once the row it reads was edited.
func TestAServicesPolicyRegisteredWithTheWorkbenchRestoresItsResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.DSNOf(t, testdb.NewEmptyDatabase(t))
	pool, err := pgxpool.New(ctx, dsn)
	require.NoError(t, err)
	defer pool.Close()
	_, err = idem.Migrate(ctx, pool, "shop")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TABLE shop.tickets (owner_id text, id text, seat text, PRIMARY KEY (owner_id, id))`)
	require.NoError(t, err)
	runner := idem.NewRunner(idem.PoolDriver(pool), idem.Options{Schema: "shop"})
	_, err = idem.Run(ctx, runner, idem.Request{Owner: "alice", Key: "t1", Operation: "ticket:book", Module: "tickets", Body: []byte(`{}`)},
		ticketPolicy{pool}, func(ctx context.Context, tx *idem.Tx) (ticket, error) {
			tx.Queue(`INSERT INTO shop.tickets VALUES ('alice', 'tk1', '12A')`)
			return ticket{ID: "tk1", Seat: "12A"}, nil
		})
	require.NoError(t, err)

	plugins := cli.Options{Plugins: []libinspect.Plugin{libinspect.PolicyPlugin("tickets",
		func(q idem.Querier) idem.ResultPolicy[ticket] { return ticketPolicy{q} })}}
	code, out, errOut := runWithOptions(t, plugins, "--dsn", dsn, "--schema", "shop", "--json", "key", "--owner", "alice", "--key", "t1")
	require.Equal(t, 0, code, errOut)
	view := jsonObject(t, out)
	restored := view["restored"].(map[string]any)
	require.Equal(t, libinspect.ViaPolicy, restored["via"])
	require.Equal(t, map[string]any{"id": "tk1", "seat": "12A"}, restored["result"])
	require.Equal(t, "SUCCEEDED", view["state"])

	_, err = pool.Exec(ctx, `UPDATE shop.tickets SET seat = '1A'`)
	require.NoError(t, err)
	code, out, errOut = runWithOptions(t, plugins, "--dsn", dsn, "--schema", "shop", "--json", "key", "--owner", "alice", "--key", "t1")
	require.Equal(t, 0, code, errOut)
	view = jsonObject(t, out)
	require.Equal(t, "FAILS_CLOSED", view["state"])
	require.Equal(t, string(apperr.SnapshotIntegrity), view["restoreError"].(map[string]any)["code"])
	code, out, _ = runWithOptions(t, plugins, "--dsn", dsn, "--schema", "shop", "verify", "--all")
	require.Equal(t, 4, code, out)
	require.Contains(t, out, "✗ envelope_restores")
	// Without the plugin the reference is all the workbench has: it shows it, and cannot tell.
	code, out, _ = runWithOptions(t, cli.Options{}, "--dsn", dsn, "--schema", "shop", "verify", "--all")
	require.Equal(t, 0, code, out)
}

type ticket struct {
	ID   string `json:"id"`
	Seat string `json:"seat"`
}

// ticketPolicy restores a ticket and fails closed when its seat is no longer the one it was
// booked with (the reference carries it: a whitelisted id).
type ticketPolicy struct{ q idem.Querier }

func (ticketPolicy) Name() string     { return "ticket-reference-v1" }
func (ticketPolicy) Fields() []string { return []string{"ticketId", "seat"} }
func (ticketPolicy) Serialize(tk ticket) (json.RawMessage, error) {
	return json.Marshal(map[string]string{"ticketId": tk.ID, "seat": tk.Seat})
}

func (p ticketPolicy) Restore(ctx context.Context, owner, _ string, result json.RawMessage) (ticket, error) {
	var ref struct {
		TicketID string `json:"ticketId"`
		Seat     string `json:"seat"`
	}
	if err := json.Unmarshal(result, &ref); err != nil {
		return ticket{}, err
	}
	tk := ticket{ID: ref.TicketID}
	err := p.q.QueryRow(ctx, `SELECT seat FROM shop.tickets WHERE owner_id = $1 AND id = $2`, owner, tk.ID).Scan(&tk.Seat)
	if err == pgx.ErrNoRows || err == nil && tk.Seat != ref.Seat {
		return ticket{}, apperr.New(apperr.SnapshotIntegrity, "ticket %s is not the one first booked", tk.ID)
	}
	return tk, err
}

// goTool is the go command the tests run under (go test runs with it on PATH).
func goTool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("go")
	require.NoError(t, err, "the go command must be on PATH")
	return path
}
