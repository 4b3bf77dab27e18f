package views

import (
	gocontext "context"
	"strconv"

	tea "github.com/charmbracelet/bubbletea"

	"idemwork/store"
	tctx "idemwork/tui/context"
)

// pageSize is how many rows one keyset page loads; the next page loads when the cursor nears
// the end, so an owner with a million events never loads more than they scroll through.
const pageSize = 100

// fetchFunc reads one keyset page of an owner.
type fetchFunc[T any] func(ctx gocontext.Context, db *store.DB, owner, cursor string) ([]T, string, error)

// paged is a table fed by keyset pages, with request ids so stale pages are dropped.
type paged[T any] struct {
	table   Table
	rows    []T
	next    string
	req     int
	loading bool
	err     string
	fetch   fetchFunc[T]
	toRow   func(T) Row
}

// pageMsg carries one page back to Update. owner is the paged list it belongs to (several
// lists of the same row type may coexist).
type pageMsg[T any] struct {
	list   *paged[T]
	req    int
	rows   []T
	next   string
	append bool
	err    error
}

func (p *paged[T]) reload(ctx *tctx.ProgramContext) tea.Cmd {
	p.req++
	return p.load(ctx, "", false)
}

func (p *paged[T]) load(ctx *tctx.ProgramContext, cursor string, appendPage bool) tea.Cmd {
	req, db, owner, fetch := p.req, ctx.DB, ctx.Owner, p.fetch
	p.loading = true
	return query(func(c gocontext.Context) tea.Msg {
		rows, next, err := fetch(c, db, owner, cursor)
		return pageMsg[T]{list: p, req: req, rows: rows, next: next, append: appendPage, err: err}
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
		return true
	}
	p.err = ""
	if m.append {
		p.rows = append(p.rows, m.rows...)
	} else {
		p.rows = m.rows
	}
	p.next = m.next
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
func (p *paged[T]) more(ctx *tctx.ProgramContext) tea.Cmd {
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
func (p *paged[T]) keyNav(ctx *tctx.ProgramContext, msg tea.KeyMsg, page int) (bool, tea.Cmd) {
	if moveTable(&p.table, msg, page) {
		return true, p.more(ctx)
	}
	return false, nil
}

// mouse applies the wheel and clicks (y relative to the table's header line).
func (p *paged[T]) mouse(ctx *tctx.ProgramContext, msg tea.MouseMsg, y int) tea.Cmd {
	wheelTable(&p.table, msg, y)
	return p.more(ctx)
}

// summary is "N loaded · more below".
func (p *paged[T]) summary() string {
	s := strconv.Itoa(len(p.rows)) + " loaded"
	if p.next != "" {
		s += " · more below"
	}
	return s
}
