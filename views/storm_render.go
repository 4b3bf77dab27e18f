package views

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/model"
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

// shownKey is a key as a person must see it: a space, invisible on screen, as ␠ (a key holds
// none, and one typed by mistake must be seen), and every other control character escaped.
func shownKey(k string) string { return termsafe.Line(strings.ReplaceAll(k, " ", "␠")) }

// representable reports whether a one-line text field can hold s as it is.
func representable(s string) bool { return termsafe.Safe(s) }

func lower(s string) string { return strings.ToLower(s) }

// plural is "1 revision", "2 revisions".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// bodyText is a request's body as the storm sends it, field by field ("unchanged" for a patch
// field not sent, "none" for a create's default).
func bodyText(r model.WriteRequest) string {
	quoted := func(p *string, absent string) string {
		if p == nil {
			return absent
		}
		return strconv.Quote(*p)
	}
	object := func(raw json.RawMessage, absent string) string {
		if raw == nil {
			return absent
		}
		return compactJSON(raw)
	}
	switch r.Kind {
	case model.KindPatch:
		in := r.Patch
		return fmt.Sprintf("expectRevision %d · title %s · summary %s · payload %s", in.ExpectRevision,
			quoted(in.Title, "(unchanged)"), quoted(in.Summary, "(unchanged)"), object(in.Payload, "(unchanged)"))
	case model.KindAction:
		return "input " + object(r.Feature.Input, "{} (none)")
	}
	in := r.Create
	summary := quoted(in.Summary, "(none)")
	if in.Summary != nil && *in.Summary == "" {
		summary = "(none)"
	}
	return fmt.Sprintf("title %q · summary %s · payload %s", in.Title, summary, object(in.Payload, "{} (none)"))
}

// View renders the view: what the next storm fires at, its settings, then the storms fired,
// the newest with its progress and verdict, each under its own label.
func (v *Storm) View() string {
	s := v.ctx.Styles
	head := s.Title.Render("Replay storm") + s.Subtle.Render(" · fires at "+v.firesAt())
	out := []string{termsafe.Cut(head, v.w)}
	var about []string
	if v.target.record != "" {
		if v.execStatus != "" {
			about = append(about, "last execution "+v.execStatus)
		}
		if v.target.title != "" && v.target.resolved {
			about = append(about, fmt.Sprintf("title %q", v.target.title))
		}
	}
	if len(about) > 0 {
		out = append(out, s.Subtle.Render(termsafe.Cut(printable(strings.Join(about, " · ")), v.w)))
	}
	if why := v.refusal(); why != "" {
		out = append(out, wrapLines(s.Danger, printable("✗ "+why), v.w, 3)...)
	}
	if v.editing {
		out = append(out, v.formLines()...)
	} else {
		out = append(out, v.settingsLines()...)
	}
	if v.err != "" {
		out = append(out, wrapLines(s.Danger, printable(v.err), v.w, 3)...)
	}
	if r := v.last(); r != nil {
		out = append(out, "")
		out = append(out, v.runLabel(r)...)
		out = append(out, v.progressLines(r)...)
		out = append(out, v.verdictLines(r)...)
		out = append(out, v.historyLines(max(0, v.h-len(out)-1))...)
	} else if !v.editing {
		out = append(out, "")
		out = append(out, wrapLines(s.Subtle, "e: edit the settings and the body · ctrl+s saves them · f: fire · in Records, s on a record prepares a patch/action storm", v.w, 2)...)
	}
	return fitBlock(strings.Join(out, "\n"), v.w, v.h)
}

