package views_test

import (
	"context"
	"sync"
	"time"

	"idemwork/apperr"
	"idemwork/internal/tuitest"
	"idemwork/model"
	"idemwork/storm/stormtypes"
	"idemwork/tui/shared"
	"idemwork/views"
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
func plainCtx() *shared.ProgramContext {
	return &shared.ProgramContext{
		Styles:  shared.NewStyles(shared.DefaultTheme()),
		Keys:    shared.DefaultKeys(),
		Conn:    shared.Conn{Display: "fake"},
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
