package views_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/views"
)

func TestTheVerifyViewShowsTheCurrentOwnersInvariantsAndEscapesStoredText(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	ctx := context.Background()
	_, err := b.Kernel.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "v", Title: "fine"})
	require.NoError(t, err)
	v := views.NewVerify(b.Ctx, b.Backend.Verify)
	v.SetSize(100, 20)
	settle(t, v.Update, v.SetActive(true))
	screen := v.View()
	require.Contains(t, screen, "✓ every invariant holds for alice")
	require.Contains(t, screen, "✓ envelope_restores")

	// A record planted with psql whose id carries an escape sequence and a newline, and whose
	// revision is not its revisions' count; bob's broken rows are not alice's business.
	_, err = b.DB.Pool.Exec(ctx, `INSERT INTO record (owner_id, id, module_code, revision, title, payload, created_at, updated_at)
		VALUES ('alice', E'EVIL\x1b[2J\nX', 'NOTE', 3, 't', '{}', now(), now()), ('bob', 'B', 'NOTE', 9, 't', '{}', now(), now())`)
	require.NoError(t, err)
	settle(t, v.Update, v.Update(uictx.DataChangedMsg{}))
	screen = v.View()
	require.Contains(t, screen, "✗ revisions_dense")
	require.Contains(t, screen, `record EVIL\x1b[2J\nX: record.revision is 3 but it has 0`)
	require.NotContains(t, screen, "\x1b[2J", "stored text never reaches the terminal raw")
	require.NotContains(t, screen, "B:", "only the current owner is checked")
	lines := strings.Split(screen, "\n")
	require.Len(t, lines, 20)
	for _, l := range lines {
		require.LessOrEqual(t, ansi.StringWidth(l), 100)
	}

	// The owner changes: the check runs again for the new owner.
	b.Ctx.Owner = "bob"
	settle(t, v.Update, v.Update(uictx.OwnerChangedMsg{}))
	require.Contains(t, v.View(), "violation(s) for bob")
	require.Equal(t, "B", v.Selection())

	// r runs it again; j scrolls a report taller than the pane.
	settle(t, v.Update, v.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{'r'}}))
	v.SetSize(100, 8)
	first := v.View()
	v.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{'j'}})
	require.NotEqual(t, first, v.View())
}

// A title planted with psql holding ESC [2J (shown escaped everywhere else) is a finding of
// Verify, where support looks for damage: named by its control character, at 80 columns.
func TestTheVerifyViewFlagsControlCharactersPlantedInATitle(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	ctx := context.Background()
	res, err := b.Kernel.Create(ctx, model.CreateInput{Owner: "alice", Module: kernel.ModuleNote, Key: "v", Title: "fine"})
	require.NoError(t, err)
	plant(t, b, `UPDATE record SET title = E'a\x1b[2Jb' WHERE id = $1`, res.Record.ID)
	v := views.NewVerify(b.Ctx, b.Backend.Verify)
	v.SetSize(63, 21)
	settle(t, v.Update, v.SetActive(true))
	screen := strings.Join(requireBlock(t, v.View(), 63, 21), "\n")
	require.Contains(t, screen, "✗ text_printable")
	require.Contains(t, strings.Join(strings.Fields(screen), " "),
		"record "+res.Record.ID+": the row's title: holds the control character U+001B (character 2)")
}

// blockingChecker reports some progress, then runs until its context ends, as a verify of an
// owner with a million audit events does.
type blockingChecker struct{}

func (blockingChecker) VerifyInvariants(ctx context.Context, opts model.VerifyOptions) (model.InvariantReport, error) {
	opts.Progress(model.VerifyProgress{Table: "auditEvents", Checked: 123_456, Estimate: 1_000_000})
	<-ctx.Done()
	return model.InvariantReport{}, ctx.Err()
}

// Issue 22, item 6: a long verify shows how far it is — rows checked of an estimate — has no
// deadline of its own, and ctrl+x cancels it, which says so (never "the database did not answer").
func TestTheVerifyViewShowsProgressAndCtrlXCancels(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	v := views.NewVerify(b.Ctx, blockingChecker{})
	v.SetSize(80, 20)
	listen := v.SetActive(true)
	next := v.Update(listen())
	screen := ansi.Strip(v.View())
	require.Contains(t, screen, "verifying… 123,456 of ~1,000,000 rows checked (12%) · reading auditEvents")
	require.Contains(t, screen, "ctrl+x cancels")
	require.Contains(t, helpKeys(v.ShortHelp()), "ctrl+x")

	v.Update(tea.KeyMsg{Type: tea.KeyCtrlX})
	done := make(chan tea.Msg, 1)
	go func() { done <- next() }()
	select {
	case msg := <-done:
		v.Update(msg)
	case <-time.After(10 * time.Second):
		t.Fatal("ctrl+x did not end the check")
	}
	screen = ansi.Strip(v.View())
	require.Contains(t, screen, "cancelled after 123,456 rows (reading auditEvents): no verdict · r runs it again")
	require.NotContains(t, screen, "DATABASE_UNAVAILABLE")
	require.NotContains(t, helpKeys(v.ShortHelp()), "ctrl+x")
}

func helpKeys(bs []key.Binding) string {
	var out []string
	for _, b := range bs {
		out = append(out, b.Help().Key)
	}
	return strings.Join(out, " ")
}
