package views_test

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"
	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/views"
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
	const id = "01JPATCH000000000000000000"
	// The record is at revision 2 ("v2") while the list still says revision 1 when the form opens.
	latest := newLatest(model.Record{ID: id, OwnerID: "alice", ModuleCode: "NOTE", Revision: 2, Title: "v2", Payload: []byte(`{}`)})
	w := &writer{answer: func(in any) (model.WriteResult, error) {
		if p := in.(model.PatchInput); p.ExpectRevision != 2 {
			return model.WriteResult{}, apperr.New(apperr.RevisionConflict, "record %s is no longer at revision %d", id, p.ExpectRevision)
		}
		return model.WriteResult{Outcome: idemtype.Executed, Operation: model.OpPatch("NOTE", id)}, nil
	}}
	f := views.NewForm(plainCtx(), views.FormDeps{Writer: w, Records: latest}, uictx.OpenFormMsg{Kind: "patch", Module: "NOTE", RecordID: id, Revision: 1})
	f.SetSize(100, 30)
	settle(t, f.Update, f.Init())
	require.Equal(t, "v2", fieldValue(t, f, "Title"))
	require.Equal(t, "2", fieldValue(t, f, "Expect revision"), "a fresh title goes with its own revision")
	require.Contains(t, f.View(), "prefilled from revision 2, the latest")
	settle(t, f.Update, f.Update(tea.KeyMsg{Type: tea.KeyCtrlS}))
	require.Contains(t, f.View(), "EXECUTED", "not a REVISION_CONFLICT")
	sent := w.last().(model.PatchInput)
	require.Equal(t, 2, sent.ExpectRevision)
	require.Nil(t, sent.Title, "a field left at the record's value is not sent, as a CLI flag left out is not")
	require.Nil(t, sent.Payload)
	require.Equal(t, id, sent.RecordID)
}

func TestAFixedFieldClearsItsErrorAndAnEditedPayloadSurvivesAModuleSwitch(t *testing.T) {
	t.Parallel()
	f := views.NewForm(plainCtx(), views.FormDeps{}, uictx.OpenFormMsg{Kind: "create", Module: "NOTE"})
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
	ctx := plainCtx()
	ctx.Clock = &movedClock{}
	ctx.Clock.Advance(time.Hour)
	w := &writer{answer: func(in any) (model.WriteResult, error) {
		return model.WriteResult{Outcome: idemtype.Executed, Operation: model.OpCreate("NOTE"),
			Record: &model.Record{ID: "01JUNKEYED0000000000000000", OwnerID: "alice", ModuleCode: "NOTE", Revision: 1, Title: in.(model.CreateInput).Title}}, nil
	}}
	f := views.NewForm(ctx, views.FormDeps{Writer: w}, uictx.OpenFormMsg{Kind: "create", Module: "NOTE"})
	f.SetSize(100, 30)
	require.Contains(t, f.View(), "the workbench clock is moved +1h0m0s: this write is stamped")
	tab := tea.KeyMsg{Type: tea.KeyTab}
	f.Update(tab) // -> key
	f.Update(tea.KeyMsg{Type: tea.KeyCtrlU})
	f.Update(tab) // -> title
	typeText(f, "unkeyed")
	var st uictx.StatusMsg
	settle(t, func(m tea.Msg) tea.Cmd {
		if s, ok := m.(uictx.StatusMsg); ok {
			st = s
		}
		return f.Update(m)
	}, f.Update(tea.KeyMsg{Type: tea.KeyCtrlS}))
	require.Contains(t, st.Text, "written under the moved clock (+1h0m0s)")
	require.Contains(t, f.View(), "ctrl+r send it again (no key: executes again)")
	require.NotContains(t, f.View(), "replays")
	require.Equal(t, model.CreateInput{Owner: "alice", Module: "NOTE", Title: "unkeyed", Payload: []byte(`{}`)}, w.last(),
		"no key: the write is sent without one (and an empty summary is none)")
}

// A stored title or summary a one-line field cannot hold (ESC, a newline, planted with psql) is
// left empty with a note, and the patch leaves it as it is: the field is not sent and does not
// block the submit.
func TestAPatchLeavesAValueTheFormCannotHoldAsItIs(t *testing.T) {
	t.Parallel()
	const id = "01JPATCH000000000000000000"
	latest := newLatest(model.Record{ID: id, OwnerID: "alice", ModuleCode: "NOTE", Revision: 1, Title: "\x1b[2J\x1b[31mCLEARED\ntwo",
		Summary: "line one\nline two", Payload: []byte(`{"a": 1}`)})
	w := &writer{answer: func(any) (model.WriteResult, error) {
		return model.WriteResult{Outcome: idemtype.Executed, Operation: model.OpPatch("NOTE", id)}, nil
	}}
	f := views.NewForm(plainCtx(), views.FormDeps{Writer: w, Records: latest}, uictx.OpenFormMsg{Kind: "patch", Module: "NOTE", RecordID: id, Revision: 1})
	f.SetSize(100, 30)
	settle(t, f.Update, f.Init())
	screen := strings.Join(strings.Fields(strings.ReplaceAll(f.View(), "│", "")), " ")
	require.Contains(t, screen, "the stored title holds control characters or line breaks (␛[2J␛[31mCLEARED␊two): left empty, a patch keeps it")
	require.Contains(t, screen, "(empty: unchanged)")
	require.NotContains(t, screen, "must be 1-200 characters")
	settle(t, f.Update, f.Update(tea.KeyMsg{Type: tea.KeyCtrlS}))
	sent := w.last().(model.PatchInput)
	require.Nil(t, sent.Title, "the title is not sent: the record keeps it")
	require.Nil(t, sent.Summary)
	require.Nil(t, sent.Payload)
	require.Equal(t, 1, sent.ExpectRevision)
}
