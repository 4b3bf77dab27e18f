package views_test

import (
	"context"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/testdb"
	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/internal/workbench"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/storm/stormtypes"
	"github.com/idemwork/idemwork/views"
)

// statusText runs a command that must answer a status line and returns its text.
func statusText(t *testing.T, cmd tea.Cmd) string {
	t.Helper()
	require.NotNil(t, cmd)
	msg, ok := cmd().(uictx.StatusMsg)
	require.True(t, ok, "a status line")
	require.True(t, msg.Error)
	return msg.Text
}

// A view that refuses a write says the session's own reason (ProgramContext.ReadOnlyMessage),
// not a fixed "reconnect with --allow-writes" — wrong on a hot standby (writes go to the
// primary; cli's TestTheWorkbenchOpensReadOnlyThroughPgBouncerAndOnAStandby reads that one in
// the real workbench) and on a schema newer than this binary (upgrade idemwork), the session
// used here.
func TestEveryViewThatRefusesAWriteSaysTheSessionsOwnReason(t *testing.T) {
	t.Parallel()
	ctx := testdb.Context(t)
	b := tuitest.New(t)
	testdb.AdminIn(t, b.DB.Name, `INSERT INTO goose_db_version (version_id, is_applied) VALUES (9999, true)`)
	sdb, err := store.Open(ctx, b.DB.DSN, store.Options{})
	require.NoError(t, err)
	t.Cleanup(sdb.Close)
	b.Ctx.Writes = workbench.Gate(sdb)
	require.True(t, b.Ctx.ReadOnly())
	const reason = `SCHEMA_NOT_READY: the database schema in schema "public" is newer than this idemwork`
	const wrong = "reconnect with --allow-writes"

	f := views.NewForm(b.Ctx, b.Backend.Form(), uictx.OpenFormMsg{Kind: "create", Module: "NOTE"})
	f.SetSize(100, 30)
	settle(t, f.Update, f.Init())
	f.Update(tea.KeyMsg{Type: tea.KeyTab})
	f.Update(tea.KeyMsg{Type: tea.KeyTab})
	typeText(f, "a title")
	f.Update(tea.KeyMsg{Type: tea.KeyCtrlS})
	require.Contains(t, f.View(), reason)
	require.NotContains(t, f.View(), wrong)

	deps := b.Backend.StormDeps()
	deps.Run = func(context.Context, stormtypes.Spec, chan<- stormtypes.Event, chan<- stormtypes.LockSample) (stormtypes.Summary, error) {
		t.Error("a storm fired on a standby")
		return stormtypes.Summary{}, nil
	}
	s := views.NewStorm(b.Ctx, deps)
	s.SetSize(120, 37)
	s.Update(press("f"))
	require.Contains(t, s.View(), "a storm writes: "+reason)
	require.NotContains(t, s.View(), wrong)

	d := views.NewDemo(b.Ctx, b.Backend.Demo)
	d.SetSize(120, 37)
	text := statusText(t, d.Update(press("n")))
	require.Contains(t, text, reason)
	require.NotContains(t, text, wrong)

	o := views.NewOutbox(b.Ctx, b.Backend.Outbox)
	o.SetSize(120, 37)
	text = statusText(t, o.Update(press("d")))
	require.Contains(t, text, reason)
	require.NotContains(t, text, wrong)
}
