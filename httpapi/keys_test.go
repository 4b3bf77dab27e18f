package httpapi_test

import (
	"context"
	"net/http"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/model"
)

// GET /v1/keys/{key} shows a key in every state it can be in, 200 with the state and what the
// next request meets — a PROCESSING leftover or a tampered envelope is what support staff come
// to look at, not an internal error.
func TestGetKeyShowsEveryKeyState(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	ctx := context.Background()
	_, err := b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: "NOTE", Key: "ok-1", Title: "t"})
	require.NoError(t, err)
	_, err = b.k.Create(ctx, model.CreateInput{Owner: "alice", Module: "NOTE", Key: "tampered", Title: "t"})
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, `UPDATE idempotency_record SET response = response || '{"title": "smuggled"}' WHERE idempotency_key = 'tampered'`)
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at) VALUES
		('alice', 'stuck', 'NOTE:record:create', repeat('a', 64), 'PROCESSING', NULL, now(), now() + interval '1 hour', now()),
		('alice', 'gone', 'NOTE:record:create', repeat('b', 64), 'SUCCEEDED', (SELECT response FROM idempotency_record WHERE idempotency_key = 'ok-1'),
			now() - interval '2 days', now() - interval '1 day', now() - interval '2 days'),
		('alice', 'legacy', 'identity:create', repeat('c', 64), 'SUCCEEDED', '{"policy": "raw-json-v1", "body": {"id": "x"}}', now(), now() + interval '1 day', now())`)
	require.NoError(t, err)

	for key, state := range map[string]string{"ok-1": model.KeySucceeded, "stuck": model.KeyProcessing, "gone": model.KeyExpired,
		"legacy": model.KeyLegacy, "tampered": model.KeyFailsClosed} {
		r := b.as(t, aliceToken, "GET", "/v1/keys/"+key, "")
		require.Equal(t, http.StatusOK, r.status, "%s: %s", key, r.raw)
		require.Equal(t, state, r.body["state"], key)
		require.NotEmpty(t, r.body["verdict"], key)
		require.NotEmpty(t, r.body["lives"], key)
	}
	stuck := b.as(t, aliceToken, "GET", "/v1/keys/stuck", "")
	require.Nil(t, stuck.body["envelope"])
	require.Contains(t, stuck.body["verdict"], "409 IDEMPOTENCY_IN_PROGRESS")
	tampered := b.as(t, aliceToken, "GET", "/v1/keys/tampered", "")
	require.Equal(t, "SNAPSHOT_INTEGRITY_VIOLATION", tampered.body["restoreError"].(map[string]any)["code"])
	require.Contains(t, tampered.body["envelope"], "title")
	// Another owner's token sees none of them.
	require.Equal(t, http.StatusNotFound, b.as(t, bobToken, "GET", "/v1/keys/stuck", "").status)
}

// requireServedAsShown checks that a retry's response is the one GET /v1/keys/{key} shows in
// "replay": the same status, every header it names with the same value (and no outcome header
// it leaves out), and the body byte for byte.
func requireServedAsShown(t *testing.T, b *testBundle, name string, retry response) {
	t.Helper()
	shown := b.as(t, aliceToken, "GET", "/v1/keys/"+name, "")
	require.Equal(t, http.StatusOK, shown.status, shown.raw)
	replay, ok := shown.body["replay"].(map[string]any)
	require.True(t, ok, "%s: the key shows its replay: %s", name, shown.raw)
	require.Equal(t, []string{"body", "exitCode", "headers", "status"}, sortedNames(replay))
	require.Equal(t, float64(retry.status), replay["status"], name)
	require.Equal(t, retry.raw, replay["body"], "%s: the body as sent, byte for byte", name)
	headers := replay["headers"].(map[string]any)
	for h, v := range headers {
		require.Equal(t, v, retry.header.Get(h), "%s: header %s", name, h)
	}
	for _, h := range []string{"Content-Type", "Location", "Retry-After", idemtype.HeaderOutcome, idemtype.HeaderReplayed, idemtype.HeaderWaited} {
		if retry.header.Get(h) != "" {
			require.Contains(t, headers, h, "%s: the replay shows %s", name, h)
		}
	}
	exit := 0
	switch {
	case retry.status >= 500:
		exit = 4
	case retry.status >= 400:
		exit = 3
	}
	require.Equal(t, float64(exit), replay["exitCode"], name)
}

func sortedNames(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// What support staff read under "what the client got back" is what a retry gets from the
// server: a replay of a create (201, Location, Idempotent-Replayed) and of a feature run, a
// committed PROCESSING leftover (409 IDEMPOTENCY_IN_PROGRESS), a tampered envelope (500, fails
// closed), a legacy operation (410); an expired key has none.
func TestAKeysReplayIsTheResponseARetryGets(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	ctx := context.Background()
	const body = `{"title":"hello <&>","payload":{"n":1e3}}`
	created := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", body, key("c-1")...)
	require.Equal(t, http.StatusCreated, created.status, created.raw)
	retry := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", body, key("c-1")...)
	require.Equal(t, "REPLAYED", retry.body["outcome"])
	requireServedAsShown(t, b, "c-1", retry)
	require.Equal(t, "REPLAYED", retry.header.Get(idemtype.HeaderOutcome))
	require.NotEmpty(t, retry.header.Get("Location"))

	id := created.record()["id"].(string)
	feature := "/v1/modules/NOTE/records/" + id + "/features/F01"
	require.Equal(t, http.StatusOK, b.as(t, aliceToken, "POST", feature, `{"input":{"why":"tidy"}}`, key("f-1")...).status)
	// The record moves on: the replay still returns the first result, and shows it.
	require.Equal(t, http.StatusOK, b.as(t, aliceToken, "PATCH", "/v1/modules/NOTE/records/"+id, `{"expectRevision":2,"title":"later"}`, key("p-1")...).status)
	requireServedAsShown(t, b, "f-1", b.as(t, aliceToken, "POST", feature, `{"input":{"why":"tidy"}}`, key("f-1")...))

	_, err := b.db.Pool.Exec(ctx, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at) VALUES
		('alice', 'stuck', 'NOTE:record:create', repeat('a', 64), 'PROCESSING', NULL, now(), now() + interval '1 hour', now()),
		('alice', 'legacy', 'identity:create', repeat('c', 64), 'SUCCEEDED', '{"policy": "raw-json-v1", "body": {"id": "x"}}', now(), now() + interval '1 day', now()),
		('alice', 'gone', 'NOTE:record:create', repeat('b', 64), 'SUCCEEDED', (SELECT response FROM idempotency_record WHERE idempotency_key = 'c-1'),
			now() - interval '2 days', now() - interval '1 day', now() - interval '2 days')`)
	require.NoError(t, err)
	stuck := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", body, key("stuck")...)
	require.Equal(t, "IDEMPOTENCY_IN_PROGRESS", stuck.code())
	requireServedAsShown(t, b, "stuck", stuck)
	legacy := b.as(t, aliceToken, "POST", "/v1/modules/IDENTITY/records", `{"title":"me"}`, key("legacy")...)
	require.Equal(t, "LEGACY_WRITE_DISABLED", legacy.code())
	requireServedAsShown(t, b, "legacy", legacy)

	require.Equal(t, http.StatusCreated, b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", body, key("tampered")...).status)
	_, err = b.db.Pool.Exec(ctx, `UPDATE idempotency_record SET response = response || '{"title": "smuggled"}' WHERE idempotency_key = 'tampered'`)
	require.NoError(t, err)
	tampered := b.as(t, aliceToken, "POST", "/v1/modules/NOTE/records", body, key("tampered")...)
	require.Equal(t, "SNAPSHOT_INTEGRITY_VIOLATION", tampered.code())
	requireServedAsShown(t, b, "tampered", tampered)

	gone := b.as(t, aliceToken, "GET", "/v1/keys/gone", "")
	require.Contains(t, gone.body, "replay")
	require.Nil(t, gone.body["replay"], "an expired key is not replayed: the next request executes anew")
}
