package views

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/idemwork/idemwork/internal/termsafe"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
)

// timelineQuery reads a Timeline search: a key prefix, or "action:" and an action prefix.
func timelineQuery(q string) model.HistoryQuery {
	field, v := searchField(q, "key", "key", "action")
	if field == "action" {
		return model.HistoryQuery{ActionPrefix: strings.ToUpper(v)}
	}
	return model.HistoryQuery{KeyPrefix: v}
}

func describeTimeline(q string) string {
	h := timelineQuery(q)
	if h.ActionPrefix != "" {
		return "audit events whose action starts with " + termsafe.Quote(h.ActionPrefix)
	}
	return "keys starting with " + termsafe.Quote(h.KeyPrefix) + " (by key)"
}

// exportMsg reports an export's progress (done false) or its end.
type exportMsg struct {
	n    int
	path string
	done bool
	err  error
	ch   <-chan exportMsg
}

func waitExport(ch <-chan exportMsg) tea.Cmd {
	return func() tea.Msg {
		m, ok := <-ch
		if !ok {
			return nil
		}
		m.ch = ch
		return m
	}
}

// exportFile picks where an export named base.ext goes: dir (the working directory when ""),
// else the temporary directory; a name taken gets a number.
func exportFile(dir, base, ext string) (*os.File, error) {
	if dir == "" {
		dir = "."
	}
	var err error
	for _, d := range []string{dir, os.TempDir()} {
		for n := 1; n <= 100; n++ {
			name := base + "." + ext
			if n > 1 {
				name = fmt.Sprintf("%s-%d.%s", base, n, ext)
			}
			var f *os.File
			f, err = os.OpenFile(filepath.Join(d, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err == nil {
				return f, nil
			}
			if !os.IsExist(err) {
				break // this directory cannot be written: the next one
			}
		}
	}
	return nil, err
}

// HistoryReader reads the owner's merged history for the Timeline view: pages of it, and the
// whole selection streamed to a writer (keyset page by keyset page) for an export.
type HistoryReader interface {
	Timeline(ctx context.Context, q model.HistoryQuery) ([]model.Event, string, error)
	ExportHistory(ctx context.Context, q model.HistoryQuery, format model.ExportFormat, w io.Writer, max int, progress func(int)) (int, error)
}

// NewTimeline is the owner's merged history — audit events, executions, keys and revisions —
// newest first, one keyset page at a time, for support staff tracing what happened; / searches
// by key or action prefix and x exports what is selected, whole, to a CSV file.
func NewTimeline(ctx *uictx.ProgramContext, src HistoryReader) View {
	v := &listView[model.Event]{ctx: ctx, title: "Timeline", keys: []key.Binding{ctx.Keys.List.Open, ctx.Keys.List.ToKey, ctx.Keys.Timeline.Export},
		hint: "key prefix (its whole story), or action:PREFIX"}
	v.list.table.Columns = []Column{{Title: "WHEN", Width: 14}, {Title: "KIND", Width: 9}, {Title: "WHAT", Min: 16}, {Title: "RECORD", Width: 12, Optional: true}, {Title: "KEY", Width: 22}}
	v.list.fetch = func(ctx context.Context, owner, query, cursor string, reverse bool) ([]model.Event, string, error) {
		q := timelineQuery(query)
		q.Owner, q.Limit, q.Cursor, q.Desc = owner, pageSize, cursor, !reverse
		if query == "" {
			q = model.HistoryQuery{Owner: owner, Limit: pageSize, Cursor: cursor, Desc: !reverse}
		}
		return src.Timeline(ctx, q)
	}
	// G reads the oldest page with the same keyset, ascending: the owner's first event at once.
	v.list.reversible = true
	v.list.id = func(e model.Event) string { return e.Kind + ":" + e.ID }
	v.list.describe = describeTimeline
	v.list.toRow = func(e model.Event) Row {
		var what []string
		for _, p := range []*string{e.Action, e.Operation, e.FeatureID, e.Mode, e.Status} {
			if p != nil && *p != "" {
				what = append(what, *p)
			}
		}
		if e.Kind == "revision" && e.Revision != nil {
			what = append(what, fmt.Sprintf("revision %d", *e.Revision))
		}
		r := Row{Cells: []string{stamp(e.At), e.Kind, strings.Join(what, " "), shortID(deref(e.RecordID), 12), deref(e.Key)}}
		if e.Status != nil && (*e.Status == "BLOCKED" || *e.Status == "PROCESSING") {
			r.Style = &ctx.Styles.Warning
		}
		return r
	}
	v.heading = func() string {
		return ctx.Styles.Title.Render("Timeline") + ctx.Styles.Subtle.Render(fmt.Sprintf(" of %s, newest first · %s · x exports", safe(ctx.Owner), v.list.summary()))
	}
	exporting := false
	v.onMsg = func(msg tea.Msg) (tea.Cmd, bool) {
		m, ok := msg.(exportMsg)
		if !ok {
			return nil, false
		}
		if !m.done {
			// In order: this count reaches the screen before the next one (or the end) is read.
			return tea.Sequence(status(fmt.Sprintf("exporting the history: %d entries written to %s…", m.n, m.path), false), waitExport(m.ch)), true
		}
		exporting = false
		if m.err != nil {
			return status("export failed: "+errText(m.err), true), true
		}
		return status(fmt.Sprintf("exported %d entries (oldest first, CSV) to %s", m.n, m.path), false), true
	}
	v.onKey = func(msg tea.KeyMsg, e *model.Event) tea.Cmd {
		switch {
		case key.Matches(msg, ctx.Keys.Timeline.Export):
			if exporting {
				return status("an export is already running", true)
			}
			exporting = true
			q := timelineQuery(v.list.query)
			if v.list.query == "" {
				q = model.HistoryQuery{}
			}
			q.Owner = ctx.Owner
			return startExport(src, q, ctx.ExportDir, ctx.Now())
		case e == nil:
		case key.Matches(msg, ctx.Keys.List.Open) && e.Kind == "key" && e.Key != nil, key.Matches(msg, ctx.Keys.List.ToKey) && e.Key != nil:
			return jump(uictx.JumpKey, "", *e.Key)
		case key.Matches(msg, ctx.Keys.List.Open) && e.RecordID != nil:
			return jump(uictx.JumpRecord, deref(e.ModuleCode), *e.RecordID)
		}
		return nil
	}
	v.selection = func(e model.Event) string { return e.ID }
	return searchableList[model.Event]{v}
}

// startExport streams the selected history to a new CSV file off the Update goroutine, keyset
// page by keyset page (HistoryReader.ExportHistory), reporting progress as it goes.
func startExport(db HistoryReader, q model.HistoryQuery, dir string, now time.Time) tea.Cmd {
	ch := make(chan exportMsg, 4)
	go func() {
		defer close(ch)
		f, err := exportFile(dir, fmt.Sprintf("idemwork-history-%s-%s", q.Owner, now.Format("20060102-150405")), "csv")
		if err != nil {
			ch <- exportMsg{done: true, err: fmt.Errorf("create the export file: %w", err)}
			return
		}
		path, _ := filepath.Abs(f.Name())
		w := bufio.NewWriter(f)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		n, err := db.ExportHistory(ctx, q, model.ExportCSV, w, 0, func(n int) {
			select {
			case ch <- exportMsg{n: n, path: path}:
			default: // the screen is behind: skip this count
			}
		})
		if err == nil {
			err = w.Flush()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		ch <- exportMsg{n: n, path: path, done: true, err: err}
	}()
	return waitExport(ch)
}
