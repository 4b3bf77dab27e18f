package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/httpapi"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/store"
)

// patchTimes gives alice a NOTE record with n revisions (each with a payload of size bytes) and
// returns its id.
func patchTimes(t *testing.T, b *testBundle, token string, n, size int) string {
	t.Helper()
	blob := strings.Repeat("x", size)
	c := b.as(t, token, "POST", "/v1/modules/NOTE/records", `{"title":"long history","payload":{"blob":"`+blob+`"}}`)
	require.Equal(t, http.StatusCreated, c.status, c.raw)
	id := c.record()["id"].(string)
	for rev := 1; rev < n; rev++ {
		p := b.as(t, token, "PATCH", "/v1/modules/NOTE/records/"+id, fmt.Sprintf(`{"expectRevision":%d,"payload":{"blob":"%s","rev":%d}}`, rev, blob, rev+1))
		require.Equal(t, http.StatusOK, p.status, p.raw)
	}
	return id
}

// Issue 28: GET of a record answers its latest revision and links, never every revision inline
// (61 revisions once made each answer 3.79 MB); …/revisions pages with ?after= and ?limit=, and
// next links walk every revision exactly once.
func TestGetRecordAnswersTheLatestRevisionAndPagesTheRest(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	id := patchTimes(t, b, aliceToken, 61, 4000)

	d := b.as(t, aliceToken, "GET", "/v1/modules/NOTE/records/"+id, "")
	require.Equal(t, http.StatusOK, d.status, d.raw)
	require.Less(t, len(d.raw), 50_000, "the answer does not grow with the history (all 61 revisions: over 500 KB)")
	revs := d.body["revisions"].([]any)
	require.Len(t, revs, 1)
	require.Equal(t, float64(61), revs[0].(map[string]any)["revision"])
	require.Len(t, d.body["audit"], 50, "the first page of the audit events")
	links := d.body["links"].(map[string]any)
	base := "/v1/modules/NOTE/records/" + id
	require.Equal(t, base+"/revisions", links["revisions"])
	require.Nil(t, links["executions"], "every execution (none) is inline")
	require.Contains(t, links["audit"], base+"/audit?after=")

	seen := 0
	next := links["revisions"].(string) + "?limit=7"
	for next != "" {
		page := b.as(t, aliceToken, "GET", next, "")
		require.Equal(t, http.StatusOK, page.status, page.raw)
		for _, r := range page.body["revisions"].([]any) {
			seen++
			require.Equal(t, float64(seen), r.(map[string]any)["revision"], "in order, each once")
		}
		next = ""
		if n, ok := page.body["next"].(string); ok {
			require.Contains(t, n, "limit=7")
			next = n
		}
	}
	require.Equal(t, 61, seen)

	audit := 0
	for next := base + "/audit"; next != ""; {
		page := b.as(t, aliceToken, "GET", next, "")
		require.Equal(t, http.StatusOK, page.status, page.raw)
		audit += len(page.body["audit"].([]any))
		next, _ = page.body["next"].(string)
	}
	require.Equal(t, 61, audit, "one audit event per revision, every one reached by next")

	for _, bad := range []string{"/revisions?limit=0", "/revisions?limit=101", "/revisions?after=-1", "/revisions?after=x",
		"/audit?after=nonsense", "/executions?limit=501", "/revisions?page=2", "/revisions?limit=5&limit=6", "?limit=5"} {
		r := b.as(t, aliceToken, "GET", base+bad, "")
		require.Equal(t, http.StatusBadRequest, r.status, "%s: %s", bad, r.raw)
		require.Equal(t, "BAD_REQUEST", r.code(), bad)
	}
	for _, missing := range []string{"/revisions", "/executions", "/audit", ""} {
		r := b.as(t, bobToken, "GET", base+missing, "")
		require.Equal(t, http.StatusNotFound, r.status, "another owner's record: %s", r.raw)
		require.Equal(t, "RECORD_NOT_FOUND", r.code())
	}
	empty := b.as(t, aliceToken, "GET", base+"/executions", "")
	require.Equal(t, http.StatusOK, empty.status, empty.raw)
	require.Empty(t, empty.body["executions"])
	require.Nil(t, empty.body["next"])
}

