package views

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	udiff "github.com/aymanbagabas/go-udiff"

	"github.com/idemwork/idemwork/internal/termsafe"
)

// Change kinds of a JSON diff.
const (
	Added   = '+'
	Removed = '-'
	Changed = '~'
)

// Change is one difference between two JSON documents, at a path.
type Change struct {
	Kind     byte
	Path     string
	Old, New string // compact JSON of the value ("" when absent)
	// Text is the edit of a long or multi-line string value: a unified diff of its lines, or its
	// character edits with context.
	Text []string
}

// pathSeg is one step of a path: an object member or an array index.
type pathSeg struct {
	key   string
	index int
	isIdx bool
}

type leaf struct {
	path []pathSeg
	val  any
}

// flatten lists a document's leaves (scalars, and empty objects and arrays) in document order
// with object members sorted.
func flatten(v any, path []pathSeg, out *[]leaf) {
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 {
			*out = append(*out, leaf{path: path, val: t})
			return
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			flatten(t[k], append(append([]pathSeg(nil), path...), pathSeg{key: k}), out)
		}
	case []any:
		if len(t) == 0 {
			*out = append(*out, leaf{path: path, val: t})
			return
		}
		for i, e := range t {
			flatten(e, append(append([]pathSeg(nil), path...), pathSeg{index: i, isIdx: true}), out)
		}
	default:
		*out = append(*out, leaf{path: path, val: v})
	}
}

func comparePaths(a, b []pathSeg) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		switch {
		case x.isIdx && y.isIdx:
			if x.index != y.index {
				return x.index - y.index
			}
		case x.isIdx != y.isIdx:
			if x.isIdx {
				return 1
			}
			return -1
		default:
			if c := strings.Compare(x.key, y.key); c != 0 {
				return c
			}
		}
	}
	return len(a) - len(b)
}

func isIdent(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func pathString(p []pathSeg) string {
	if len(p) == 0 {
		return "(the whole document)"
	}
	var b strings.Builder
	for i, s := range p {
		switch {
		case s.isIdx:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		case isIdent(s.key):
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.key)
		default:
			b.WriteString("[" + termsafe.Quote(s.key) + "]")
		}
	}
	return b.String()
}

// sameValue compares two leaves of decoded JSON (scalars, empty objects and arrays).
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && len(x) == 0 && len(y) == 0
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == 0 && len(y) == 0
	}
	return false
}

// valueString is a leaf as compact JSON for a diff line; a long string is shown by its start.
func valueString(v any) string {
	switch t := v.(type) {
	case string:
		if len(t) > 120 {
			return termsafe.Quote(t[:runeStart(t, 100)]) + fmt.Sprintf("… (%d bytes)", len(t))
		}
		return termsafe.Quote(t)
	case json.Number:
		return termsafe.Line(t.String())
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return termsafe.Line(string(b))
}

// long is a string whose change is better shown as an edit than as two values.
func long(s string) bool { return len(s) > 120 || strings.Contains(s, "\n") }

// JSONDiff compares two JSON documents path by path: the values added, removed and changed.
// Documents that are not JSON are compared as text, line by line.
func JSONDiff(before, after []byte) []Change {
	a, errA := decodeJSON(before)
	b, errB := decodeJSON(after)
	if errA != nil || errB != nil {
		if string(before) == string(after) {
			return nil
		}
		return []Change{{Kind: Changed, Path: "(not JSON: compared as text)", Text: textDiff(string(before), string(after))}}
	}
	var la, lb []leaf
	flatten(a, nil, &la)
	flatten(b, nil, &lb)
	var out []Change
	i, j := 0, 0
	for i < len(la) || j < len(lb) {
		var c int
		switch {
		case i == len(la):
			c = 1
		case j == len(lb):
			c = -1
		default:
			c = comparePaths(la[i].path, lb[j].path)
		}
		switch {
		case c < 0:
			out = append(out, Change{Kind: Removed, Path: pathString(la[i].path), Old: valueString(la[i].val)})
			i++
		case c > 0:
			out = append(out, Change{Kind: Added, Path: pathString(lb[j].path), New: valueString(lb[j].val)})
			j++
		default:
			if !sameValue(la[i].val, lb[j].val) {
				ch := Change{Kind: Changed, Path: pathString(la[i].path), Old: valueString(la[i].val), New: valueString(lb[j].val)}
				sa, okA := la[i].val.(string)
				sb, okB := lb[j].val.(string)
				if okA && okB && (long(sa) || long(sb)) {
					ch.Text = textDiff(sa, sb)
				}
				out = append(out, ch)
			}
			i++
			j++
		}
	}
	return out
}

// textDiff shows how one text became another: a unified diff of lines when they hold lines,
// else the character edits, each with some context. Every line is terminal-safe.
func textDiff(before, after string) []string {
	const maxEdits, ctx = 40, 24
	if strings.Contains(before, "\n") || strings.Contains(after, "\n") {
		u := udiff.Unified("before", "after", before, after)
		lines := strings.Split(strings.TrimRight(u, "\n"), "\n")
		if len(lines) > 2 {
			lines = lines[2:] // the file headers say nothing here
		}
		for i, l := range lines {
			lines[i] = termsafe.Line(l)
		}
		return lines
	}
	edits := udiff.Strings(before, after)
	var out []string
	for n, e := range edits {
		if n == maxEdits {
			out = append(out, fmt.Sprintf("… and %d more edits", len(edits)-maxEdits))
			break
		}
		lo, hi := max(0, e.Start-ctx), min(len(before), e.End+ctx)
		lo, hi = runeStart(before, lo), runeStart(before, hi)
		line := fmt.Sprintf("@%d: …%s[-%s-]{+%s+}%s…", e.Start, before[lo:e.Start], before[e.Start:e.End], e.New, before[e.End:hi])
		out = append(out, termsafe.Line(line))
	}
	return out
}

// runeStart moves i back to the start of the rune it falls in.
func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && s[i]&0xc0 == 0x80 {
		i--
	}
	return i
}
