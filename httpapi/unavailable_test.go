package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/httpapi"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/faultproxy"
	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/store"
)

// serveOver serves the API over db reached through dsn (a setting in it, a proxy in front).
func serveOver(t *testing.T, db *testdb.DB, dsn string) *testBundle {
	t.Helper()
	sdb, err := store.Open(context.Background(), dsn, store.Options{})
	require.NoError(t, err)
	t.Cleanup(sdb.Close)
	k := kernel.New(sdb, kernel.NewRegistry(kernel.NewRules(2000)), kernel.Options{})
	srv := httptest.NewServer(httpapi.New(k, httpapi.Options{Tokens: map[string]string{aliceToken: "alice"}, MaxBodyBytes: maxBody}))
	t.Cleanup(srv.Close)
	return &testBundle{db: db, k: k, url: srv.URL, log: &syncBuffer{}, c: srv.Client()}
}

// holdKey reserves alice's key in a transaction of the test's own, as a request stuck in its
// work would: a request with the key waits on the unique index behind it.
func holdKey(t *testing.T, db *testdb.DB, key string) pgx.Tx {
	t.Helper()
	tx, err := db.Pool.Begin(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	_, err = tx.Exec(context.Background(), `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, created_at, expires_at, updated_at)
		VALUES ('alice', $1, 'NOTE:record:create', 'v1:held', 'PROCESSING', now(), now() + interval '1 hour', now())`, key)
	require.NoError(t, err)
	return tx
}

// requireUnavailable checks a 503 DATABASE_UNAVAILABLE that says what happened (want) and what
// to do, with Retry-After, and none of the driver's own words.
func requireUnavailable(t *testing.T, r response, want string) {
	t.Helper()
	require.Equal(t, http.StatusServiceUnavailable, r.status, r.raw)
	require.Equal(t, "DATABASE_UNAVAILABLE", r.code(), r.raw)
	require.Equal(t, "1", r.header.Get("Retry-After"))
	msg := r.body["error"].(map[string]any)["message"].(string)
	require.Contains(t, msg, want)
	require.Contains(t, msg, "retry")
	for _, raw := range []string{"ERROR:", "FATAL:", "EOF", "failed to", "conn closed", "canceling statement", "INSERT", "SELECT"} {
		require.NotContains(t, msg, raw, "never the driver's text")
	}
}

// The database cancels a statement at statement_timeout (set in the DSN, as an operator would
// for idemwork's role): a write waiting behind another transaction that holds its key is 503
// DATABASE_UNAVAILABLE with Retry-After, and the retry once the key is free executes.
func TestAStatementTimeoutIs503WithRetryAfterAndWhatToDo(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	b := serveOver(t, db, testdb.WithParam(db.DSN, "statement_timeout", "300"))
	holder := holdKey(t, db, "k-slow")
	const body = `{"title":"slow"}`
	requireUnavailable(t, b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", body, key("k-slow")...),
		"cancelled the statement when it reached statement_timeout (SQLSTATE 57014")
	require.NoError(t, holder.Rollback(context.Background()))
	retry := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", body, key("k-slow")...)
	require.Equal(t, http.StatusCreated, retry.status, retry.raw)
	require.Equal(t, "EXECUTED", retry.body["outcome"])
}

// pg_terminate_backend of the session serving a request (an operator, a failover) is 503
// DATABASE_UNAVAILABLE with Retry-After; the retry executes once.
func TestATerminatedBackendIs503WithRetryAfterAndWhatToDo(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	b := setup(t, false)
	holder := holdKey(t, b.db, "k-term")
	const body = `{"title":"terminated"}`
	done := make(chan response, 1)
	go func() { done <- b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", body, key("k-term")...) }()
	// The request's session queues on the unique index behind the holder; end it there.
	var pid int
	require.Eventually(t, func() bool {
		err := b.db.Pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INSERT INTO %idempotency_record%'`).Scan(&pid)
		return err == nil
	}, 30*time.Second, 10*time.Millisecond)
	var ended bool
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&ended))
	require.True(t, ended)
	requireUnavailable(t, <-done, "the database ended the session (SQLSTATE 57P01")
	// The driver's words go to the operator's log, as the cause of the 503.
	require.Eventually(t, func() bool {
		return strings.Contains(b.log.String(), `cause="reserve key: FATAL: terminating connection due to administrator command (SQLSTATE 57P01)"`)
	}, 10*time.Second, 10*time.Millisecond, b.log.String())
	require.NoError(t, holder.Rollback(ctx))
	retry := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", body, key("k-term")...)
	require.Equal(t, http.StatusCreated, retry.status, retry.raw)
	require.Equal(t, "EXECUTED", retry.body["outcome"])
	var records int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM record`).Scan(&records))
	require.Equal(t, 1, records)
}

// A connection lost in the middle of a request, with no COMMIT in flight — a read, and a write
// before its transaction committed — is 503 DATABASE_UNAVAILABLE (not COMMIT_UNKNOWN: nothing
// can have committed), and the write's retry executes once.
func TestAConnectionLostOutsideCommitIs503WithRetryAfter(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	db := testdb.New(t)
	p := faultproxy.Start(t, db.DSN)
	b := serveOver(t, db, p.DSN())
	const body = `{"title":"cut"}`
	require.Equal(t, http.StatusCreated, b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", body, key("k-read")...).status)

	p.ArmStatement("FROM idempotency_record")
	r := b.as(t, aliceToken, "GET", "/v1/keys/k-read", "")
	<-p.Fired()
	requireUnavailable(t, r, "the connection to the database was lost")

	p.ArmStatement(`idempotency_record" (owner_id`) // the reservation: the runner names its schema
	r = b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", body, key("k-write")...)
	<-p.Fired()
	requireUnavailable(t, r, "the connection to the database was lost")
	require.NotEqual(t, idemtype.OutcomeUnknown, r.header.Get(idemtype.HeaderOutcome))
	retry := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", body, key("k-write")...)
	require.Equal(t, http.StatusCreated, retry.status, retry.raw)
	require.Equal(t, "EXECUTED", retry.body["outcome"])
	var records int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM record WHERE title = 'cut'`).Scan(&records))
	require.Equal(t, 2, records, "k-read's and k-write's, once each")
	require.False(t, strings.Contains(r.raw, "unexpected"))
}

// /readyz says an unreachable database with the same code as every other answer does, and what
// is wrong: a refused connection is not "no answer within 2 s".
func TestReadyzSaysAnUnreachableDatabaseWithTheSameCode(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	p := faultproxy.Start(t, db.DSN)
	b := serveOver(t, db, p.DSN())
	require.Equal(t, http.StatusOK, b.as(t, aliceToken, "GET", "/readyz", "").status)
	p.Close()
	r := b.as(t, aliceToken, "GET", "/readyz", "")
	require.Equal(t, http.StatusServiceUnavailable, r.status, r.raw)
	require.Equal(t, "DATABASE_UNAVAILABLE", r.code())
	require.Equal(t, "1", r.header.Get("Retry-After"))
	msg := r.body["error"].(map[string]any)["message"].(string)
	require.Contains(t, msg, "nothing listens there (connection refused)")
	require.NotContains(t, msg, "within 2 s")
}
