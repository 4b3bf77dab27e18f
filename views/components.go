package views

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/internal/uictx"
)

// Column is a table column; Width 0 takes the remaining space (at least Min).
type Column struct {
	Title string
	Width int
	Min   int
	// Tail cuts a long cell from the left, keeping its end (an operation's ":patch").
	Tail bool
	// Optional columns are left out, last first, when the table is too narrow for every column
	// at its width: better a column missing than every column cut to nothing.
	Optional bool
	// Fit sizes the column to its widest loaded cell (at least Min): it is what the rows are
	// read by (a key), so where the table is too narrow the other columns yield first, each
	// down to its Min (4 without one), and only then is it cut (with "…").
	Fit bool
}

// Row is one table row; Style (optional) colours it, e.g. BLOCKED executions.
type Row struct {
	Cells []string
	Style *lipgloss.Style
}

// cursorMark marks the selected row in the table's gutter: visible without colour (NO_COLOR)
// and in plain-text captures.
const (
	cursorMark = "> "
	noMark     = "  "
	gutter     = 2
)

// Table is a scrolling table with a cursor. Cells are stored terminal-safe (one line each,
// controls shown, never obeyed) and laid out once per row and width, so drawing a frame costs
// the visible rows only.
type Table struct {
	Columns []Column
	// NoCursor draws no cursor mark (a list that is only read).
	NoCursor bool
	// Empty is what an empty table says ("" is "(nothing here)"): "loading…" while its first
	// page is read.
	Empty   string
	rows    []Row
	visible []int // indexes into rows after filtering
	Cursor  int   // index into visible
	offset  int
	width   int
	height  int
	filter  string
	text    []string // laid-out row text by row index, "" until drawn at the current widths
	w       []int
	fitW    []int // by column: the widest loaded cell of a Fit column
}

// SetRows replaces the rows, keeping the cursor in range.
func (t *Table) SetRows(rows []Row) {
	for i := range rows {
		for j, c := range rows[i].Cells {
			rows[i].Cells[j] = termsafe.Line(c)
		}
	}
	t.rows = rows
	t.text = make([]string, len(rows))
	t.fitW = nil
	t.measure(rows)
	t.applyFilter()
}

// measure widens the Fit columns to rows' cells; a wider column lays every row out again.
func (t *Table) measure(rows []Row) {
	if t.fitW == nil {
		t.fitW = make([]int, len(t.Columns))
		t.w = nil
	}
	for j, c := range t.Columns {
		if !c.Fit {
			continue
		}
		widest := t.fitW[j]
		for _, r := range rows {
			if j < len(r.Cells) {
				widest = max(widest, ansi.StringWidth(r.Cells[j]))
			}
		}
		if widest != t.fitW[j] {
			t.fitW[j] = widest
			t.w = nil
			clear(t.text)
		}
	}
}

// AppendRows adds rows after the loaded ones (the next keyset page): only the new rows are made
// safe and laid out.
func (t *Table) AppendRows(rows []Row) {
	for i := range rows {
		for j, c := range rows[i].Cells {
			rows[i].Cells[j] = termsafe.Line(c)
		}
	}
	first := len(t.rows)
	t.rows = append(t.rows, rows...)
	t.text = append(t.text, make([]string, len(rows))...)
	t.measure(rows)
	for i := first; i < len(t.rows); i++ {
		if t.filter == "" || strings.Contains(strings.ToLower(strings.Join(t.rows[i].Cells, " ")), t.filter) {
			t.visible = append(t.visible, i)
		}
	}
	t.clampOffset()
}

// PrependRows adds rows above the loaded ones (a page read from the other end): the selected row
// stays selected, on the same screen line.
func (t *Table) PrependRows(rows []Row) {
	for i := range rows {
		for j, c := range rows[i].Cells {
			rows[i].Cells[j] = termsafe.Line(c)
		}
	}
	sel, line := t.Selected(), t.Cursor-t.offset
	t.rows = append(slices.Clone(rows), t.rows...)
	t.text = append(make([]string, len(rows)), t.text...)
	t.measure(rows)
	t.applyFilter()
	if sel >= 0 {
		t.SelectRow(sel+len(rows), line)
	}
}

// SelectRow puts the cursor on row i (an index into the unfiltered rows) at screen line line
// where the rows allow; it reports whether the row is shown (a filter may hide it).
func (t *Table) SelectRow(i, line int) bool {
	pos := slices.Index(t.visible, i)
	if pos < 0 {
		return false
	}
	t.Cursor = pos
	t.offset = pos - max(0, line)
	t.clampOffset()
	return true
}

// SelectRowFrom puts the cursor on row i with the table scrolled to offset where the cursor
// stays visible (new rows above it come into view, as a list's own new rows should); it reports
// whether the row is shown.
func (t *Table) SelectRowFrom(i, offset int) bool {
	pos := slices.Index(t.visible, i)
	if pos < 0 {
		return false
	}
	t.Cursor, t.offset = pos, max(0, offset)
	t.clampOffset()
	return true
}

// SetFilter keeps the loaded rows containing s (case-insensitive) in any cell. Views whose rows
// are stored data search the database instead (Searcher); this is for live lists.
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
	if w != t.width {
		t.text = make([]string, len(t.rows))
		t.w = nil
	}
	t.width, t.height = w, h
	t.clampOffset()
}

// BodyHeight is how many rows fit below the header.
func (t *Table) BodyHeight() int { return t.bodyHeight() }

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

// NearStart reports whether the cursor is within a screen of the first loaded row (time to load
// the page above a run read from the other end).
func (t *Table) NearStart() bool { return t.Cursor < t.bodyHeight() }

