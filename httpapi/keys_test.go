package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"idemwork/kernel"
)

// GET /v1/keys/{key} shows a key in every state it can be in, 200 with the state and what the
// next request meets — a PROCESSING leftover or a tampered envelope is what support staff come
// to look at, not an internal error.
func TestGetKeyShowsEveryKeyState(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	ctx := context.Background()
	_, err := b.k.Create(ctx, kernel.CreateInput{Owner: "alice", Module: "NOTE", Key: "ok-1", Title: "t"})
	require.NoError(t, err)
	_, err = b.k.Create(ctx, kernel.CreateInput{Owner: "alice", Module: "NOTE", Key: "tampered", Title: "t"})
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, `UPDATE idempotency_record SET response = response || '{"title": "smuggled"}' WHERE idempotency_key = 'tampered'`)
	require.NoError(t, err)
	_, err = b.db.Pool.Exec(ctx, `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, response, created_at, expires_at, updated_at) VALUES
		('alice', 'stuck', 'NOTE:record:create', repeat('a', 64), 'PROCESSING', NULL, now(), now() + interval '1 hour', now()),
		('alice', 'gone', 'NOTE:record:create', repeat('b', 64), 'SUCCEEDED', (SELECT response FROM idempotency_record WHERE idempotency_key = 'ok-1'),
			now() - interval '2 days', now() - interval '1 day', now() - interval '2 days'),
		('alice', 'legacy', 'identity:create', repeat('c', 64), 'SUCCEEDED', '{"policy": "raw-json-v1", "body": {"id": "x"}}', now(), now() + interval '1 day', now())`)
	require.NoError(t, err)

	for key, state := range map[string]string{"ok-1": kernel.KeySucceeded, "stuck": kernel.KeyProcessing, "gone": kernel.KeyExpired,
		"legacy": kernel.KeyLegacy, "tampered": kernel.KeyFailsClosed} {
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
