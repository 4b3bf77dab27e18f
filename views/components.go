package views

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	tctx "idemwork/tui/context"
)

// Column is a table column; Width 0 takes the remaining space (at least Min).
type Column struct {
	Title string
	Width int
	Min   int
}

// Row is one table row; Style (optional) colours it, e.g. BLOCKED executions.
type Row struct {
	Cells []string
	Style *lipgloss.Style
}

// Table is a scrolling table with a cursor and a client-side filter over loaded rows.
type Table struct {
	Columns []Column
	rows    []Row
	visible []int // indexes into rows after filtering
	Cursor  int   // index into visible
	offset  int
	width   int
	height  int
	filter  string
}

// SetRows replaces the rows, keeping the cursor in range.
func (t *Table) SetRows(rows []Row) {
	t.rows = rows
	t.applyFilter()
}

// SetFilter keeps the rows containing s (case-insensitive) in any cell.
func (t *Table) SetFilter(s string) {
	t.filter = strings.ToLower(s)
	t.applyFilter()
}

// Filter is the current filter.
func (t *Table) Filter() string { return t.filter }

func (t *Table) applyFilter() {
	t.visible = t.visible[:0]
	for i, r := range t.rows {
		if t.filter == "" || strings.Contains(strings.ToLower(strings.Join(r.Cells, " ")), t.filter) {
			t.visible = append(t.visible, i)
		}
	}
	if t.Cursor >= len(t.visible) {
		t.Cursor = len(t.visible) - 1
	}
	if t.Cursor < 0 {
		t.Cursor = 0
	}
	t.clampOffset()
}

// Selected returns the index of the selected row in the unfiltered rows, or -1.
func (t *Table) Selected() int {
	if t.Cursor < 0 || t.Cursor >= len(t.visible) {
		return -1
	}
	return t.visible[t.Cursor]
}

// Len is the number of visible rows.
func (t *Table) Len() int { return len(t.visible) }

// SetSize sets the drawing area (height includes the header line).
func (t *Table) SetSize(w, h int) {
	t.width, t.height = w, h
	t.clampOffset()
}

func (t *Table) bodyHeight() int {
	if t.height < 2 {
		return 1
	}
	return t.height - 1
}

// Move moves the cursor by d rows.
func (t *Table) Move(d int) {
	t.Cursor += d
	if t.Cursor >= len(t.visible) {
		t.Cursor = len(t.visible) - 1
	}
	if t.Cursor < 0 {
		t.Cursor = 0
	}
	t.clampOffset()
}

// Top and Bottom jump to the ends.
func (t *Table) Top()    { t.Cursor = 0; t.clampOffset() }
func (t *Table) Bottom() { t.Cursor = len(t.visible) - 1; t.Move(0) }

// Click selects the row at screen line y (0 is the header).
func (t *Table) Click(y int) bool {
	if y < 1 {
		return false
	}
	i := t.offset + y - 1
	if i >= len(t.visible) {
		return false
	}
	t.Cursor = i
	return true
}

// NearEnd reports whether the cursor is within a screen of the last loaded row (time to load
// the next keyset page).
func (t *Table) NearEnd() bool { return t.Cursor >= len(t.visible)-t.bodyHeight() }

func (t *Table) clampOffset() {
	h := t.bodyHeight()
	if t.Cursor < t.offset {
		t.offset = t.Cursor
	}
	if t.Cursor >= t.offset+h {
		t.offset = t.Cursor - h + 1
	}
	if t.offset < 0 {
		t.offset = 0
	}
}

func (t *Table) widths() []int {
	w := make([]int, len(t.Columns))
	fixed, flex := 0, -1
	for i, c := range t.Columns {
		if c.Width == 0 {
			flex = i
			continue
		}
		w[i] = c.Width
		fixed += c.Width + 1
	}
	flexMin := 0
	if flex >= 0 {
		flexMin = t.Columns[flex].Min + 1
	}
	// Too narrow: shrink the widest fixed columns one cell at a time (cells truncate with an
	// ellipsis) rather than letting the row overflow the screen.
	for over := fixed + flexMin - t.width; over > 0; over-- {
		widest := -1
		for i, c := range t.Columns {
			if c.Width != 0 && w[i] > 4 && (widest < 0 || w[i] > w[widest]) {
				widest = i
			}
		}
		if widest < 0 {
			break
		}
		w[widest]--
		fixed--
	}
	if flex >= 0 {
		w[flex] = t.width - fixed - 1
		if w[flex] < t.Columns[flex].Min {
			w[flex] = t.Columns[flex].Min
		}
	}
	return w
}

// View renders the table into exactly its height.
func (t *Table) View(s tctx.Styles, focused bool) string {
	w := t.widths()
	var b strings.Builder
	cells := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		cells[i] = pad(c.Title, w[i])
	}
	b.WriteString(s.TableHeader.Render(cut(strings.Join(cells, " "), t.width)))
	h := t.bodyHeight()
	for line := 0; line < h; line++ {
		b.WriteByte('\n')
		i := t.offset + line
		if i >= len(t.visible) {
			if len(t.visible) == 0 && line == 0 {
				b.WriteString(s.Subtle.Render(pad("  (nothing here)", t.width)))
			}
			continue
		}
		r := t.rows[t.visible[i]]
		for j := range t.Columns {
			v := ""
			if j < len(r.Cells) {
				v = r.Cells[j]
			}
			cells[j] = pad(v, w[j])
		}
		text := cut(strings.Join(cells, " "), t.width)
		switch {
		case i == t.Cursor && focused:
			b.WriteString(s.RowSelected.Render(pad(text, t.width)))
		case i == t.Cursor:
			b.WriteString(s.Bold.Render(pad(text, t.width)))
		case r.Style != nil:
			b.WriteString(r.Style.Render(text))
		default:
			b.WriteString(s.Row.Render(text))
		}
	}
	return b.String()
}

