package views

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/internal/uictx"
)

// scrollPane is a titled, bordered pane of exactly its size whose content scrolls (a
// bubbles/viewport), with the scroll position in its title. Content is laid out — wrapped to the
// pane's width — when it is set or the pane resized, in Update; a frame draws only the visible
// lines, so its cost does not grow with the content (a 60 KB payload draws as fast as a small
// one).
type scrollPane struct {
	title string
	src   []string // painted lines, unwrapped
	doc   *jsonDoc // or a JSON document, painted for the width
	raw   string   // what `y` copies
	vp    viewport.Model
	w, h  int
	ready bool
}

// jsonDoc is JSON a pane shows, with lines above and below it; it is painted for a width once
// and kept (a record view keeps one per revision).
type jsonDoc struct {
	painter    jsonPainter
	raw        []byte
	head, tail []string
	width      int
	lines      []string
}

func newJSONDoc(p jsonPainter, raw []byte, head, tail []string) *jsonDoc {
	return &jsonDoc{painter: p, raw: raw, head: head, tail: tail}
}

// render lays the document out for width: the JSON already fits, the short lines around it are
// wrapped.
func (d *jsonDoc) render(width int) []string {
	if d.width == width && d.lines != nil {
		return d.lines
	}
	out := wrapAll(d.head, width)
	out = append(out, d.painter.linesFit(d.raw, width)...)
	out = append(out, wrapAll(d.tail, width)...)
	d.width, d.lines = width, out
	return out
}

// wrapAll wraps each line wider than width.
func wrapAll(src []string, width int) []string {
	out := make([]string, 0, len(src))
	for _, l := range src {
		if ansi.StringWidth(l) <= width {
			out = append(out, l)
			continue
		}
		out = append(out, strings.Split(ansi.Wrap(l, width, " ,"), "\n")...)
	}
	return out
}

// SetContent replaces the pane's title, lines (painted, terminal-safe) and the text y copies.
func (p *scrollPane) SetContent(title string, lines []string, raw string) {
	p.title, p.src, p.doc, p.raw = title, lines, nil, raw
	p.layout(false)
}

// SetJSON shows a JSON document (see jsonDoc) and copies raw.
func (p *scrollPane) SetJSON(title string, doc *jsonDoc, raw string) {
	p.title, p.src, p.doc, p.raw = title, nil, doc, raw
	p.layout(false)
}

// SetTitle changes the title only.
func (p *scrollPane) SetTitle(title string) { p.title = title }

// SetSize sets the pane's outer size (borders included).
func (p *scrollPane) SetSize(w, h int) {
	if w == p.w && h == p.h && p.ready {
		return
	}
	p.w, p.h = w, h
	p.layout(true)
}

func (p *scrollPane) inner() (int, int) { return max(1, p.w-4), max(1, p.h-3) }

// InnerWidth is how many cells a content line may take.
func (p *scrollPane) InnerWidth() int { w, _ := p.inner(); return w }

func (p *scrollPane) layout(keepOffset bool) {
	iw, ih := p.inner()
	off := p.vp.YOffset
	p.vp = viewport.New(iw, ih)
	p.vp.MouseWheelEnabled = true
	p.ready = true
	var lines []string
	if p.doc != nil {
		lines = p.doc.render(iw)
	} else {
		lines = wrapAll(p.src, iw)
	}
	p.vp.SetContent(strings.Join(lines, "\n"))
	if keepOffset {
		p.vp.SetYOffset(off)
	}
}

// Scroll applies a scrolling key; it reports whether the key was one.
func (p *scrollPane) Scroll(k *uictx.KeyMap, msg tea.KeyMsg) bool {
	switch {
	case key.Matches(msg, k.List.Up):
		p.vp.ScrollUp(1)
	case key.Matches(msg, k.List.Down):
		p.vp.ScrollDown(1)
	case key.Matches(msg, k.List.PgUp):
		p.vp.PageUp()
	case key.Matches(msg, k.List.PgDown), key.Matches(msg, k.Pane.Page):
		p.vp.PageDown()
	case key.Matches(msg, k.List.Top):
		p.vp.GotoTop()
	case key.Matches(msg, k.List.Bottom):
		p.vp.GotoBottom()
	default:
		return false
	}
	return true
}

// Wheel scrolls by the mouse wheel.
func (p *scrollPane) Wheel(msg tea.MouseMsg) {
	switch msg.Button {
	case tea.MouseButtonWheelUp:
		p.vp.ScrollUp(3)
	case tea.MouseButtonWheelDown:
		p.vp.ScrollDown(3)
	}
}

// Position is the visible range, e.g. "12-31/140": visible in the title so a cut-off pane says
// it has more.
func (p *scrollPane) Position() string {
	total := p.vp.TotalLineCount()
	if total <= p.vp.Height {
		return ""
	}
	first := p.vp.YOffset + 1
	last := min(total, p.vp.YOffset+p.vp.Height)
	return fmt.Sprintf("%d-%d/%d", first, last, total)
}

// Copy is what y copies from this pane.
func (p *scrollPane) Copy() string { return p.raw }

// View draws the pane: a focused pane has a heavy border and a marked title.
func (p *scrollPane) View(s uictx.Styles, focused bool) string {
	iw, _ := p.inner()
	title := p.title
	if focused {
		title = "▸ " + title
	}
	pos := p.Position()
	if pos != "" {
		pos = " " + pos
		if !p.vp.AtBottom() {
			pos += " ↓"
		}
	}
	head := s.PaneTitle.Render(termsafe.Cut(title, max(1, iw-ansi.StringWidth(pos)))) + s.Subtle.Render(pos)
	return paneFrame(s, head+"\n"+p.vp.View(), p.w, p.h, focused)
}

// paneFrame draws a bordered box of exactly w×h cells around body (its lines already fit).
func paneFrame(s uictx.Styles, body string, w, h int, focused bool) string {
	st := s.Pane
	if focused {
		st = s.PaneFocused
	}
	innerW, innerH := w-4, h-2
	if innerW < 1 || innerH < 1 {
		return ""
	}
	return st.Width(w - 2).Height(innerH).Render(fitBlock(body, innerW, innerH))
}
