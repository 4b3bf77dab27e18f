package views_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/views"
)

// A view that does not refresh itself says when what it shows was read — "as of HH:MM:SS" by
// the workbench clock when the read began — and keeps saying it while the clock runs on (its
// rows are that old, not newer); r reads again, with what was written meanwhile behind its
// back (psql, another process), and says the new time. Lists, a key's detail, a record's
// detail and Verify alike.
func TestViewsThatDoNotRefreshThemselvesSayAsOfWhenAndRReadsAgain(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	tuitest.SeedFixed(t, b)
	var now atomic.Int64
	now.Store(tuitest.Now.UnixNano())
	b.Ctx.NowFunc = func() time.Time { return time.Unix(0, now.Load()).UTC() }
	later := func(d time.Duration) { now.Add(int64(d)) }
	r := tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("r")}
	enter := tea.KeyMsg{Type: tea.KeyEnter}
	plain := func(v interface{ View() string }) string {
		return strings.Join(strings.Fields(ansi.Strip(v.View())), " ")
	}
	external := func(key, title string) { // a write the workbench does not hear of
		t.Helper()
		_, err := b.Kernel.Create(t.Context(), model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: key, Title: title})
		require.NoError(t, err)
	}

	keys := views.NewKeys(b.Ctx, b.Backend.Keys)
	keys.SetSize(120, 30)
	settle(t, keys.Update, keys.Init())
	require.Contains(t, plain(keys), "3 loaded · as of 12:00:00")
	later(5 * time.Minute)
	external("external-1", "written elsewhere")
	settle(t, keys.Update, keys.Update(views.TickMsg{}))
	require.Contains(t, plain(keys), "3 loaded · as of 12:00:00", "the clock runs on; the rows are as old as they were")
	settle(t, keys.Update, keys.Update(r))
	require.Contains(t, plain(keys), "4 loaded · as of 12:05:00")
	settle(t, keys.Update, keys.Update(enter))
	require.Contains(t, plain(keys), "as of 12:05:00 (r reads again", "the key's detail")
	later(time.Minute)
	settle(t, keys.Update, keys.Update(r))
	require.Contains(t, plain(keys), "as of 12:06:00 (r reads again")

	recs := views.NewRecords(b.Ctx, b.Backend.Records)
	recs.SetSize(120, 30)
	settle(t, recs.Update, recs.Init())
	require.Contains(t, plain(recs), "3 loaded · as of 12:06:00")
	settle(t, recs.Update, recs.OpenRecord("NOTE", tuitest.NoteID))
	require.Contains(t, plain(recs), "audit events as of 12:06:00", "the record's detail")

	ver := views.NewVerify(b.Ctx, b.Backend.Verify)
	ver.SetSize(120, 30)
	settle(t, ver.Update, ver.SetActive(true))
	require.Contains(t, plain(ver), "for alice as of 12:06:00")
	later(time.Hour)
	settle(t, ver.Update, ver.Update(r))
	require.Contains(t, plain(ver), "for alice as of 13:06:00")
}
