package views

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/charmbracelet/lipgloss"

	"idemwork/internal/termsafe"
	tctx "idemwork/tui/context"
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

// jsonPainter renders JSON as indented, coloured, terminal-safe lines (keys sorted).
type jsonPainter struct {
	key, str, num, punct, null paint
}

func newJSONPainter(s tctx.Styles) jsonPainter {
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
	p.value(&out, &b, v, 0)
	out = append(out, b.String())
	return out
}

func (p jsonPainter) newline(out *[]string, b *strings.Builder, indent int) {
	*out = append(*out, b.String())
	b.Reset()
	for i := 0; i < indent; i++ {
		b.WriteString("  ")
	}
}

func (p jsonPainter) value(out *[]string, b *strings.Builder, v any, indent int) {
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 {
			p.punct.write(b, "{}")
			return
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		p.punct.write(b, "{")
		for i, k := range keys {
			p.newline(out, b, indent+1)
			p.key.write(b, termsafe.Quote(k))
			p.punct.write(b, ": ")
			p.value(out, b, t[k], indent+1)
			if i < len(keys)-1 {
				p.punct.write(b, ",")
			}
		}
		p.newline(out, b, indent)
		p.punct.write(b, "}")
	case []any:
		if len(t) == 0 {
			p.punct.write(b, "[]")
			return
		}
		p.punct.write(b, "[")
		for i, e := range t {
			p.newline(out, b, indent+1)
			p.value(out, b, e, indent+1)
			if i < len(t)-1 {
				p.punct.write(b, ",")
			}
		}
		p.newline(out, b, indent)
		p.punct.write(b, "]")
	case string:
		p.str.write(b, termsafe.Quote(t))
	case json.Number:
		p.num.write(b, termsafe.Line(t.String()))
	case bool:
		if t {
			p.num.write(b, "true")
		} else {
			p.num.write(b, "false")
		}
	case nil:
		p.null.write(b, "null")
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
