package views_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/internal/tuitest"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/storm/stormtypes"
	"github.com/idemwork/idemwork/views"
)

// Small in-memory readers and writers for the views' Update tests that need no database: they
// stand for what the view asks, not for PostgreSQL (the tests of what the database holds run
// over tuitest's real one).

// writable lets every write through; readOnly refuses them with the session's reason.
type gateFunc func() error

func (g gateFunc) WriteRefusal() error { return g() }

var (
	writable = gateFunc(func() error { return nil })
	standby  = gateFunc(func() error {
		return apperr.New(apperr.ReadOnly, "this is a hot standby; writes go to the primary (connect to it with --allow-writes to write)")
	})
)

// plainCtx is a program context over no database: alice, the test theme and the pinned clock.
func plainCtx() *uictx.ProgramContext {
	return &uictx.ProgramContext{
		Styles:  uictx.NewStyles(uictx.DefaultTheme()),
		Keys:    uictx.DefaultKeys(),
		Conn:    uictx.Conn{Display: "fake"},
		Writes:  writable,
		Owner:   "alice",
		NowFunc: func() time.Time { return tuitest.Now },
	}
}

// latestRecords is a LatestReader over records kept by id; set changes one.
type latestRecords struct {
	mu   sync.Mutex
	byID map[string]model.Record
}

func newLatest(rs ...model.Record) *latestRecords {
	l := &latestRecords{byID: map[string]model.Record{}}
	for _, r := range rs {
		l.byID[r.ID] = r
	}
	return l
}

func (l *latestRecords) LatestRecord(_ context.Context, owner, module, id string) (model.Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.byID[id]
	if !ok || r.OwnerID != owner || r.ModuleCode != module {
		return model.Record{}, apperr.New(apperr.RecordNotFound, "record %s not found", id)
	}
	return r, nil
}

func (l *latestRecords) update(id string, fn func(*model.Record)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.byID[id]
	fn(&r)
	l.byID[id] = r
}

// catalog is the kernel's modules as pickers list them, with the live MEM-001 rule.
type catalog struct {
	mu  sync.Mutex
	max int
}

func (c *catalog) Features(module string) []views.Feature {
	switch module {
	case "MEM-001":
		return []views.Feature{{ID: "F01", Label: "F01 summarize · internal"}, {ID: "F02", Label: "F02 publish · direct_external → blocked"}}
	case "COMMITMENT":
		return []views.Feature{{ID: "F01", Label: "F01 remind · internal"}, {ID: "F02", Label: "F02 notify · outbox → queued for the worker"}}
	}
	return nil
}

func (c *catalog) MemMaxContentLength() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.max
}

func (c *catalog) SetMemMaxContentLength(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.max = n
}

// summaryOf is a runner's summary of a storm (as the engine would count it).
func summaryOf(spec stormtypes.Spec, outcomes map[string]int, v stormtypes.Verdict) stormtypes.Summary {
	return stormtypes.Summary{Storm: stormtypes.Setup{ID: spec.ID, Key: spec.Key(), Op: spec.Op, N: spec.N}, Requests: spec.N,
		Outcomes: outcomes, Verdict: v}
}

// records is a RecordReader over records kept in memory: the list newest first, each record's
// revisions (snapshots by revision), its executions and audit events.
type records struct {
	mu        sync.Mutex
	list      []model.Record
	snapshots map[string][]json.RawMessage // by record id: revision i+1 at i
	execs     map[string][]model.Execution
	audit     map[string][]model.AuditEvent
	reads     int // Records calls
}

func (r *records) add(rec model.Record, snapshots ...json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.snapshots == nil {
		r.snapshots = map[string][]json.RawMessage{}
	}
	r.list = append([]model.Record{rec}, r.list...)
	r.snapshots[rec.ID] = snapshots
}

func (r *records) Records(_ context.Context, q model.RecordQuery) ([]model.Record, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads++
	var out []model.Record
	for _, rec := range r.list {
		if rec.OwnerID == q.Owner && (q.Module == "" || rec.ModuleCode == q.Module) && strings.HasPrefix(rec.ID, q.IDPrefix) &&
			strings.Contains(strings.ToLower(rec.Title), strings.ToLower(q.TitleContains)) {
			out = append(out, rec)
		}
	}
	return out, "", nil
}

func (r *records) find(owner, id string) (model.Record, bool) {
	for _, rec := range r.list {
		if rec.OwnerID == owner && rec.ID == id {
			return rec, true
		}
	}
	return model.Record{}, false
}

func (r *records) RecordModule(_ context.Context, owner, id string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.find(owner, id)
	if !ok {
		return "", apperr.New(apperr.RecordNotFound, "owner %s has no record %s", owner, id)
	}
	return rec.ModuleCode, nil
}