// Issue 28: each detail route runs its own statement only (before, /revisions, /executions and
// /audit each ran all five detail queries, up to 1,000 snapshots, to keep one list). GET of the
// record reads its three parts in one round trip: every other owner's GET waits behind a read
// flood once per round trip, so three would wait three times.
func TestEachDetailRouteRunsItsOwnStatementOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	id := patchTimes(t, b, aliceToken, 3, 10)
	tr := &testdb.Trips{Words: 1000}
	db, err := store.Open(context.Background(), b.db.DSN, store.Options{MaxConns: 2, Tracer: tr})
	require.NoError(t, err)
	t.Cleanup(db.Close)
	api := httpapi.New(kernel.New(db, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{}),
		httpapi.Options{Tokens: map[string]string{aliceToken: "alice"}})
	tr.Take()
	base := "/v1/modules/NOTE/records/" + id
	for _, c := range []struct {
		part  string
		trips [][]string // per round trip, the table each of its statements reads, in order
	}{
		{"/revisions", [][]string{{"record_revision"}}},
		{"/audit", [][]string{{"audit_event"}}},
		{"/executions", [][]string{{"feature_execution"}, {"record"}}}, // an empty page: is there such a record at all?
		{"", [][]string{{"record_revision", "feature_execution", "audit_event"}}},
	} {
		req := httptest.NewRequest("GET", base+c.part, nil)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		ran := tr.Take()
		require.Len(t, ran, len(c.trips), "GET %s took %d round trips: %q", c.part, len(ran), ran)
		for i, tables := range c.trips {
			stmts := regexp.MustCompile(`(?:^batch\[)?begin; settings; (.*); commit\]$`).FindStringSubmatch(ran[i])
			require.NotNil(t, stmts, "GET %s round trip %d is one transaction: %q", c.part, i+1, ran[i])
			parts := strings.Split(stmts[1], "; ")
			require.Len(t, parts, len(tables), "GET %s round trip %d: %q", c.part, i+1, ran[i])
			for j, table := range tables {
				require.Regexp(t, `(from|join) `+table+`( |$)`, parts[j], "GET %s round trip %d statement %d", c.part, i+1, j+1)
			}
		}
	}
}

// heldFlood fires n concurrent GETs of bob's record while a lock held on record_revision keeps
// every one that reaches the database there. stuck counts those on the database; finish lets
// them go and returns their statuses.
func heldFlood(t *testing.T, b *testBundle, record string, n int) (stuck func() int, finish func() []int, answered func() int) {
	t.Helper()
	ctx := context.Background()
	lock, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lock.Rollback(ctx) })
	_, err = lock.Exec(ctx, `LOCK TABLE record_revision IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	var wg sync.WaitGroup
	var got atomic.Int64
	statuses := make(chan int, n)
	for range n {
		wg.Go(func() {
			defer got.Add(1)
			req, _ := http.NewRequest("GET", b.url+"/v1/modules/NOTE/records/"+record+"/revisions", nil)
			req.Header.Set("Authorization", "Bearer "+bobToken)
			resp, err := b.c.Do(req)
			if err != nil {
				statuses <- -1
				return
			}
			_ = resp.Body.Close()
			statuses <- resp.StatusCode
		})
	}
	stuck = func() int {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%record_revision%'`).Scan(&n))
		return n
	}
	finish = func() []int {
		require.NoError(t, lock.Rollback(ctx))
		wg.Wait()
		close(statuses)
		var out []int
		for s := range statuses {
			out = append(out, s)
		}
		return out
	}
	return stuck, finish, func() int { return int(got.Load()) }
}

// Issue 28: reads take owner shares as writes do. Bob's 40 concurrent reads, each stuck on the
// database (a lock held on record_revision), hold at most his share of the pool (3 of 10); the
// rest wait in the process holding no connection, and alice's read answers meanwhile. Before,
// bob's reads took every connection and alice waited for the pool's acquire timeout.
func TestOneOwnersReadFloodHoldsAtMostItsShareOfThePool(t *testing.T) {
	t.Parallel()
	const share = 3
	b := setupWith(t, serverOptions{db: testdb.Options{MaxConns: 10, AcquireTimeout: 2 * time.Second},
		runner: idem.Options{Limits: idem.Limits{OwnerMaxConns: share, AcquireTimeout: time.Minute}},
		api:    func(o *httpapi.Options) { o.OwnerMaxReads, o.ReadWait = 100, time.Minute }}) // the pool's share is what bounds here
	bobs := patchTimes(t, b, bobToken, 5, 10)
	alices := patchTimes(t, b, aliceToken, 1, 10)

	stuck, finish, _ := heldFlood(t, b, bobs, 40)
	require.Eventually(t, func() bool { return stuck() == share }, 30*time.Second, 10*time.Millisecond, "bob's share of reads reaches the database")
	for range 20 { // and no more, however long they wait
		require.LessOrEqual(t, stuck(), share)
		require.LessOrEqual(t, b.k.Runner().Stats().OwnerConns, share)
		require.LessOrEqual(t, b.k.DB().Stat().AcquiredConns(), int32(share+1))
		time.Sleep(10 * time.Millisecond)
	}

	// With bob's reads holding every connection, alice's would wait the pool's acquire timeout
	// and fail OVERLOADED.
	r := b.as(t, aliceToken, "GET", "/v1/modules/NOTE/records/"+alices+"/executions", "")
	require.Equal(t, http.StatusOK, r.status, "alice's read while bob's flood waits: %s", r.raw)

	for _, s := range finish() {
		require.Equal(t, http.StatusOK, s, "each of bob's reads is answered in its turn")
	}
}

