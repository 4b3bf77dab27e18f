package views

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/idemwork/idemwork/storm/stormtypes"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// The Storm view's drawing: everything here reads the view's state, none of it changes it.

// printable makes stored or remote text one terminal-safe line: control characters become
// Go escapes, so a title holding ESC or a newline cannot move the cursor.
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) < 0 {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// View renders the view.
func (v *Storm) View() string {
	s := v.ctx.Styles
	target := "create a " + safe(v.module) + " record"
	var about []string
	if v.record != "" {
		target = fmt.Sprintf("%s %s (revision %d)", safe(v.module), safe(v.record), v.revision)
		if v.execStatus != "" {
			about = append(about, "last execution "+v.execStatus)
		}
		if v.recordTitle != "" {
			about = append(about, fmt.Sprintf("title %q", v.recordTitle))
		}
	}
	out := []string{cut(s.Title.Render("Replay storm")+s.Subtle.Render(" · "+target), v.w)}
	if len(about) > 0 {
		out = append(out, s.Subtle.Render(cut(printable(strings.Join(about, " · ")), v.w)))
	}
	if v.editing {
		out = append(out, v.formLines()...)
	} else {
		out = append(out, v.settingsLines()...)
	}
	out = append(out, "")
	if v.err != "" {
		out = append(out, wrapLines(s.Danger, printable(v.err), v.w, 3)...)
	}
	out = append(out, v.progressLines()...)
	out = append(out, v.verdictLines()...)
	if !v.running && !v.editing && v.summary == nil && v.notRun == "" && len(v.latencies) == 0 {
		out = append(out, wrapLines(s.Subtle, "e: edit the settings and the body · f: fire · in Records, s on a record prepares a patch/action storm", v.w, 2)...)
	}
	return fitBlock(strings.Join(out, "\n"), v.w, v.h)
}

// formLines are the settings as a form, one line per field that applies; the focused one is
// marked (also without colour) and followed by its hint or what is wrong with it.
func (v *Storm) formLines() []string {
	s := v.ctx.Styles
	var out []string
	for _, i := range v.visible() {
		f := v.fields[i]
		label, marker := s.InputLabel, "  "
		if i == v.focus {
			label, marker = s.InputLabelFocused, "▸ "
		}
		val := f.input.View()
		if f.choices != nil {
			val = f.value()
			if i == v.focus {
				val = s.RowSelected.Render(" ◂ " + val + " ▸ ")
			}
		}
		out = append(out, cut(marker+label.Render(pad(f.label, 24))+val, v.w))
		if i != v.focus {
			continue
		}
		var note string
		if f.validate != nil {
			if msg := f.validate(f.value()); msg != "" {
				note = s.FieldError.Render("✗ " + msg)
			}
		}
		if note == "" && f.hint != "" {
			note = s.Subtle.Render(f.hint)
		}
		if note != "" {
			out = append(out, cut(strings.Repeat(" ", 26)+note, v.w))
		}
	}
	return out
}

// settingsLines sum the settings up in two or three lines while not editing.
func (v *Storm) settingsLines() []string {
	s := v.ctx.Styles
	op := v.value(fOperation)
	what := op
	if op == "action" {
		what += " " + v.value(fFeature)
	}
	via := v.value(fVia)
	if via == stormtypes.ViaHTTP {
		via += " × " + v.value(fServers) + " server(s)"
	}
	line1 := fmt.Sprintf("%s · key %s · %s requests × %s workers × %s process(es) · via %s · sharing %s",
		what, v.value(fKey), v.value(fN), v.value(fConcurrency), v.value(fProcesses), via, v.value(fShare))
	if v.value(fFailFirst) == "yes" {
		line1 += " · fail-first"
	}
	if h := v.value(fHold); h != "" && h != "0" {
		line1 += " · hold " + h
	}
	var body string
	switch op {
	case "action":
		body = "input " + v.value(fInput)
	case "patch":
		title, payload := v.value(fTitle), v.value(fPayload)
		if title == "" {
			title = "(unchanged)"
		} else {
			title = strconv.Quote(title)
		}
		if payload == "" {
			payload = "(unchanged)"
		}
		body = fmt.Sprintf("expectRevision %s · title %s · payload %s", v.value(fExpect), title, payload)
	default:
		payload := v.value(fPayload)
		if payload == "" {
			payload = "(none)"
		}
		body = fmt.Sprintf("title %q · payload %s", v.value(fTitle), payload)
	}
	return append(wrapLines(s.Subtle, printable(line1), v.w, 2), wrapLines(s.Subtle, "body: "+printable(body), v.w, 2)...)
}

// seconds renders a duration as "0.4 s", "12.3 s".
func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// progressLines are the live counts: progress, outcomes, latency, locks, and what a stalled
// storm waits on.
func (v *Storm) progressLines() []string {
	s := v.ctx.Styles
	n, done := v.spec.N, len(v.latencies)
	if v.summary != nil {
		done = v.summary.Requests - v.summary.Outcomes[string(stormtypes.CodeCancelled)]
	}
	if n == 0 || (!v.running && done == 0 && v.summary == nil) {
		return nil
	}
	var out []string
	text := fmt.Sprintf(" %d/%d answered · %s elapsed", done, n, seconds(v.elapsed))
	switch {
	case v.stopping:
		text += " · stopping…"
	case v.summary != nil && v.summary.Verdict.Verdict == stormtypes.VerdictStopped:
		text = " " + v.summary.Verdict.Text
	}
	line := s.Subtle.Render(text)
	if bw := v.w - ansi.StringWidth(text) - 1; bw >= 10 {
		v.bar.Width = min(bw, 60)
		line = v.bar.ViewAs(float64(done)/float64(n)) + line
	}
	out = append(out, cut(line, v.w))

	var parts []string
	// A BLOCKED (or only queued) execution is said with the outcome that made it: "EXECUTED 1"
	// alone would read as the real action done.
	flagged := v.execStatus != "" && v.execStatus != "SUCCEEDED" && v.spec.Op == stormtypes.OpAction
	if v.execStatus != "" && v.spec.Op == stormtypes.OpAction {
		parts = append(parts, s.Warning.Render("execution "+v.execStatus))
	}
	for _, k := range stormtypes.OrderedOutcomes(v.outcomes) {
		st := s.Warning
		text := fmt.Sprintf("%s %d", k, v.outcomes[k])
		switch k {
		case "EXECUTED":
			st = s.Success
			if flagged {
				st, text = s.Warning, fmt.Sprintf("%s %d (%s)", k, v.outcomes[k], v.execStatus)
			}
		case "JOINED", "REPLAYED":
			st = s.Highlight
		}
		parts = append(parts, st.Render(text))
	}
	parts = append(parts, s.Subtle.Render(fmt.Sprintf("waited on the unique index %d", v.waited)))
	out = append(out, wrap(strings.Join(parts, "   "), v.w, 2)...)
	out = append(out, cut(fmt.Sprintf("latency ms  p50 %.2f  p95 %.2f  p99 %.2f  max %.2f", stormtypes.Percentile(v.sorted, 50), stormtypes.Percentile(v.sorted, 95),
		stormtypes.Percentile(v.sorted, 99), stormtypes.Percentile(v.sorted, 100)), v.w))
	out = append(out, s.Highlight.Render(sparkline(v.latencies, v.w-2)))

	if v.running {
		l := v.locks
		locks := fmt.Sprintf("locks: %d of the storm's sessions wait now · peak %d", l.Waiting, l.PeakWaiting)
		if !l.PeakAt.IsZero() && l.PeakWaiting > 0 {
			locks += " at " + l.PeakAt.Local().Format("15:04:05.000")
		}
		out = append(out, s.Subtle.Render(cut(locks, v.w)))
		if quiet := time.Since(v.lastEvent); quiet >= stallAfter && done < n && !v.stopping {
			why := l.WaitsOn()
			if why == "" {
				why = "none of the storm's sessions waits on a lock"
			}
			if v.spec.Hold > 0 {
				why += fmt.Sprintf(" — the winner holds its transaction %s (hold)", v.spec.Hold)
			}
			out = append(out, wrapLines(s.Warning, fmt.Sprintf("no answer for %s: %s", seconds(quiet), printable(why)), v.w, 3)...)
		}
	} else if sm := v.summary; sm != nil {
		locks := fmt.Sprintf("locks: peak %d of the storm's sessions waiting", sm.Locks.PeakWaiting)
		if at := sm.Locks.PeakAt; at != nil && !at.IsZero() && sm.Locks.PeakWaiting > 0 {
			locks += " at " + at.Local().Format("15:04:05.000")
		}
		locks += fmt.Sprintf(" (%d samples)", sm.Locks.Samples)
		out = append(out, s.Subtle.Render(cut(locks, v.w)))
	}
	return out
}

// verdictLines are the verdict's three parts, each wrapped to at most three lines.
func (v *Storm) verdictLines() []string {
	sm := v.summary
	s := v.ctx.Styles
	if sm == nil {
		if v.notRun == "" || v.running {
			return nil
		}
		// No request was sent: no answers to count and nothing to read back, so the verdict's
		// place says the storm did not run, and why.
		label := "verdict  "
		var out []string
		for i, l := range wrapLines(s.Danger, "the storm did not run: "+printable(v.notRun), v.w-len(label)-2, 4) {
			head := strings.Repeat(" ", len(label)+2)
			if i == 0 {
				head = s.Bold.Render(label) + s.Danger.Render("✗ ")
			}
			out = append(out, head+l)
		}
		return out
	}
	vd := sm.Verdict
	mark := func(ok bool) lipgloss.Style {
		if ok {
			return s.Success
		}
		return s.Danger
	}
	sign := func(ok bool) string {
		if ok {
			return "✓ "
		}
		return "✗ "
	}
	agrees := vd.Verdict == stormtypes.VerdictAgrees
	var out []string
	for _, p := range []struct {
		label string
		ok    bool
		text  string
	}{
		{"answers  ", vd.Answers.OK, vd.Answers.Text},
		{"database ", vd.Database.OK, vd.Database.Text},
		{"verdict  ", agrees, vd.Text},
	} {
		lines := wrapLines(s.Subtle, printable(p.text), v.w-len(p.label)-2, 3)
		for i, l := range lines {
			head := strings.Repeat(" ", len(p.label)+2)
			if i == 0 {
				head = s.Bold.Render(p.label) + mark(p.ok).Render(sign(p.ok))
			}
			out = append(out, head+l)
		}
	}
	d := sm.Distinct
	tail := fmt.Sprintf("distinct in responses: recordIds %d, revisions %d, executionIds %d · release → last response %.0f ms",
		d.RecordIDs, d.Revisions, d.ExecutionIDs, sm.WallMs)
	if n := len(sm.ByServer); n > 1 {
		tail += fmt.Sprintf(" · %d servers", n)
	}
	out = append(out, s.Subtle.Render(cut(tail, v.w)))
	return out
}

// wrapLines word-wraps text to w cells in style st, at most maxLines lines (the last one cut).
func wrapLines(st lipgloss.Style, text string, w, maxLines int) []string {
	lines := wrap(text, w, maxLines)
	for i, l := range lines {
		lines[i] = st.Render(l)
	}
	return lines
}

// wrap word-wraps text (styled or not) to w cells, at most maxLines lines.
func wrap(text string, w, maxLines int) []string {
	w = max(w, 10)
	lines := strings.Split(ansi.Wrap(text, w, ""), "\n")
	if len(lines) > maxLines {
		lines = lines[:maxLines]
		lines[maxLines-1] = cut(lines[maxLines-1]+" …", w)
	}
	return lines
}