// formLines are the settings as a form, one line per field that applies; the focused one is
// marked (also without colour) and followed by its hint. What is wrong with a field is under
// it, focused or not; a key's invisible characters are shown there too.
func (v *Storm) formLines() []string {
	s := v.ctx.Styles
	var out []string
	indent := strings.Repeat(" ", 26)
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
		out = append(out, termsafe.Cut(marker+label.Render(termsafe.Pad(f.label, 24))+val, v.w))
		msg := ""
		if f.validate != nil {
			msg = f.validate(f.value())
		}
		switch {
		case msg != "":
			for _, l := range wrapLines(s.FieldError, "✗ "+msg, v.w-len(indent), 2) {
				out = append(out, indent+l)
			}
			if f.label == fKey && shownKey(f.value()) != f.value() {
				out = append(out, indent+s.FieldError.Render("as typed: "+cutLeft(shownKey(f.value()), v.w-len(indent)-10)))
			}
		case i == v.focus && f.hint != "":
			for _, l := range wrapLines(s.Subtle, f.hint, v.w-len(indent), 2) {
				out = append(out, indent+l)
			}
		}
	}
	return out
}

// settingsLines sum the next storm's settings up while not editing: how, and the body.
func (v *Storm) settingsLines() []string {
	s := v.ctx.Styles
	op := v.value(fOperation)
	what := op
	if op == model.KindAction {
		what += " " + v.value(fFeature)
	}
	via := v.value(fVia)
	if via == stormtypes.ViaHTTP {
		via += " × " + v.value(fServers) + " server(s)"
	}
	line1 := fmt.Sprintf("next: %s · key %s · %s requests × %s workers × %s process(es) · via %s · sharing %s",
		what, shownKey(v.value(fKey)), v.value(fN), v.value(fConcurrency), v.value(fProcesses), via, v.value(fShare))
	if v.value(fFailFirst) == "yes" {
		line1 += " · fail-first"
	}
	if h := v.value(fHold); h != "" && h != "0" {
		line1 += " · hold " + h
	}
	out := wrapLines(s.Subtle, printable(line1), v.w, 2)
	if f := v.invalidField(); f != nil {
		return append(out, wrapLines(s.Danger, printable("✗ "+f.label+": "+f.validate(f.value())+" (e edits it)"), v.w, 2)...)
	}
	return append(out, wrapLines(s.Subtle, "body: "+printable(bodyText(v.request())), v.w, 2)...)
}

// runLabel is what a storm was fired with: its number, when, its operation, owner and key, and
// its body — so its results never read as the settings' above them.
func (v *Storm) runLabel(r *stormRun) []string {
	s := v.ctx.Styles
	target := safe(r.req.Module())
	if id := r.req.RecordID(); id != "" {
		target += " " + shortID(id, 12)
	}
	state := "fired"
	if v.running && r == v.last() {
		state = "firing"
	}
	head := fmt.Sprintf("storm #%d %s %s · %s %s of %s · key %s", r.n, state, r.at.Local().Format("15:04:05"), r.req.Kind, target,
		safe(r.owner), shownKey(r.req.Key()))
	out := wrapLines(s.Bold, head, v.w, 2)
	return append(out, wrapLines(s.Subtle, "  body: "+printable(bodyText(r.req)), v.w, 2)...)
}

// historyLines list the storms before the last, one line each, newest first, in at most n
// lines.
func (v *Storm) historyLines(n int) []string {
	if len(v.runs) < 2 || n < 2 {
		return nil
	}
	s := v.ctx.Styles
	out := []string{s.Subtle.Render("earlier storms:")}
	for i := len(v.runs) - 2; i >= 0 && len(out) < n; i-- {
		r := v.runs[i]
		result := r.notRun
		if r.summary != nil {
			result = r.summary.Verdict.Text
		}
		var counts []string
		for _, k := range stormtypes.OrderedOutcomes(r.outcomes) {
			counts = append(counts, fmt.Sprintf("%s %d", k, r.outcomes[k]))
		}
		line := fmt.Sprintf("  #%d %s %s key %s · %s · %s", r.n, r.at.Local().Format("15:04:05"), r.req.Kind, shownKey(r.req.Key()),
			strings.Join(counts, " "), result)
		out = append(out, s.Subtle.Render(termsafe.Cut(printable(line), v.w)))
	}
	return out
}

// seconds renders a duration as "0.4 s", "12.3 s".
func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

