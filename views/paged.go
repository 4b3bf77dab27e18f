package views

import (
	"context"
	"strconv"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/tui/shared"
)

// pageSize is how many rows one keyset page loads; the next page loads when the cursor nears
// the end, so an owner with a million events never loads more than they scroll through.
const pageSize = 100

// fetchFunc reads one keyset page of an owner's rows that match query ("" for all).
type fetchFunc[T any] func(ctx context.Context, owner, query, cursor string) ([]T, string, error)

// paged is a table fed by keyset pages, with request ids so stale pages are dropped. A search
// is a query the database answers (fetch gets it), never a filter over the loaded rows, so the
// rows on screen are always a prefix of the answer and the cursor's row is the row enter opens.
type paged[T any] struct {
	table   Table
	rows    []T
	next    string
	req     int
	loading bool
	err     string
	fetch   fetchFunc[T]
	toRow   func(T) Row
	// query is the active search ("" none); describe says what it matches, for the title.
	query    string
	describe func(q string) string
	// at is when the rows on screen were read (the first page's request, by the workbench
	// clock): the list does not refresh itself, so its title says it, and r reads again.
	at time.Time
}

// pageMsg carries one page back to Update. owner is the paged list it belongs to (several
// lists of the same row type may coexist).
type pageMsg[T any] struct {
	list   *paged[T]
	req    int
	rows   []T
	next   string
	append bool
	at     time.Time
	err    error
}

func (p *paged[T]) reload(ctx *shared.ProgramContext) tea.Cmd {
	p.req++
	return p.load(ctx, "", false)
}

// search replaces the rows with the first page of the owner's rows matching q.
func (p *paged[T]) search(ctx *shared.ProgramContext, q string) tea.Cmd {
	p.query = q
	p.rows, p.next = nil, ""
	p.table.SetRows(nil)
	p.table.Top()
	return p.reload(ctx)
}

func (p *paged[T]) load(ctx *shared.ProgramContext, cursor string, appendPage bool) tea.Cmd {
	req, owner, fetch, q, at := p.req, ctx.Owner, p.fetch, p.query, ctx.Now()
	p.loading = true
	return query(func(c context.Context) tea.Msg {
		rows, next, err := fetch(c, owner, q, cursor)
		return pageMsg[T]{list: p, req: req, rows: rows, next: next, append: appendPage, at: at, err: err}
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
	if m.err != nil {
		p.err = errText(m.err)
		if !m.append {
			p.rows, p.next = nil, ""
			p.refill()
		}
		return true
	}
	p.err = ""
	p.next = m.next
	if m.append {
		// Only the new page is converted: a deep scroll costs a page per page, not the whole list.
		p.rows = append(p.rows, m.rows...)
		rows := make([]Row, len(m.rows))
		for i, r := range m.rows {
			rows[i] = p.toRow(r)
		}
		p.table.AppendRows(rows)
		return true
	}
	p.rows, p.at = m.rows, m.at
	p.refill()
	return true
}

// refill rebuilds the table rows (e.g. after the clock moved).
func (p *paged[T]) refill() {
	rows := make([]Row, len(p.rows))
	for i, r := range p.rows {
		rows[i] = p.toRow(r)
	}
	p.table.SetRows(rows)
}

// more loads the next page when the cursor nears the end of what is loaded.
func (p *paged[T]) more(ctx *shared.ProgramContext) tea.Cmd {
	if p.next != "" && !p.loading && p.table.NearEnd() {
		return p.load(ctx, p.next, true)
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

// keyNav applies navigation keys and loads more when needed.
func (p *paged[T]) keyNav(ctx *shared.ProgramContext, msg tea.KeyMsg, page int) (bool, tea.Cmd) {
	if moveTable(ctx.Keys.List, &p.table, msg, page) {
		return true, p.more(ctx)
	}
	return false, nil
}

// mouse applies the wheel and clicks (y relative to the table's header line).
func (p *paged[T]) mouse(ctx *shared.ProgramContext, msg tea.MouseMsg, y int) tea.Cmd {
	wheelTable(&p.table, msg, y)
	return p.more(ctx)
}

// summary is "N loaded · more below · as of 15:04:05", or for a search how many match and
// what, as of when.
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
		case p.next != "":
			return n + " matches so far (more below): " + what + after
		case len(p.rows) == 1:
			return "1 match: " + what + after
		}
		return n + " matches: " + what + after
	}
	s := n + " loaded"
	if p.next != "" {
		s += " · more below"
	}
	return s + after
}

// asOf says when what is shown was read: "as of 15:04:05", by the workbench clock (the
// header's), for views that do not refresh themselves (r reads again).
func asOf(t time.Time) string { return "as of " + t.Local().Format("15:04:05") }
