package idem_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
)

// outsideMain is a program of a module outside the repository: the runner and the middleware as
// a service would use them, over the PostgreSQL of OUTSIDE_DSN. It prints what it saw and exits
// 1 on anything unexpected.
const outsideMain = `package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemhttp"
)

type note struct {
	ID   string ` + "`json:\"id\"`" + `
	Text string ` + "`json:\"text\"`" + `
}

type notePolicy struct{ pool *pgxpool.Pool }

func (notePolicy) Name() string     { return "outside-note-v1" }
func (notePolicy) Fields() []string { return []string{"noteId"} }
func (notePolicy) Serialize(n note) (json.RawMessage, error) {
	return json.Marshal(map[string]string{"noteId": n.ID})
}
func (p notePolicy) Restore(ctx context.Context, owner, _ string, ref json.RawMessage) (note, error) {
	var r struct{ NoteID string ` + "`json:\"noteId\"`" + ` }
	if err := json.Unmarshal(ref, &r); err != nil {
		return note{}, err
	}
	n := note{ID: r.NoteID}
	err := p.pool.QueryRow(ctx, "SELECT text FROM outside.notes WHERE owner_id = $1 AND id = $2", owner, n.ID).Scan(&n.Text)
	return n, err
}

func fail(format string, args ...any) {
	fmt.Printf("FAIL: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("OUTSIDE_DSN"))
	if err != nil {
		fail("%v", err)
	}
	defer pool.Close()
	if _, err := idem.Migrate(ctx, pool, "outside"); err != nil {
		fail("migrate: %v", err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS outside.notes (owner_id text, id text, text text, PRIMARY KEY (owner_id, id))"); err != nil {
		fail("%v", err)
	}
	runner := idem.NewRunner(idem.PoolDriver(pool), idem.Options{Schema: "outside"})

	// The runner directly.
	for i := 0; i < 2; i++ {
		res, err := idem.Run(ctx, runner, idem.Request{Owner: "alice", Key: "direct", Operation: "note:create", Body: []byte("{}")},
			notePolicy{pool}, func(ctx context.Context, tx *idem.Tx) (note, error) {
				tx.Queue("INSERT INTO outside.notes VALUES ('alice', 'n1', 'hello')")
				return note{ID: "n1", Text: "hello"}, nil
			})
		if err != nil {
			fail("run: %v", err)
		}
		fmt.Println("runner", res.Outcome, res.Value.ID, res.Value.Text)
	}

	// The middleware on the standard mux.
	mw := idemhttp.Middleware(runner, idemhttp.Options{Owner: func(r *http.Request) (string, error) { return r.Header.Get("X-Owner-Id"), nil }})
	mux := http.NewServeMux()
	mux.Handle("POST /notes", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		res, err := idemhttp.Run(r, notePolicy{pool}, func(ctx context.Context, tx *idem.Tx) (note, error) {
			n := note{ID: "n2", Text: string(body)}
			c, _ := idemhttp.CallOf(r)
			tx.Queue("INSERT INTO outside.notes VALUES ($1, $2, $3)", c.Owner, n.ID, n.Text)
			return n, nil
		})
		if err != nil {
			idemhttp.Error(w, err)
			return
		}
		idemhttp.Respond(w, http.StatusCreated, res, res.Value)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, body := range []string{"hi", "hi", "other"} {
		req, _ := http.NewRequest("POST", srv.URL+"/notes", strings.NewReader(body))
		req.Header.Set("X-Owner-Id", "alice")
		req.Header.Set("Idempotency-Key", "\"via-http\"")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fail("%v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("http %d %s %s", resp.StatusCode, resp.Header.Get("Idempotency-Outcome"), b)
	}
	var n int
	_ = pool.QueryRow(ctx, "SELECT count(*) FROM outside.notes").Scan(&n)
	fmt.Println("notes", n, apperr.KeyReused)
}
`

// The runner is a library another module can go get: a module of its own in a temporary
// directory requires github.com/idemwork/idemwork (replaced by this checkout; its dependencies
// come from the module cache, no network), uses the runner and the middleware over a real
// PostgreSQL, and gets what the README promises.
func TestAModuleOutsideTheRepositoryUsesTheRunnerAndTheMiddleware(t *testing.T) {
	t.Parallel()
	dsn := testdb.DSNOf(t, testdb.NewEmptyDatabase(t))
	// go test runs a package's tests in its directory, so the checkout is the parent (not
	// runtime.Caller's file name, which -trimpath makes a module path).
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	goMod := "module example.com/outside\n\ngo 1.26.0\n\nrequire (\n\tgithub.com/idemwork/idemwork v0.0.0-00010101000000-000000000000\n" +
		"\tgithub.com/jackc/pgx/v5 v5.13.0\n)\n\nreplace github.com/idemwork/idemwork => " + root + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(outsideMain), 0o644))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(t), "run", ".")
	cmd.Dir = dir
	// -mod=mod after the caller's GOFLAGS (make's -trimpath lets this build reuse the build cache
	// of an earlier clone).
	goflags := strings.TrimSpace(os.Getenv("GOFLAGS") + " -mod=mod")
	cmd.Env = append(os.Environ(), "OUTSIDE_DSN="+dsn, "GOFLAGS="+goflags, "GOPROXY=off", "GOSUMDB=off", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	got := string(out)
	require.Equal(t, strings.Join([]string{
		"runner EXECUTED n1 hello",
		"runner REPLAYED n1 hello",
		`http 201 EXECUTED {"id":"n2","text":"hi"}`,
		`http 201 REPLAYED {"id":"n2","text":"hi"}`,
		`http 422  {"error":{"code":"IDEMPOTENCY_KEY_REUSED","status":422,"message":"key \"via-http\" was first used with a different request body; a retry must send the same body, a new request needs a new key"}}`,
		"notes 2 IDEMPOTENCY_KEY_REUSED",
	}, "\n")+"\n", got)
}

// goTool is the go command the tests run under (go test runs with it on PATH).
func goTool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("go")
	require.NoError(t, err, "the go command must be on PATH")
	return path
}
