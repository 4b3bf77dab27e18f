package views

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/internal/uictx"
)

// pageSize is how many rows one keyset page loads; the next page loads when the cursor nears
// the end, so an owner with a million events never loads more than they scroll through.
const pageSize = 100

// fetchFunc reads one keyset page of an owner's rows that match query ("" for all); reverse
// reads the same listing from its other end (the last row first), a cursor of such a page
// continuing the same way.
type fetchFunc[T any] func(ctx context.Context, owner, query, cursor string, reverse bool) ([]T, string, error)

// paged is a table fed by keyset pages, with request ids so stale pages are dropped. A search
// is a query the database answers (fetch gets it), never a filter over the loaded rows, so the
// rows on screen are always a contiguous run of the answer and the cursor's row is the row
// enter opens.
//
// The run is the top of the listing, read down page by page (next), or — after G on a list
// that can read from its other end (reversible) — its bottom, read from the last row up page by
// page (prev): the last row is one query away, however long the listing. The selection is an
// item, not a position: a reload, new rows above it, keep the same row selected (by id).
type paged[T any] struct {
	table Table
	rows  []T
	// next is the cursor of the rows below the run ("" none), prev of the rows above it ("" when
	// the run starts at the top).
	next, prev string
	req        int
	loading    bool
	err        string
	fetch      fetchFunc[T]
	// reversible says fetch can read from the other end (G reaches the last row in one page).
	reversible bool
	toRow      func(T) Row
	// id names a row, for the selection to follow it ("" never matches).
	id func(T) string
	// query is the active search ("" none); describe says what it matches, for the title.
	query    string
	describe func(q string) string
	// at is when the rows on screen were read (the first page's request, by the workbench
	// clock): the list does not refresh itself, so its title says it, and r reads again.
	at time.Time
	// keep is the row to select when the page asked for arrives ("" none), the table scrolled
	// as it was (keepOffset).
	keep       string
	keepOffset int
}

// pageMode is where a page goes.
type pageMode int

const (
	pageReplace pageMode = iota // the top of the listing, instead of the rows
	pageAppend                  // below the rows
	pagePrepend                 // above the rows (read from the other end)
	pageLast                    // the bottom of the listing, instead of the rows
)

// pageMsg carries one page back to Update. list is the paged list it belongs to (several
// lists of the same row type may coexist).
type pageMsg[T any] struct {
	list *paged[T]
	req  int
	rows []T
	next string
	mode pageMode
	at   time.Time
	err  error
}

// reload reads the rows again where they are (the top, or the bottom after G), keeping the
// selected row selected.
func (p *paged[T]) reload(ctx *uictx.ProgramContext) tea.Cmd {
	p.req++
	p.remember()
	if p.prev != "" {
		return p.load(ctx, "", pageLast)
	}
	return p.load(ctx, "", pageReplace)
}

// remember notes the selected row, to select it again when the next page replaces the rows.
func (p *paged[T]) remember() {
	p.keep, p.keepOffset = "", 0
	if r := p.selected(); r != nil && p.id != nil {
		p.keep, p.keepOffset = p.id(*r), p.table.Offset()
	}
}

// restart shows the first page for another owner or search: nothing of the rows before stays on
// screen, and the selection starts at the top.
func (p *paged[T]) restart(ctx *uictx.ProgramContext) tea.Cmd {
	p.rows, p.next, p.prev, p.err, p.keep = nil, "", "", "", ""
	p.table.SetRows(nil)
	p.table.Top()
	p.req++
	return p.load(ctx, "", pageReplace)
}

// search replaces the rows with the first page of the owner's rows matching q.
func (p *paged[T]) search(ctx *uictx.ProgramContext, q string) tea.Cmd {
	p.query = q
	return p.restart(ctx)
}

func (p *paged[T]) load(ctx *uictx.ProgramContext, cursor string, mode pageMode) tea.Cmd {
	req, owner, fetch, q, at := p.req, ctx.Owner, p.fetch, p.query, ctx.Now()
	reverse := mode == pagePrepend || mode == pageLast
	p.loading = true
	p.table.Empty = "loading…"
	return query(func(c context.Context) tea.Msg {
		rows, next, err := fetch(c, owner, q, cursor, reverse)
		return pageMsg[T]{list: p, req: req, rows: rows, next: next, mode: mode, at: at, err: err}
	})
}

// handle applies a page if it is this list's current request; it reports whether msg was one.
func (p *paged[T]) handle(msg tea.Msg) bool {
	m, ok := msg.(pageMsg[T])
	if !ok || m.list != p {
		return false
	}
	if m.req != p.req {
		return true // stale: a newer request superseded it
	}
	p.loading = false
	p.table.Empty = ""
	if m.err != nil {
		// What was read stays on screen, with the error and when it was read above it: a
		// stopped database empties nothing.
		p.err = errText(m.err)
		return true
	}
	p.err = ""
	switch m.mode {
	case pageAppend:
		p.next = m.next
		// Only the new page is converted: a deep scroll costs a page per page, not the whole list.
		p.rows = append(p.rows, m.rows...)
		p.table.AppendRows(p.rowsOf(m.rows))
		return true
	case pagePrepend:
		p.prev = m.next
		page := slices.Clone(m.rows)
		slices.Reverse(page)
		p.rows = append(page, p.rows...)
		p.table.PrependRows(p.rowsOf(page))
		return true
	case pageLast:
		page := slices.Clone(m.rows)
		slices.Reverse(page)
		p.rows, p.next, p.prev, p.at = page, "", m.next, m.at
		p.refill()
		if !p.reselect() {
			p.table.Bottom()
		}
		return true
	}
	p.rows, p.next, p.prev, p.at = m.rows, m.next, "", m.at
	p.refill()
	p.reselect()
	return true
}