// pad fits s into exactly w cells (truncating with an ellipsis).
func pad(s string, w int) string {
	if w <= 0 {
		return ""
	}
	s = cut(s, w)
	if n := ansi.StringWidth(s); n < w {
		s += strings.Repeat(" ", w-n)
	}
	return s
}

// cut truncates s to at most w cells.
func cut(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) <= w {
		return s
	}
	return ansi.Truncate(s, w, "…")
}

// fitBlock clips every line of s to w cells and the block to h lines, padding to exactly h.
func fitBlock(s string, w, h int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		lines[i] = cut(l, w)
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

// pane draws a titled box of exactly w×h cells.
func pane(s tctx.Styles, title, body string, w, h int, focused bool) string {
	st := s.Pane
	if focused {
		st = s.PaneFocused
	}
	innerW, innerH := w-4, h-2
	if innerW < 1 || innerH < 1 {
		return ""
	}
	content := s.PaneTitle.Render(cut(title, innerW))
	if innerH > 1 {
		content += "\n" + fitBlock(body, innerW, innerH-1)
	}
	return st.Width(w - 2).Height(innerH).Render(content)
}

// columns lays panes out side by side, splitting w evenly.
func columns(s tctx.Styles, w, h int, titles []string, bodies []string, focus int) string {
	n := len(titles)
	var parts []string
	left := w
	for i := 0; i < n; i++ {
		cw := left / (n - i)
		left -= cw
		parts = append(parts, pane(s, titles[i], bodies[i], cw, h, i == focus))
	}
	return lipgloss.JoinHorizontal(lipgloss.Top, parts...)
}

// joinH places blocks side by side.
func joinH(blocks ...string) string { return lipgloss.JoinHorizontal(lipgloss.Top, blocks...) }

// prettyJSON renders JSON indented with sorted keys and colours.
func prettyJSON(s tctx.Styles, raw []byte) string {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return s.Subtle.Render("null")
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	var b strings.Builder
	writeJSONValue(&b, s, v, 0)
	return b.String()
}

func writeJSONValue(b *strings.Builder, s tctx.Styles, v any, indent int) {
	ind := strings.Repeat("  ", indent)
	switch t := v.(type) {
	case map[string]any:
		if len(t) == 0 {
			b.WriteString(s.JSONPunct.Render("{}"))
			return
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteString(s.JSONPunct.Render("{"))
		for i, k := range keys {
			b.WriteString("\n" + ind + "  " + s.JSONKey.Render(fmt.Sprintf("%q", k)) + s.JSONPunct.Render(": "))
			writeJSONValue(b, s, t[k], indent+1)
			if i < len(keys)-1 {
				b.WriteString(s.JSONPunct.Render(","))
			}
		}
		b.WriteString("\n" + ind + s.JSONPunct.Render("}"))
	case []any:
		if len(t) == 0 {
			b.WriteString(s.JSONPunct.Render("[]"))
			return
		}
		b.WriteString(s.JSONPunct.Render("["))
		for i, e := range t {
			b.WriteString("\n" + ind + "  ")
			writeJSONValue(b, s, e, indent+1)
			if i < len(t)-1 {
				b.WriteString(s.JSONPunct.Render(","))
			}
		}
		b.WriteString("\n" + ind + s.JSONPunct.Render("]"))
	case string:
		b.WriteString(s.JSONString.Render(fmt.Sprintf("%q", t)))
	case json.Number:
		b.WriteString(s.JSONNumber.Render(t.String()))
	case bool:
		b.WriteString(s.JSONNumber.Render(fmt.Sprint(t)))
	case nil:
		b.WriteString(s.Subtle.Render("null"))
	default:
		b.WriteString(fmt.Sprint(t))
	}
}

// sparkline draws values as block characters, scaled to their max, in at most w cells.
func sparkline(values []float64, w int) string {
	if len(values) == 0 || w <= 0 {
		return ""
	}
	if len(values) > w {
		// Bucket by averaging so the whole storm fits.
		buckets := make([]float64, w)
		counts := make([]int, w)
		for i, v := range values {
			j := i * w / len(values)
			buckets[j] += v
			counts[j]++
		}
		for j := range buckets {
			if counts[j] > 0 {
				buckets[j] /= float64(counts[j])
			}
		}
		values = buckets
	}
	max := 0.0
	for _, v := range values {
		if v > max {
			max = v
		}
	}
	bars := []rune("▁▂▃▄▅▆▇█")
	var b strings.Builder
	for _, v := range values {
		i := 0
		if max > 0 {
			i = int(v / max * float64(len(bars)-1))
		}
		b.WriteRune(bars[i])
	}
	return b.String()
}

// ago renders a time relative to now, compactly.
func ago(now, t time.Time) string {
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	var s string
	switch {
	case d < time.Second:
		s = "now"
		return s
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		s = fmt.Sprintf("%dd", int(d.Hours()/24))
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

func stamp(t time.Time) string { return t.Local().Format("01-02 15:04:05") }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(p *int) string {
	if p == nil {
		return ""
	}
	return fmt.Sprint(*p)
}

// shortID keeps the distinctive tail of a ULID for narrow columns.
func shortID(id string, w int) string {
	if len(id) <= w {
		return id
	}
	return "…" + id[len(id)-w+1:]
}
