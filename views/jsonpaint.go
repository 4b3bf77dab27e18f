package views

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/internal/uictx"
)

// paint is a style reduced to the bytes it puts around text, measured once, so a 60 KB
// document is coloured with string writes instead of one lipgloss render per token.
type paint struct{ pre, post string }

func paintOf(st lipgloss.Style) paint {
	out := st.Render("\x00")
	pre, post, ok := strings.Cut(out, "\x00")
	if !ok {
		return paint{}
	}
	return paint{pre: pre, post: post}
}

func (p paint) write(b *strings.Builder, s string) {
	b.WriteString(p.pre)
	b.WriteString(s)
	b.WriteString(p.post)
}

// chunkCells cuts s (terminal-safe text, no escape sequences) into pieces of at most first
// cells, then rest cells each.
func chunkCells(s string, first, rest int) []string {
	var out []string
	limit := max(1, first)
	if ascii(s) {
		for len(s) > limit {
			out = append(out, s[:limit])
			s, limit = s[limit:], max(1, rest)
		}
		return append(out, s)
	}
	start, w := 0, 0
	for i := 0; i < len(s); {
		cluster, cw := ansi.FirstGraphemeCluster(s[i:], ansi.GraphemeWidth)
		if w+cw > limit && i > start {
			out = append(out, s[start:i])
			start, w, limit = i, 0, max(1, rest)
		}
		w += cw
		i += len(cluster)
	}
	return append(out, s[start:])
}

func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// jsonPainter renders JSON as indented, coloured, terminal-safe lines (keys sorted). Given a
// width, no line is wider: a long string value continues on the lines below it, cut by cells,
// so a 60 KB text is laid out once, by slicing, and never re-wrapped.
type jsonPainter struct {
	key, str, num, punct, null paint
	width                      int // 0: no limit
	col                        int // cells on the current line
}

func newJSONPainter(s uictx.Styles) jsonPainter {
	return jsonPainter{key: paintOf(s.JSONKey), str: paintOf(s.JSONString), num: paintOf(s.JSONNumber),
		punct: paintOf(s.JSONPunct), null: paintOf(s.Subtle)}
}

// decodeJSON reads any JSON value keeping numbers as written.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// linesFit paints raw as lines of at most width cells.
func (p jsonPainter) linesFit(raw []byte, width int) []string {
	p.width = width
	return p.lines(raw)
}

// lines paints raw as lines; raw that is not JSON is shown as terminal-safe text, line by line.
func (p jsonPainter) lines(raw []byte) []string {
	if len(bytes.TrimSpace(raw)) == 0 {
		var b strings.Builder
		p.null.write(&b, "null")
		return []string{b.String()}
	}
	v, err := decodeJSON(raw)
	if err != nil {
		parts := strings.Split(string(raw), "\n")
		for i, l := range parts {
			parts[i] = termsafe.Line(l)
		}
		return parts
	}
	var out []string
	var b strings.Builder
	p.col = 0
	p.value(&out, &b, v, 0)
	out = append(out, b.String())
	return out
}

func (p *jsonPainter) newline(out *[]string, b *strings.Builder, indent int) {
	*out = append(*out, b.String())
	b.Reset()
	for i := 0; i < indent; i++ {
		b.WriteString("  ")
	}
	p.col = 2 * indent
}

// put writes s (terminal-safe, no escapes) in paint st, continuing it on the lines below when it
// does not fit the width.
func (p *jsonPainter) put(out *[]string, b *strings.Builder, st paint, s string, indent int) {
	w := len(s)
	if !ascii(s) {
		w = ansi.StringWidth(s)
	}
	if p.width <= 0 || p.col+w <= p.width {
		st.write(b, s)
		p.col += w
		return
	}
	cont := 2*indent + 2
	if w <= p.width-cont && p.col > cont {
		// It fits a line of its own: continue there rather than cut it.
		p.newline(out, b, indent+1)
		st.write(b, s)
		p.col += w
		return
	}
	for i, c := range chunkCells(s, p.width-p.col, p.width-cont) {
		if i > 0 {
			p.newline(out, b, indent+1)
		}
		st.write(b, c)
		if ascii(c) {
			p.col += len(c)
		} else {
			p.col += ansi.StringWidth(c)
		}
	}
}

func (p *jsonPainter) value(out *[]string, b *strings.Builder, v any, indent int) {
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 {
			p.put(out, b, p.punct, "{}", indent)
			return
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		p.put(out, b, p.punct, "{", indent)
		for i, k := range keys {
			p.newline(out, b, indent+1)
			p.put(out, b, p.key, termsafe.Quote(k), indent+1)
			p.put(out, b, p.punct, ": ", indent+1)
			p.value(out, b, t[k], indent+1)
			if i < len(keys)-1 {
				p.put(out, b, p.punct, ",", indent+1)
			}
		}
		p.newline(out, b, indent)
		p.put(out, b, p.punct, "}", indent)
	case []any:
		if len(t) == 0 {
			p.put(out, b, p.punct, "[]", indent)
			return
		}
		p.put(out, b, p.punct, "[", indent)
		for i, e := range t {
			p.newline(out, b, indent+1)
			p.value(out, b, e, indent+1)
			if i < len(t)-1 {
				p.put(out, b, p.punct, ",", indent+1)
			}
		}
		p.newline(out, b, indent)
		p.put(out, b, p.punct, "]", indent)
	case string:
		p.put(out, b, p.str, termsafe.Quote(t), indent)
	case json.Number:
		p.put(out, b, p.num, termsafe.Line(t.String()), indent)
	case bool:
		if t {
			p.put(out, b, p.num, "true", indent)
		} else {
			p.put(out, b, p.num, "false", indent)
		}
	case nil:
		p.put(out, b, p.null, "null", indent)
	}
}

// indentJSON is raw indented for copying (as stored when it is not JSON).
func indentJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// compactJSON is raw on one line (as stored when it is not JSON).
func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