// progressLines are a storm's counts: progress, outcomes, latency, locks, and what a stalled
// storm waits on.
func (v *Storm) progressLines(r *stormRun) []string {
	s := v.ctx.Styles
	running := v.running && r == v.last()
	n, done := r.spec.N, len(r.latencies)
	if r.summary != nil {
		done = r.summary.Requests - r.summary.Outcomes[string(stormtypes.CodeCancelled)]
	}
	if n == 0 || (!running && done == 0 && r.summary == nil) {
		return nil
	}
	var out []string
	text := fmt.Sprintf(" %d/%d answered · %s elapsed", done, n, seconds(r.elapsed))
	switch {
	case running && v.stopping:
		text += " · stopping…"
	case r.summary != nil && r.summary.Verdict.Verdict == stormtypes.VerdictStopped:
		text = " " + r.summary.Verdict.Text
	}
	line := s.Subtle.Render(text)
	if bw := v.w - ansi.StringWidth(text) - 1; bw >= 10 {
		v.bar.Width = min(bw, 60)
		line = v.bar.ViewAs(float64(done)/float64(n)) + line
	}
	out = append(out, termsafe.Cut(line, v.w))

	var parts []string
	// A BLOCKED (or only queued) execution is said with the outcome that made it: "EXECUTED 1"
	// alone would read as the real action done.
	action := r.spec.Op == stormtypes.OpAction
	flagged := r.execStatus != "" && r.execStatus != "SUCCEEDED" && action
	if r.execStatus != "" && action {
		parts = append(parts, s.Warning.Render("execution "+r.execStatus))
	}
	for _, k := range stormtypes.OrderedOutcomes(r.outcomes) {
		st := s.Warning
		text := fmt.Sprintf("%s %d", k, r.outcomes[k])
		switch k {
		case "EXECUTED":
			st = s.Success
			if flagged {
				st, text = s.Warning, fmt.Sprintf("%s %d (%s)", k, r.outcomes[k], r.execStatus)
			}
		case "JOINED", "REPLAYED":
			st = s.Highlight
		}
		parts = append(parts, st.Render(text))
	}
	parts = append(parts, s.Subtle.Render(fmt.Sprintf("waited on the unique index %d", r.waited)))
	out = append(out, wrap(strings.Join(parts, "   "), v.w, 2)...)
	if r.reuse != "" {
		out = append(out, wrapLines(s.Warning, printable("IDEMPOTENCY_KEY_REUSED: "+r.reuse), v.w, 3)...)
	}
	out = append(out, termsafe.Cut(fmt.Sprintf("latency ms  p50 %.2f  p95 %.2f  p99 %.2f  max %.2f", stormtypes.Percentile(r.sorted, 50), stormtypes.Percentile(r.sorted, 95),
		stormtypes.Percentile(r.sorted, 99), stormtypes.Percentile(r.sorted, 100)), v.w))
	out = append(out, s.Highlight.Render(sparkline(r.latencies, v.w-2)))

	if running {
		l := r.locks
		locks := fmt.Sprintf("locks: %d of the storm's sessions wait now · peak %d", l.Waiting, l.PeakWaiting)
		if !l.PeakAt.IsZero() && l.PeakWaiting > 0 {
			locks += " at " + l.PeakAt.Local().Format("15:04:05.000")
		}
		out = append(out, s.Subtle.Render(termsafe.Cut(locks, v.w)))
		if quiet := time.Since(r.lastEvent); quiet >= stallAfter && done < n && !v.stopping {
			why := l.WaitsOn()
			if why == "" {
				why = "none of the storm's sessions waits on a lock"
			}
			if r.spec.Hold > 0 {
				why += fmt.Sprintf(" — the winner holds its transaction %s (hold)", r.spec.Hold)
			}
			out = append(out, wrapLines(s.Warning, fmt.Sprintf("no answer for %s: %s", seconds(quiet), printable(why)), v.w, 3)...)
		}
	} else if sm := r.summary; sm != nil {
		locks := fmt.Sprintf("locks: peak %d of the storm's sessions waiting", sm.Locks.PeakWaiting)
		if at := sm.Locks.PeakAt; at != nil && !at.IsZero() && sm.Locks.PeakWaiting > 0 {
			locks += " at " + at.Local().Format("15:04:05.000")
		}
		locks += fmt.Sprintf(" (%d samples)", sm.Locks.Samples)
		out = append(out, s.Subtle.Render(termsafe.Cut(locks, v.w)))
		if sm.Locks.PeakWaiting > r.waited {
			out = append(out, wrapLines(s.Subtle, locksVersusWaited(sm.Locks.PeakWaiting, r.waited, r.lockTypes), v.w, 3)...)
		}
	}
	return out
}