// And fewer reads than that run at once: http.owner_max_reads (half the CPUs by default) bounds an
// owner's reads, since a read is mostly CPU; one that waits past the acquire timeout is 503
// OVERLOADED with Retry-After.
func TestAnOwnersReadsRunAtMostOwnerMaxReadsAtOnce(t *testing.T) {
	t.Parallel()
	b := setupWith(t, serverOptions{db: testdb.Options{MaxConns: 10},
		runner: idem.Options{Limits: idem.Limits{OwnerMaxConns: 5, AcquireTimeout: time.Minute}},
		api:    func(o *httpapi.Options) { o.OwnerMaxReads, o.ReadWait = 2, 3*time.Second }})
	bobs := patchTimes(t, b, bobToken, 2, 10)
	stuck, finish, _ := heldFlood(t, b, bobs, 10)
	require.Eventually(t, func() bool { return stuck() == 2 }, 30*time.Second, 10*time.Millisecond)
	for range 20 {
		require.LessOrEqual(t, stuck(), 2)
		time.Sleep(10 * time.Millisecond)
	}
	over := b.as(t, bobToken, "GET", "/v1/modules/NOTE/records/"+bobs, "")
	require.Equal(t, http.StatusServiceUnavailable, over.status, over.raw)
	require.Equal(t, "OVERLOADED", over.code())
	require.Equal(t, "1", over.header.Get("Retry-After"))
	require.Contains(t, over.raw, "http.owner_max_reads")
	counts := map[int]int{}
	for _, s := range finish() {
		counts[s]++
	}
	require.Equal(t, 2, counts[http.StatusOK], "the two on the database answer; %v", counts)
	require.Equal(t, 8, counts[http.StatusServiceUnavailable], "the others waited past the acquire timeout; %v", counts)
}

// At most httpapi.OwnerReadQueue reads of one owner wait for its read slots: the rest of
// a flood is refused at once (503 OVERLOADED), spread over its arrival, instead of all waking at
// the end of their waits together.
func TestAnOwnersReadsBeyondTheQueueAreRefusedAtOnce(t *testing.T) {
	t.Parallel()
	b := setupWith(t, serverOptions{db: testdb.Options{MaxConns: 10},
		runner: idem.Options{Limits: idem.Limits{OwnerMaxConns: 5, AcquireTimeout: time.Minute}},
		api:    func(o *httpapi.Options) { o.OwnerMaxReads, o.ReadWait = 1, time.Minute }})
	bobs := patchTimes(t, b, bobToken, 2, 10)
	n := httpapi.OwnerReadQueue(1) + 1 + 5 // one on the database, a queue's worth waiting, five more
	start := time.Now()
	stuck, finish, answered := heldFlood(t, b, bobs, n)
	require.Eventually(t, func() bool { return stuck() == 1 && answered() == 5 }, 30*time.Second, 10*time.Millisecond,
		"one read on the database, the queue full, five refused")
	over := b.as(t, bobToken, "GET", "/v1/modules/NOTE/records/"+bobs, "")
	require.Equal(t, http.StatusServiceUnavailable, over.status, over.raw)
	require.Contains(t, over.raw, "more waiting")
	require.Less(t, time.Since(start), 30*time.Second, "refused at once, not after the minute's wait")
	counts := map[int]int{}
	for _, s := range finish() {
		counts[s]++
	}
	require.Equal(t, 5, counts[http.StatusServiceUnavailable], "%v", counts)
	require.Equal(t, httpapi.OwnerReadQueue(1)+1, counts[http.StatusOK], "%v", counts)
}

// A read that finds no free connection in the pool within the acquire timeout is 503 OVERLOADED
// with Retry-After, on every read route: never a 500. (GET of a record sends its three reads as
// one batch; a batch that never reached the server once answered its rows as nil, and the read
// panicked closing them.)
func TestEveryReadRouteIs503OverloadedWhenThePoolHasNoFreeConnection(t *testing.T) {
	t.Parallel()
	const poolSize = 3
	b := setupWith(t, serverOptions{db: testdb.Options{MaxConns: poolSize, AcquireTimeout: 300 * time.Millisecond}})
	created := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", `{"title":"to read"}`, key("r-1")...)
	require.Equal(t, http.StatusCreated, created.status, created.raw)
	base := "/v1/modules/NOTE/records/" + created.record()["id"].(string)

	ctx := testdb.Context(t)
	for range poolSize { // another part of the service holds every connection of the kernel's pool
		c, err := b.k.DB().AcquireAsIs(ctx)
		require.NoError(t, err)
		defer c.Release()
	}
	for _, path := range []string{base, base + "/revisions", base + "/executions", base + "/audit", "/v1/keys/r-1"} {
		r := b.as(t, aliceToken, "GET", path, "")
		require.Equal(t, http.StatusServiceUnavailable, r.status, "GET %s: %s", path, r.raw)
		require.Equal(t, "OVERLOADED", r.code(), path)
		require.Equal(t, "1", r.header.Get("Retry-After"), path)
		require.Contains(t, r.raw, "no database connection became free within 300ms", path)
	}
	require.NotContains(t, b.log.String(), "status=500")
}