// Offset is the first visible row (for tests and scroll positions).
func (t *Table) Offset() int { return t.offset }

func (t *Table) clampOffset() {
	h := t.bodyHeight()
	if t.Cursor < t.offset {
		t.offset = t.Cursor
	}
	if t.Cursor >= t.offset+h {
		t.offset = t.Cursor - h + 1
	}
	if max := len(t.visible) - h; t.offset > max {
		t.offset = max
	}
	if t.offset < 0 {
		t.offset = 0
	}
}

func (t *Table) widths() []int {
	if t.w != nil {
		return t.w
	}
	avail := t.width - gutter
	w := make([]int, len(t.Columns))
	fixed := func(c Column) bool { return c.Width != 0 || c.Fit }
	need := func() int {
		n := 0
		for i, c := range t.Columns {
			if w[i] < 0 {
				continue
			}
			if !fixed(c) {
				n += c.Min + 1
			} else {
				n += w[i] + 1
			}
		}
		return n
	}
	for i, c := range t.Columns {
		w[i] = c.Width
		if c.Fit {
			w[i] = max(c.Min, ansi.StringWidth(c.Title), 1)
			if t.fitW != nil {
				w[i] = max(w[i], t.fitW[i])
			}
		}
	}
	// Too narrow: leave out optional columns (last first), then shrink the widest fixed columns
	// one cell at a time (cells truncate with an ellipsis) rather than let a row overflow: the
	// others down to their floor first, a Fit column only after them.
	for i := len(t.Columns) - 1; i >= 0 && need() > avail; i-- {
		if t.Columns[i].Optional {
			w[i] = -1
		}
	}
	floor := func(c Column) int {
		if c.Min > 0 {
			return c.Min
		}
		return 4
	}
	for need() > avail {
		widest := -1
		for _, fits := range []bool{false, true} {
			for i, c := range t.Columns {
				if fixed(c) && c.Fit == fits && w[i] > floor(c) && (widest < 0 || w[i] > w[widest]) {
					widest = i
				}
			}
			if widest >= 0 {
				break
			}
		}
		if widest < 0 {
			break
		}
		w[widest]--
	}
	for i, c := range t.Columns {
		if !fixed(c) {
			w[i] = max(c.Min, avail-need()+c.Min)
		}
	}
	t.w = w
	return w
}

// rowText lays out row i at the current widths (once; the result is kept).
func (t *Table) rowText(i int) string {
	if t.text[i] != "" {
		return t.text[i]
	}
	w := t.widths()
	r := t.rows[i]
	var b strings.Builder
	for j := range t.Columns {
		if w[j] < 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		v := ""
		if j < len(r.Cells) {
			v = r.Cells[j]
		}
		if t.Columns[j].Tail {
			v = cutLeft(v, w[j])
		}
		// The cell as termsafe.Cell draws it (fuzzed: nothing leaves its cell).
		b.WriteString(termsafe.Cell(v, w[j]))
	}
	t.text[i] = termsafe.Pad(b.String(), t.width-gutter)
	return t.text[i]
}

// View renders the table into exactly its height; each line is exactly its width. The selected
// row carries the cursor mark; focused, it is also drawn in reverse video or the selection
// colour.
func (t *Table) View(s uictx.Styles, focused bool) string {
	w := t.widths()
	var b strings.Builder
	cells := make([]string, 0, len(t.Columns))
	for i, c := range t.Columns {
		if w[i] >= 0 {
			cells = append(cells, termsafe.Pad(c.Title, w[i]))
		}
	}
	b.WriteString(s.TableHeader.Render(termsafe.Pad(noMark+strings.Join(cells, " "), t.width)))
	h := t.bodyHeight()
	for line := 0; line < h; line++ {
		b.WriteByte('\n')
		i := t.offset + line
		if i >= len(t.visible) {
			if len(t.visible) == 0 && line == 0 {
				empty := t.Empty
				if empty == "" {
					empty = "(nothing here)"
				}
				b.WriteString(s.Subtle.Render(termsafe.Pad("  "+empty, t.width)))
			} else {
				b.WriteString(strings.Repeat(" ", t.width))
			}
			continue
		}
		ri := t.visible[i]
		r := t.rows[ri]
		text := t.rowText(ri)
		switch {
		case i == t.Cursor && !t.NoCursor && focused:
			b.WriteString(s.RowSelected.Render(cursorMark + text))
		case i == t.Cursor && !t.NoCursor:
			b.WriteString(s.Bold.Render(cursorMark + text))
		case r.Style != nil:
			b.WriteString(r.Style.Render(noMark + text))
		default:
			b.WriteString(s.Row.Render(noMark + text))
		}
	}
	return b.String()
}

// cutLeft truncates s to at most w cells from the left, keeping its end.
func cutLeft(s string, w int) string {
	n := ansi.StringWidth(s)
	if w <= 0 || n <= w {
		return s
	}
	return ansi.TruncateLeft(s, n-w+1, "…")
}

// safe is a stored string as one terminal-safe line: every stored string passes through it (or
// through a Table, which applies it to every cell) before it reaches the screen.
func safe(s string) string { return termsafe.Line(s) }

// fitBlock clips every line of s to w cells and the block to h lines, padding to exactly h.
func fitBlock(s string, w, h int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > h {
		lines = lines[:h]
	}
	for i, l := range lines {
		lines[i] = termsafe.Cut(l, w)
	}
	for len(lines) < h {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n")
}

// joinH places blocks side by side.
func joinH(blocks ...string) string { return lipgloss.JoinHorizontal(lipgloss.Top, blocks...) }

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