// locksVersusWaited explains a lock peak larger than the requests that waited on the unique
// index: the two count different things.
func locksVersusWaited(peak, waited int, types []string) string {
	what := "a lock"
	if len(types) > 0 {
		what = "a lock (" + strings.Join(types, ", ") + ")"
	}
	return fmt.Sprintf("why %d ≠ %d: the peak counts the storm's sessions waiting on %s at one moment — queued behind the key's "+
		"holder on the unique index, or behind a record's row lock; \"waited on the unique index\" counts only the requests "+
		"that queued behind the holder and then found its committed result. A holder that rolls back (a refused write) hands "+
		"the key to the next in line, whose wait is not counted there.", peak, waited, what)
}

// verdictLines are the verdict's three parts, each wrapped to at most three lines.
func (v *Storm) verdictLines(r *stormRun) []string {
	sm := r.summary
	s := v.ctx.Styles
	if sm == nil {
		if r.notRun == "" || (v.running && r == v.last()) {
			return nil
		}
		// No request was sent: no answers to count and nothing to read back, so the verdict's
		// place says the storm did not run, and why.
		label := "verdict  "
		var out []string
		for i, l := range wrapLines(s.Danger, "the storm did not run: "+printable(r.notRun), v.w-len(label)-2, 6) {
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
	if r.err != "" {
		out = append(out, wrapLines(s.Danger, printable(r.err), v.w, 2)...)
	}
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
	out = append(out, s.Subtle.Render(termsafe.Cut(tail, v.w)))
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

// wrapCommand wraps a command line at its spaces only (a flag's "--" stays with its name), a
// word longer than the line cut hard, at most maxLines lines in style st.
func wrapCommand(st lipgloss.Style, text string, w, maxLines int) []string {
	w = max(w, 10)
	var lines []string
	line := ""
	for _, word := range strings.Split(text, " ") {
		switch {
		case line == "":
			line = word
		case ansi.StringWidth(line)+1+ansi.StringWidth(word) <= w:
			line += " " + word
		default:
			lines, line = append(lines, line), word
		}
		for ansi.StringWidth(line) > w { // a word longer than the line
			lines, line = append(lines, ansi.Truncate(line, w, "")), ansi.TruncateLeft(line, w, "")
		}
	}
	lines = append(lines, line)
	if len(lines) > maxLines {
		lines = lines[:maxLines]
		lines[maxLines-1] = termsafe.Cut(lines[maxLines-1]+" …", w)
	}
	for i, l := range lines {
		lines[i] = st.Render(l)
	}
	return lines
}

// noBreakHyphen stands in for "-" while text is wrapped: ansi.Wrap breaks after every hyphen,
// which would split a key (tui-01…), a flag (--data-dir) or a module (MEM-001) over two lines.
const noBreakHyphen = "\u2011"

// wrap word-wraps text (styled or not) to w cells at its spaces, at most maxLines lines; a word
// longer than the line is cut hard.
func wrap(text string, w, maxLines int) []string {
	w = max(w, 10)
	protect := !strings.Contains(text, noBreakHyphen)
	if protect {
		text = strings.ReplaceAll(text, "-", noBreakHyphen)
	}
	wrapped := ansi.Wrap(text, w, "")
	if protect {
		wrapped = strings.ReplaceAll(wrapped, noBreakHyphen, "-")
	}
	lines := strings.Split(wrapped, "\n")
	if len(lines) > maxLines {
		lines = lines[:maxLines]
		lines[maxLines-1] = termsafe.Cut(lines[maxLines-1]+" …", w)
	}
	return lines
}
