package httpapi_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/store"
)

// terminator ends one of the server's busy sessions (pg_terminate_backend, as a DBA's loop or
// a failover tool would) every 5 to 40 ms until stop.
func terminator(t *testing.T, db *testdb.DB, app string, stop <-chan struct{}) (killed *atomic.Int64, done chan struct{}) {
	killed, done = &atomic.Int64{}, make(chan struct{})
	go func() {
		defer close(done)
		ctx := context.Background()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(5000+rand.IntN(35000)) * time.Microsecond):
			}
			var n int64
			// Busy sessions only: a batch with its COMMIT in flight is what a terminated write
			// must be answered truthfully for.
			if err := db.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity
				WHERE application_name = $1 AND state <> 'idle' ORDER BY random() LIMIT 1) busy`, app).Scan(&n); err == nil {
				killed.Add(n)
			}
		}
	}()
	return killed, done
}

// Issue 21, item 5: with a loop terminating the server's busy backends while clients create
// records (half of them with an Idempotency-Key, half without), every answer is one SPEC §9
// documents; no DATABASE_UNAVAILABLE answer stands for a committed write (it promises nothing
// committed); the records in the database are at most the EXECUTED answers plus the
// COMMIT_UNKNOWN ones; COMMIT_UNKNOWN tells a keyed client to retry with the same key and an
// unkeyed one that the record may exist; and a keyed retry says what really happened, once.
func TestABackendTerminatedDuringCommitIsNeverAnsweredNothingCommitted(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	const app = "idemwork-under-fire"
	db := testdb.New(t)
	sdb, err := store.Open(ctx, db.DSN, store.Options{ApplicationName: app, MaxConns: 8})
	require.NoError(t, err)
	t.Cleanup(sdb.Close)
	b := setupWith(t, serverOptions{existing: &testdb.DB{DB: sdb, Pool: db.Pool, DSN: db.DSN, Name: db.Name}})

	stop := make(chan struct{})
	killed, stopped := terminator(t, db, app, stop)
	type answer struct {
		title, key, code, message string
		status                    int
	}
	var mu sync.Mutex
	var answers []answer
	var n, unknown atomic.Int64
	deadline := time.Now().Add(25 * time.Second)
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline) && n.Load() < 2000 && (unknown.Load() < 6 || n.Load() < 400); i++ {
				n.Add(1)
				title := fmt.Sprintf("w-%d-%d", c, i)
				var headers []string
				key := ""
				if i%2 == 0 {
					key = "k-" + title
					headers = append(headers, "Idempotency-Key", key)
				}
				r := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", fmt.Sprintf(`{"title":%q}`, title), headers...)
				a := answer{title: title, key: key, status: r.status, code: r.code()}
				if e, ok := r.body["error"].(map[string]any); ok {
					a.message = e["message"].(string)
				}
				if a.code == "COMMIT_UNKNOWN" {
					unknown.Add(1)
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(stop)
	<-stopped

	titles := map[string]int{}
	rows, err := db.Pool.Query(ctx, `SELECT title FROM record WHERE owner_id = 'alice'`)
	require.NoError(t, err)
	for rows.Next() {
		var title string
		require.NoError(t, rows.Scan(&title))
		titles[title]++
	}
	require.NoError(t, rows.Err())

	count := map[string]int{}
	for _, a := range answers {
		count[a.code]++
		switch a.code {
		case "": // 201 EXECUTED
			require.Equal(t, http.StatusCreated, a.status)
			require.Equal(t, 1, titles[a.title], "an EXECUTED write is in the database once")
		case "COMMIT_UNKNOWN":
			require.Equal(t, http.StatusServiceUnavailable, a.status)
			require.LessOrEqual(t, titles[a.title], 1)
			if a.key != "" {
				require.Contains(t, a.message, "retry with the same Idempotency-Key ("+a.key+")")
			} else {
				require.Contains(t, a.message, "the record may exist")
				require.Contains(t, a.message, "idemwork history --owner")
			}
		case "DATABASE_UNAVAILABLE":
			require.Equal(t, http.StatusServiceUnavailable, a.status)
			require.Zero(t, titles[a.title], "DATABASE_UNAVAILABLE promises that nothing committed, yet %s is in the database: %s", a.title, a.message)
		case "OVERLOADED":
			require.Zero(t, titles[a.title])
		default:
			t.Fatalf("%s: an answer SPEC §9 does not document for this: %d %s %s", a.title, a.status, a.code, a.message)
		}
	}
	total := 0
	for _, n := range titles {
		total += n
	}
	require.LessOrEqual(t, total, count[""]+count["COMMIT_UNKNOWN"], "records ≤ EXECUTED + COMMIT_UNKNOWN")
	t.Logf("%d requests, %d backends terminated: %v; %d records", len(answers), killed.Load(), count, total)

	// A keyed write answered COMMIT_UNKNOWN, retried with its key, says what happened, once.
	for _, a := range answers {
		if a.code != "COMMIT_UNKNOWN" || a.key == "" {
			continue
		}
		r := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", fmt.Sprintf(`{"title":%q}`, a.title), "Idempotency-Key", a.key)
		require.Equal(t, http.StatusCreated, r.status, r.raw)
		require.Equal(t, map[int]string{0: "EXECUTED", 1: "REPLAYED"}[titles[a.title]], r.body["outcome"], a.title)
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM record WHERE title = $1`, a.title).Scan(&n))
		require.Equal(t, 1, n)
	}
}
