package views_test

import (
	"context"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"idemwork/internal/tuitest"
	"idemwork/kernel"
	"idemwork/tui/shared"
	"idemwork/views"
)

// fieldValue reads a form field's value off the screen: the line below its label.
func fieldValue(t *testing.T, f *views.Form, label string) string {
	t.Helper()
	lines := strings.Split(ansi.Strip(f.View()), "\n")
	for i, l := range lines {
		l = strings.Trim(l, "│ ")
		if strings.TrimPrefix(l, "> ") == label && i+1 < len(lines) {
			return strings.TrimSpace(strings.Trim(lines[i+1], "│"))
		}
	}
	t.Fatalf("no field %q on screen:\n%s", label, f.View())
	return ""
}

func TestThePatchFormTakesItsExpectedRevisionFromTheSameReadAsItsFields(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	ctx := context.Background()
	c, err := b.Kernel.Create(ctx, kernel.CreateInput{Owner: "alice", Module: "NOTE", Title: "v1"})
	require.NoError(t, err)
	title := "v2"
	_, err = b.Kernel.Patch(ctx, kernel.PatchInput{Owner: "alice", Module: "NOTE", RecordID: c.Record.ID, ExpectRevision: 1, Title: &title})
	require.NoError(t, err)
	// The list still says revision 1 when the form opens.
	f := views.NewForm(b.Ctx, b.Backend.Form(), shared.OpenFormMsg{Kind: "patch", Module: "NOTE", RecordID: c.Record.ID, Revision: 1})
	f.SetSize(100, 30)
	settle(t, f.Update, f.Init())
	require.Equal(t, "v2", fieldValue(t, f, "Title"))
	require.Equal(t, "2", fieldValue(t, f, "Expect revision"), "a fresh title goes with its own revision")
	require.Contains(t, f.View(), "prefilled from revision 2, the latest")
	settle(t, f.Update, f.Update(tea.KeyMsg{Type: tea.KeyCtrlS}))
	require.Contains(t, f.View(), "EXECUTED", "not a REVISION_CONFLICT")
}

func TestAFixedFieldClearsItsErrorAndAnEditedPayloadSurvivesAModuleSwitch(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	f := views.NewForm(b.Ctx, b.Backend.Form(), shared.OpenFormMsg{Kind: "create", Module: "NOTE"})
	f.SetSize(100, 30)
	tab := tea.KeyMsg{Type: tea.KeyTab}
	f.Update(tab) // -> key
	f.Update(tab) // -> title
	typeText(f, "t")
	f.Update(tab) // -> summary
	f.Update(tab) // -> payload
	f.Update(tea.KeyMsg{Type: tea.KeyCtrlU})
	typeText(f, `{"a":`)
	f.Update(tea.KeyMsg{Type: tea.KeyCtrlS})
	require.Contains(t, f.View(), "Payload: payload: unexpected end of JSON")
	typeText(f, `1}`)
	require.NotContains(t, f.View(), "Payload: payload: unexpected end of JSON", "the error goes once the payload is right")

	// Back to the module: switching keeps what was typed and says so.
	for i := 0; i < 4; i++ {
		f.Update(tea.KeyMsg{Type: tea.KeyShiftTab})
	}
	f.Update(tea.KeyMsg{Type: tea.KeyRight}) // NOTE -> MEM-001
	require.Equal(t, `{"a":1}`, fieldValue(t, f, "Payload"))
	require.Contains(t, f.View(), "the payload you edited is kept")
}

func TestSendingAgainWithoutAKeySaysItExecutesAgainAndAMovedClockIsFlagged(t *testing.T) {
	t.Parallel()
	b := tuitest.New(t)
	b.Clock.Advance(time.Hour)
	f := views.NewForm(b.Ctx, b.Backend.Form(), shared.OpenFormMsg{Kind: "create", Module: "NOTE"})
	f.SetSize(100, 30)
	require.Contains(t, f.View(), "the workbench clock is moved +1h0m0s: this write is stamped")
	tab := tea.KeyMsg{Type: tea.KeyTab}
	f.Update(tab) // -> key
	f.Update(tea.KeyMsg{Type: tea.KeyCtrlU})
	f.Update(tab) // -> title
	typeText(f, "unkeyed")
	var st shared.StatusMsg
	settle(t, func(m tea.Msg) tea.Cmd {
		if s, ok := m.(shared.StatusMsg); ok {
			st = s
		}
		return f.Update(m)
	}, f.Update(tea.KeyMsg{Type: tea.KeyCtrlS}))
	require.Contains(t, st.Text, "written under the moved clock (+1h0m0s)")
	require.Contains(t, f.View(), "ctrl+r send again (no key: executes again)")
	require.NotContains(t, f.View(), "replays")
}