// reselect selects the remembered row again, the table scrolled as it was (rows new above it in
// view when the top was), and reports whether it is still there.
func (p *paged[T]) reselect() bool {
	if p.keep == "" || p.id == nil {
		return false
	}
	defer func() { p.keep = "" }()
	for i, r := range p.rows {
		if p.id(r) == p.keep {
			return p.table.SelectRowFrom(i, p.keepOffset)
		}
	}
	return false
}

func (p *paged[T]) rowsOf(page []T) []Row {
	rows := make([]Row, len(page))
	for i, r := range page {
		rows[i] = p.toRow(r)
	}
	return rows
}

// refill rebuilds the table rows (e.g. after the clock moved), keeping the selected row.
func (p *paged[T]) refill() {
	p.table.SetRows(p.rowsOf(p.rows))
}

// more loads the page below when the cursor nears the end of what is loaded, or the page above
// when it nears the start of a run that does not begin at the top.
func (p *paged[T]) more(ctx *uictx.ProgramContext) tea.Cmd {
	switch {
	case p.loading:
	case p.next != "" && p.table.NearEnd():
		return p.load(ctx, p.next, pageAppend)
	case p.prev != "" && p.table.NearStart():
		return p.load(ctx, p.prev, pagePrepend)
	}
	return nil
}

// selected is the selected row, or nil.
func (p *paged[T]) selected() *T {
	i := p.table.Selected()
	if i < 0 || i >= len(p.rows) {
		return nil
	}
	return &p.rows[i]
}

// keyNav applies navigation keys and loads more when needed. G on a reversible list whose
// last row is not loaded reads the listing from its other end (one query); g on a run that
// does not start at the top reads the top again.
func (p *paged[T]) keyNav(ctx *uictx.ProgramContext, msg tea.KeyMsg, page int) (bool, tea.Cmd) {
	k := ctx.Keys.List
	switch {
	case key.Matches(msg, k.Bottom) && p.reversible && p.next != "":
		p.req++
		p.keep = ""
		return true, p.load(ctx, "", pageLast)
	case key.Matches(msg, k.Top) && p.prev != "":
		p.req++
		p.keep, p.prev = "", ""
		p.table.Top()
		return true, p.load(ctx, "", pageReplace)
	}
	if moveTable(k, &p.table, msg, page) {
		return true, p.more(ctx)
	}
	return false, nil
}

// mouse applies the wheel and clicks (y relative to the table's header line).
func (p *paged[T]) mouse(ctx *uictx.ProgramContext, msg tea.MouseMsg, y int) tea.Cmd {
	wheelTable(&p.table, msg, y)
	return p.more(ctx)
}

// heading is the line above a list, w cells wide: its title and summary, or what failed and
// what is shown instead, wrapped over two lines (the table gives up its last line).
func (p *paged[T]) heading(ctx *uictx.ProgramContext, normal string, w int) string {
	s := ctx.Styles
	if p.err == "" {
		return termsafe.Cut(normal, w)
	}
	text := "✗ " + p.err
	if len(p.rows) > 0 {
		text += " · rows " + asOf(p.at)
	}
	return strings.Join(wrapLines(s.Danger, text, w, 2), "\n")
}

// summary is "N loaded · more below · as of 15:04:05", or for a search how many match and
// what, as of when; after G, "the last N · more above".
func (p *paged[T]) summary() string {
	n := strconv.Itoa(len(p.rows))
	after := ""
	if !p.at.IsZero() {
		after = " · " + asOf(p.at)
	}
	if p.query != "" {
		// The count leads, so a narrow screen cuts the description, not the answer.
		what := "search " + termsafe.Quote(p.query)
		if p.describe != nil {
			what = p.describe(p.query)
		}
		switch {
		case p.loading && len(p.rows) == 0:
			return "searching: " + what + "…"
		case p.prev != "":
			return "the last " + n + " matches (more above; g: the first): " + what + after
		case p.next != "":
			return n + " matches so far (more below): " + what + after
		case len(p.rows) == 1:
			return "1 match: " + what + after
		}
		return n + " matches: " + what + after
	}
	if p.prev != "" {
		return "the last " + n + " · more above (g: the top)" + after
	}
	s := n + " loaded"
	if p.next != "" {
		s += " · more below"
		if p.reversible {
			s += " (G: the last)"
		}
	}
	return s + after
}

// asOf says when what is shown was read: "as of 15:04:05", by the workbench clock (the
// header's), for views that do not refresh themselves (r reads again).
func asOf(t time.Time) string { return "as of " + t.Local().Format("15:04:05") }