func (r *records) RecordOutline(_ context.Context, owner, module, id string) (model.RecordOutline, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.find(owner, id)
	if !ok || rec.ModuleCode != module {
		return model.RecordOutline{}, apperr.New(apperr.RecordNotFound, "owner %s has no %s record %s", owner, module, id)
	}
	o := model.RecordOutline{Record: rec, Executions: r.execs[id], Audit: r.audit[id]}
	for i, s := range r.snapshots[id] {
		o.Revisions = append(o.Revisions, model.RevisionHead{Revision: i + 1, CreatedAt: rec.CreatedAt.Add(time.Duration(i) * time.Second), Bytes: len(s)})
	}
	return o, nil
}

func (r *records) GetRevision(_ context.Context, owner, recordID string, revision int) (model.Revision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	snaps := r.snapshots[recordID]
	if revision < 1 || revision > len(snaps) {
		return model.Revision{}, apperr.New(apperr.RecordNotFound, "record %s has no revision %d", recordID, revision)
	}
	return model.Revision{OwnerID: owner, RecordID: recordID, Revision: revision, Snapshot: snaps[revision-1]}, nil
}

// page is a reader of one kind of rows, all on one page.
type page[T any] struct{ rows []T }

func (p page[T]) Executions(context.Context, model.ExecutionQuery) ([]T, string, error) {
	return p.rows, "", nil
}
func (p page[T]) Audit(context.Context, model.AuditQuery) ([]T, string, error) {
	return p.rows, "", nil
}

// writer is a Writer that records what it is sent and answers with answer.
type writer struct {
	mu     sync.Mutex
	sent   []any
	answer func(in any) (model.WriteResult, error)
}

func (w *writer) write(in any) (model.WriteResult, error) {
	w.mu.Lock()
	w.sent = append(w.sent, in)
	w.mu.Unlock()
	return w.answer(in)
}

func (w *writer) Create(_ context.Context, in model.CreateInput) (model.WriteResult, error) {
	return w.write(in)
}
func (w *writer) Patch(_ context.Context, in model.PatchInput) (model.WriteResult, error) {
	return w.write(in)
}
func (w *writer) RunFeature(_ context.Context, in model.FeatureInput) (model.WriteResult, error) {
	return w.write(in)
}

func (w *writer) last() any {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.sent) == 0 {
		return nil
	}
	return w.sent[len(w.sent)-1]
}

// movedClock is a workbench clock moved by offset from the pinned time.
type movedClock struct{ offset time.Duration }

func (c *movedClock) Now() time.Time          { return tuitest.Now.Add(c.offset) }
func (c *movedClock) Advance(d time.Duration) { c.offset += d }
func (c *movedClock) Reset()                  { c.offset = 0 }
func (c *movedClock) Offset() time.Duration   { return c.offset }

// keys is a KeySource over rows and key views kept in memory.
type keys struct {
	rows  []model.KeyRow
	views map[string]model.KeyView
}

func (k keys) Keys(_ context.Context, q model.KeyQuery) ([]model.KeyRow, string, error) {
	var out []model.KeyRow
	for _, r := range k.rows {
		if r.OwnerID == q.Owner && strings.HasPrefix(r.Key, q.Prefix) {
			out = append(out, r)
		}
	}
	return out, "", nil
}

func (k keys) InspectKey(ctx context.Context, owner, key string) (model.KeyView, error) {
	if err := idemtype.ValidateKey(key); err != nil {
		return model.KeyView{}, err
	}
	return k.InspectStoredKey(ctx, owner, key)
}

func (k keys) InspectStoredKey(_ context.Context, _, key string) (model.KeyView, error) {
	v, ok := k.views[key]
	if !ok {
		return model.KeyView{}, apperr.New(apperr.NotFound, "no key %s", key)
	}
	return v, nil
}

// envelope is a stored envelope of policy referencing a record revision.
func envelope(policy, recordID string, revision int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"policy": %q, "result": {"recordId": %q, "revision": %d}, "schemaVersion": 1}`, policy, recordID, revision))
}

// bigSnapshots are the snapshots of a NOTE record of n revisions with payloads of about kb KB
// (as bigRecord plants them): a counter, a long text ending in the revision, and two or three
// items.
func bigSnapshots(id string, n, kb int) []json.RawMessage {
	out := make([]json.RawMessage, n)
	for r := 1; r <= n; r++ {
		items := []string{"a", "b"}
		if r%2 == 0 {
			items = append(items, "c")
		}
		snap, _ := json.Marshal(map[string]any{"id": id, "ownerId": "alice", "moduleCode": "NOTE", "revision": r, "title": "big", "summary": "",
			"payload": map[string]any{"i": r, "text": strings.Repeat("lorem ipsum dolor ", kb*57) + fmt.Sprintf(" rev %d", r), "items": items}})
		out[r-1] = snap
	}
	return out
}

func bigRecordIn(src *records, id string, n, kb int) {
	src.add(model.Record{ID: id, OwnerID: "alice", ModuleCode: "NOTE", Revision: n, Title: "big", Payload: []byte(`{}`),
		CreatedAt: tuitest.Now.Add(-time.Hour), UpdatedAt: tuitest.Now.Add(-time.Hour)}, bigSnapshots(id, n, kb)...)
}
