// Package ticket writes one idempotency key's story for a support ticket (issue 22): the verdict
// in words, the stored envelope, the response a retry gets now, and the key's rows life by life —
// as Markdown a person pastes or attaches, or as the key's JSON. `idemwork key --format md|json`
// and the Keys view's x write it. Every stored string is rendered terminal-safe (package
// termsafe): the file can be cat'ed without running anything a planted string holds.
package ticket

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/model"
)

// Meta is what the export says about itself.
type Meta struct {
	Owner string
	// Database names where the rows were read ("embedded …", host:port/db): never a password.
	Database string
	// At is when the rows were read.
	At time.Time
}

// Formats of an export.
const (
	FormatMarkdown = "md"
	FormatJSON     = "json"
)

// Markdown writes kv as a Markdown document.
func Markdown(w io.Writer, kv model.KeyView, m Meta) error {
	var b strings.Builder
	line := termsafe.Line
	fmt.Fprintf(&b, "# Idempotency key %s of owner %s\n\n", code(kv.Key), code(m.Owner))
	fmt.Fprintf(&b, "**Verdict:** %s\n\n", escape(line(kv.Verdict)))
	b.WriteString("| | |\n|---|---|\n")
	row := func(name, value string) { fmt.Fprintf(&b, "| %s | %s |\n", name, value) }
	row("verdict kind", code(kv.VerdictKind))
	row("state", code(kv.State)+" — "+escape(line(kv.Next)))
	row("operation", code(kv.Operation))
	row("status", code(kv.Status))
	row("created", stamp(kv.CreatedAt))
	expires := stamp(kv.ExpiresAt)
	if kv.Expired {
		expires += " (expired)"
	}
	row("expires", expires)
	row("fingerprint", code(kv.Fingerprint))
	if l := kv.Latest.Record; l != nil {
		row("latest record", fmt.Sprintf("%s at revision %d", code(l.ID), l.Revision))
	}
	read := stamp(m.At)
	if m.Database != "" {
		read += " from " + code(m.Database)
	}
	row("read", read)
	if len(kv.Problems) > 0 {
		b.WriteString("\n## What is wrong\n\n")
		for _, p := range kv.Problems {
			fmt.Fprintf(&b, "- %s\n", escape(line(p)))
		}
	}
	b.WriteString("\n## Envelope (as stored)\n\n")
	if kv.Envelope == nil {
		b.WriteString("NULL: a PROCESSING row holds no result.\n")
	} else {
		fence(&b, "json", indent(kv.Envelope))
	}
	b.WriteString("\n## What a retry gets\n\n")
	if r := kv.Replay; r == nil {
		b.WriteString("No replay: the key expired, so the next request with it executes anew.\n")
	} else {
		var t strings.Builder
		t.WriteString(r.StatusLine() + "\n")
		for _, name := range r.HeaderNames() {
			t.WriteString(name + ": " + r.Headers[name] + "\n")
		}
		t.WriteString("\n" + indent([]byte(r.Body)))
		fence(&b, "http", t.String())
		fmt.Fprintf(&b, "The CLI prints the same body and exits %d.\n", r.ExitCode)
	}
	b.WriteString("\n## Rows of this key\n")
	for _, life := range kv.Lives {
		fmt.Fprintf(&b, "\n### %s\n\n", escape(line(life.Label)))
		var t strings.Builder
		for _, e := range life.Events {
			xid := ""
			if e.XID != nil {
				xid = " · transaction " + *e.XID
			}
			fmt.Fprintf(&t, "%s  %-9s %s%s\n", e.At.UTC().Format("2006-01-02 15:04:05.000000Z"), e.Kind, e.Summary(), xid)
		}
		if t.Len() == 0 {
			t.WriteString("(no rows)\n")
		}
		fence(&b, "text", t.String())
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// JSON writes kv as `idemwork key --json` prints it.
func JSON(w io.Writer, kv model.KeyView) error {
	b, err := json.MarshalIndent(kv, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Write writes kv in format (FormatMarkdown or FormatJSON).
func Write(w io.Writer, format string, kv model.KeyView, m Meta) error {
	switch format {
	case FormatMarkdown:
		return Markdown(w, kv, m)
	case FormatJSON:
		return JSON(w, kv)
	}
	return fmt.Errorf("ticket: unknown format %q", format)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000Z") }

// code is s as Markdown inline code, terminal-safe, with a fence longer than any run of
// backticks it holds.
func code(s string) string {
	s = termsafe.Line(s)
	if s == "" {
		return "(none)"
	}
	ticks := strings.Repeat("`", longestRun(s, '`')+1)
	pad := ""
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		pad = " "
	}
	return ticks + pad + strings.ReplaceAll(s, "|", `\|`) + pad + ticks
}

// escape makes a line of prose safe inside Markdown text and a table cell.
func escape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "|", `\|`, "<", `&lt;`, ">", `&gt;`, "[", `\[`, "]", `\]`)
	return r.Replace(s)
}

// fence writes text in a fenced block, every line terminal-safe, with a fence longer than any
// run of backticks inside.
func fence(b *strings.Builder, lang, text string) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	n := 2
	for i, l := range lines {
		lines[i] = termsafe.Line(l)
		n = max(n, longestRun(lines[i], '`'))
	}
	f := strings.Repeat("`", n+1)
	b.WriteString(f + lang + "\n" + strings.Join(lines, "\n") + "\n" + f + "\n")
}

func longestRun(s string, c byte) int {
	best, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}

// indent is JSON indented (its bytes as they are when it is not JSON).
func indent(raw []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}
