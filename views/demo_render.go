package views

import (
	"fmt"
	"strings"

	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/model"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// demoChromeLines is the least the tabs line and the hint below the pane take.
const demoChromeLines = 2

// para word-wraps body (styled or not) to width cells after prefix, with later lines indented
// by the prefix's width: a hanging paragraph, so a wrapped check still reads as one.
func para(prefix, body string, width int) []string {
	indent := ansi.StringWidth(prefix)
	// ansi.Wrap keeps a breakpoint (the comma) at the end of a line it breaks after, one cell
	// past the limit: wrap one cell short so the line still fits.
	lines := strings.Split(ansi.Wrap(body, max(8, width-indent-1), " ,/"), "\n")
	for i, l := range lines {
		if i == 0 {
			lines[i] = prefix + l
		} else {
			lines[i] = strings.Repeat(" ", indent) + l
		}
	}
	return lines
}

// tabs is the parts line: the shown part reverse video (visible without colour), each with its key.
func (v *Demo) tabs() []string {
	s := v.ctx.Styles
	keys := [demoParts]string{"b", "o", "c"}
	var parts []string
	for i, name := range demoPartNames {
		if i == v.part {
			parts = append(parts, s.RowSelected.Render("▸"+keys[i]+" "+name+" "))
		} else {
			parts = append(parts, s.Subtle.Render(" "+keys[i]+" "+name+" "))
		}
	}
	return para(s.Title.Render("Demo")+" ", strings.Join(parts, " "), v.w)
}

// hint is the line below the pane: what n does next, or that the part is done.
func (v *Demo) hint() []string {
	s := v.ctx.Styles
	var text string
	st := s.Highlight
	switch {
	case v.errs[v.part] != "":
		text, st = v.errs[v.part], s.Danger
	case v.busy:
		text, st = "running…", s.Subtle
	case v.src == nil:
		text, st = "the demo needs a database", s.Subtle
	case v.part == partCompare:
		if _, _, ok := v.compareKeys(); ok {
			text, st = "n reads the rows again · b and o continue the walk-throughs; the comparison follows their rows", s.Subtle
		} else {
			text = "run both walk-throughs to their step 2 first: b, then o"
		}
	default:
		d, names := v.walk(v.part)
		switch {
		case d == nil:
			text, st = "the walk-through could not be prepared", s.Danger
		case !d.Done():
			n := d.StepsDone()
			text = fmt.Sprintf("next (n): step %d/%d · %s", n+1, len(names), names[n])
		case v.part == partBlocked:
			text, st = "done · o: the outbox that replaces it · Executions and Audit show the rows · x restarts with new keys", s.Success
		default:
			text, st = "done · c: both modes side by side · Outbox shows the messages · x runs again (the record is reused)", s.Success
		}
	}
	lines := wrap(text, v.w, 3)
	for i, l := range lines {
		lines[i] = st.Render(l)
	}
	return lines
}

// layout rebuilds the pane's content for the shown part (in Update, on change: View only
// draws). With toNewStep the pane scrolls to show the step just added: its end when it fits,
// else its beginning.
func (v *Demo) layout(toNewStep bool) {
	if v.w <= 0 || v.h <= 0 {
		return
	}
	if v.pane.ready {
		v.offsets[v.shown] = v.pane.vp.YOffset
	}
	v.shown = v.part
	chrome := len(v.tabs()) + len(v.hint())
	v.pane.SetSize(v.w, max(3, v.h-chrome))
	width := v.pane.InnerWidth()
	var lines []string
	var title string
	v.stepAt = v.stepAt[:0]
	switch v.part {
	case partBlocked:
		title = "blocked_external, guided"
		lines = v.walkLines(width, "owner "+safe(v.ctx.Owner)+" · keys "+safe(v.blockedKeys)+":create and "+safe(v.blockedKeys)+":publish",
			"MEM-001 F02 publish is direct_external: it would call a provider inside the database transaction, where a rollback could never undo the call. So it fails closed. Each step runs on n; every ✓ is a claim checked against the rows.",
			v.blockedSteps)
		title += fmt.Sprintf(" · %d/%d", len(v.blockedSteps), len(model.BlockedExternalSteps))
	case partOutbox:
		title = "the outbox instead, guided"
		keys := demoKeyPrefix + ":…"
		if v.outbox != nil {
			keys = strings.TrimSuffix(v.outbox.NotifyKey(1), "1") + "N"
		}
		lines = v.walkLines(width, "owner "+safe(v.ctx.Owner)+" · record key "+demoKeyPrefix+":record · notifications "+safe(keys),
			"COMMITMENT F02 notify is an outbox feature: the request commits a PENDING execution and an outbox message; a worker, outside any business transaction, calls the provider with the message's idempotency id and settles the execution. The walk-through's worker and provider are its own (it never claims another message), and it moves the workbench clock to each due moment: the header shows by how much, = resets it.",
			v.outboxSteps)
		title += fmt.Sprintf(" · %d/%d", len(v.outboxSteps), len(model.OutboxSteps))
	default:
		title = "the two modes side by side"
		lines = v.compareLines(width)
	}
	v.pane.SetContent(title, lines, strings.Join(lines, "\n"))
	v.pane.vp.SetYOffset(v.offsets[v.part])
	if toNewStep && len(v.stepAt) > 0 {
		v.pane.vp.GotoBottom()
		if start := v.stepAt[len(v.stepAt)-1]; start < v.pane.vp.YOffset {
			v.pane.vp.SetYOffset(start)
		}
	}
}

// walkLines lays out a walk-through: who and which keys, what it shows, then each step run.
func (v *Demo) walkLines(width int, who, intro string, steps []model.DemoStep) []string {
	s := v.ctx.Styles
	var out []string
	out = append(out, para("", s.Subtle.Render(who), width)...)
	out = append(out, para("", intro, width)...)
	for i, st := range steps {
		out = append(out, "")
		v.stepAt = append(v.stepAt, len(out))
		out = append(out, para(s.Bold.Render(fmt.Sprintf("step %d · ", i+1)), s.Bold.Render(safe(st.Step)), width)...)
		for _, n := range st.Notes {
			// A note that leads with the step's result says it first, marked: BLOCKED reads as
			// BLOCKED, never as a plain EXECUTED.
			if r := st.Result; r != "" && strings.HasPrefix(n, r) {
				out = append(out, para("  ", s.Warning.Render(safe(r))+safe(n[len(r):]), width)...)
				continue
			}
			out = append(out, para("  ", safe(n), width)...)
		}
		for _, c := range st.Checks {
			mark := s.Success.Render("✓ ")
			if !c.OK {
				mark = s.Danger.Render("✗ ")
			}
			out = append(out, para("  "+mark, safe(c.Claim)+s.Subtle.Render(" — "+safe(c.Text)), width)...)
		}
	}
	if len(steps) == 0 {
		out = append(out, "", s.Subtle.Render("n runs step 1."))
	}
	return out
}

// compareLines sets the two runs side by side: a heading per aspect, then the two columns; on a
// narrow pane the columns stack.
func (v *Demo) compareLines(width int) []string {
	s := v.ctx.Styles
	var out []string
	if v.compare == nil {
		done := func(part, n int) string {
			d, _ := v.walk(part)
			if d == nil {
				return "not prepared"
			}
			return fmt.Sprintf("%d of %d steps run", d.StepsDone(), n)
		}
		out = append(out, para("", "The comparison reads the rows the two walk-throughs left for one F02 request each: what committed, what the client got, what a replay returns now and what reached a provider. It needs step 2 of both.", width)...)
		out = append(out, "")
		out = append(out, para("", s.Subtle.Render("blocked_external: "+done(partBlocked, len(model.BlockedExternalSteps))+
			" · the outbox instead: "+done(partOutbox, len(model.OutboxSteps))), width)...)
		return out
	}
	c := v.compare
	out = append(out, para("", "One F02 request in each mode, read from the rows it left (and from the rows the worker wrote since).", width)...)
	rows := []struct {
		label string
		b, o  []string
	}{
		{"request", []string{"MEM-001 F02 publish", "key " + c.Blocked.Key}, []string{"COMMITMENT F02 notify", "key " + c.Outbox.Key}},
		{"committed in the request's transaction", c.Blocked.Committed, c.Outbox.Committed},
		{"the client gets", []string{c.Blocked.Client}, []string{c.Outbox.Client}},
		{"on replay", []string{c.Blocked.Replay}, []string{c.Outbox.Replay}},
		{"the provider sees", []string{c.Blocked.Provider}, []string{c.Outbox.Provider}},
	}
	bHead, oHead := "blocked_external", "outbox"
	if width < 50 {
		for _, r := range rows {
			out = append(out, "", s.Bold.Render(r.label))
			out = append(out, cell(s.Warning.Render(bHead+": "), r.b, width)...)
			out = append(out, cell(s.Success.Render(oHead+": "), r.o, width)...)
		}
		return out
	}
	col := (width - 3) / 2
	out = append(out, "", termsafe.Pad(s.Warning.Render(bHead), col)+" │ "+s.Success.Render(oHead))
	for _, r := range rows {
		out = append(out, "", s.Bold.Render(r.label))
		left, right := cell("", r.b, col), cell("", r.o, col)
		for i := 0; i < max(len(left), len(right)); i++ {
			var l, rt string
			if i < len(left) {
				l = left[i]
			}
			if i < len(right) {
				rt = right[i]
			}
			out = append(out, termsafe.Pad(l, col)+" │ "+rt)
		}
	}
	return out
}

// cell lays out one comparison cell: each entry a hanging paragraph of width cells.
func cell(prefix string, entries []string, width int) []string {
	var out []string
	for i, e := range entries {
		p := prefix
		if i > 0 {
			p = strings.Repeat(" ", ansi.StringWidth(prefix))
		}
		bullet := "· "
		if len(entries) == 1 {
			bullet = ""
		}
		out = append(out, para(p+bullet, safe(e), width)...)
	}
	return out
}

// View renders the view.
func (v *Demo) View() string {
	out := append(v.tabs(), v.pane.View(v.ctx.Styles, true))
	out = append(out, v.hint()...)
	return fitBlock(lipgloss.JoinVertical(lipgloss.Left, out...), v.w, v.h)
}
