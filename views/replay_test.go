package views_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/views"
	"github.com/idemwork/idemwork/wire"
)

// What the client got back: the key's replay pane shows, and y copies, the response a retry of
// the key gets — the bytes the write path itself builds for the retry (kernel.WriteResult.Response
// for a replay, wire.Error for a refusal), not a rendering of the restored rows.
func TestTheReplayPaneIsTheResponseARetryGets(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	plantKeyStates(t, b)
	ctx := context.Background()
	v := views.NewKeys(b.Ctx, b.Backend.Keys)
	v.SetSize(103, 37)
	settle(t, v.Update, v.Init())

	retry, err := b.Kernel.Create(ctx, model.CreateInput{Owner: "alice", Module: "NOTE", Key: "ok-1", Title: "ok"})
	require.NoError(t, err)
	screen := openListedKey(t, v, "ok-1")
	require.True(t, strings.HasPrefix(v.FocusedPane(), "Replay → 201"), v.FocusedPane())
	require.Equal(t, wire.Created(retry).Text(), v.Selection(), "byte for byte what the server sends for the retry")
	for _, line := range []string{"HTTP 201 Created", "Idempotency-Outcome: REPLAYED", "Idempotent-Replayed: true", `"outcome": "REPLAYED"`} {
		require.Contains(t, screen, line)
	}
	v.Update(keyPress("esc"))

	_, err = b.Kernel.Create(ctx, model.CreateInput{Owner: "alice", Module: "NOTE", Key: "stuck", Title: "again"})
	require.Error(t, err)
	screen = openListedKey(t, v, "stuck")
	require.Equal(t, wire.Error(err).Text(), v.Selection())
	require.Contains(t, screen, "HTTP 409 Conflict")
	require.Contains(t, screen, `"IDEMPOTENCY_IN_PROGRESS",`)
	v.Update(keyPress("esc"))

	_, err = b.Kernel.Create(ctx, model.CreateInput{Owner: "alice", Module: "NOTE", Key: "tampered", Title: "t"})
	require.Error(t, err)
	screen = openListedKey(t, v, "tampered")
	require.Equal(t, wire.Error(err).Text(), v.Selection())
	require.Contains(t, screen, "HTTP 500 Internal Server Error")
	v.Update(keyPress("esc"))

	screen = openListedKey(t, v, "gone")
	require.Contains(t, screen, "EXPIRED · no replay")
}
