// Package workbench implements the views' readers and writers over the store, the kernel and
// the outbox worker: the wiring cli hands the TUI, and the TUI's tests over a real database.
// Every error comes back in the coded form the views show (wire.Coded: a known database failure
// with its code and what to do, anything else INTERNAL), an unreachable database marked with
// views.Unreachable, so no view sees a driver's error or imports the database.
package workbench

import (
	"context"
	"io"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/demo"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/inspect"
	"github.com/idemwork/idemwork/internal/uictx"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/libinspect"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/outbox"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/readmodel"
	"github.com/idemwork/idemwork/verify"
	"github.com/idemwork/idemwork/views"
	"github.com/idemwork/idemwork/wire"
)

// Sources are the session's handles the views' readers and writers work over.
type Sources struct {
	DB     *store.DB
	Kernel *kernel.Kernel
	// Outbox is the session's delivery worker, Provider its simulated provider and Crash its
	// crash switch (each nil where the session has none).
	Outbox   *outbox.Worker
	Provider *outbox.MemoryProvider
	Crash    *outbox.CrashSwitch
	// Storm fires storms (nil: the Storm view says they are not available).
	Storm views.StormRunner
	// Service, when set, reads a service's database (DB.Service): its keys are inspected and
	// verified by it, and the views of idemwork's records find none.
	Service *libinspect.Inspector
	// Health hears every call's end: whether the database answered (nil: not tracked).
	Health *uictx.Health
}

// Backend is the views' readers and writers over s.
func Backend(s Sources) views.Backend {
	h := health{s.Health}
	r := reads{db: s.DB, health: h}
	k := writes{k: s.Kernel, health: h}
	b := views.Backend{
		Records: r, Keys: keySource{r, k}, Executions: r, Audit: r, History: r, Sessions: r, Latest: r,
		Writer: k, Verify: k, Reuse: k, Catalog: catalog{reg: s.Kernel.Registry}, Demo: demos{k: s.Kernel, worker: s.Outbox, health: h},
		Storm:  s.Storm,
		Outbox: views.OutboxTools{Messages: r},
	}
	if s.Service != nil {
		// A service's database: its keys, inspected through its plugins; none of idemwork's rows.
		sr, inspect := serviceReads{r}, serviceInspect{s.Service}
		b.Records, b.Keys, b.Executions, b.Audit, b.Latest = sr, serviceKeys{sr, inspect}, sr, sr, sr
		b.Verify, b.Outbox, b.Storm = inspect, views.OutboxTools{Messages: sr}, nil
		return b
	}
	// Only a real handle goes into an interface: a nil pointer in one would read as present.
	if s.Outbox != nil {
		b.Outbox.Worker = worker{w: s.Outbox, health: h}
	}
	if s.Provider != nil {
		b.Outbox.Provider = s.Provider
	}
	if s.Crash != nil {
		b.Outbox.Crash = s.Crash
	}
	return b
}

// Gate is the session's write gate: the session's own refusal (a hot standby, a newer schema, a
// read-only session), or READ_ONLY for a handle opened read-only.
func Gate(db *store.DB) uictx.WriteGate { return gate{db: db} }

type gate struct{ db *store.DB }

func (g gate) WriteRefusal() error {
	if err := g.db.WriteRefusal(); err != nil {
		return err
	}
	if g.db.ReadOnly {
		return apperr.New(apperr.ReadOnly, "this session is read-only; reconnect with --allow-writes to write")
	}
	return nil
}

// Replication is what the header warns with: the session's replication risk as last read (the
// caller keeps it read: store.DB.WatchReplication).
func Replication(db *store.DB) uictx.ReplicationWatch { return replication{db: db} }

type replication struct{ db *store.DB }

func (r replication) ReplicationRisk() string {
	if rep := r.db.Replication(); rep.AtRisk() {
		return rep.Risk
	}
	return ""
}

// Clock is the runner's clock when it can be moved (an idem.OffsetClock), else nil: the
// workbench then shows the system time and cannot move it.
func Clock(k *kernel.Kernel) uictx.Clock {
	if c, ok := k.Runner().Clock().(*idem.OffsetClock); ok && c != nil {
		return c
	}
	return nil
}

// Coded is err as the views show it: nil for nil, a known database failure with its code and
// what to do (views.Unreachable when the database could not be reached or went away), anything
// else INTERNAL naming the step and the SQLSTATE.
func Coded(err error) error {
	switch {
	case err == nil:
		return nil
	case store.Unreachable(err):
		return views.Unreachable(wire.Coded(err))
	}
	return wire.Coded(err)
}

// health notes every call's end in the session's Health, and codes its error (Coded).
type health struct{ h *uictx.Health }

func (h health) coded(err error) error {
	h.h.Note(err != nil && store.Unreachable(err), err == nil)
	return Coded(err)
}

// reads are the store's read models.
type reads struct {
	db *store.DB
	health
}

func (r reads) Records(ctx context.Context, q model.RecordQuery) ([]model.Record, string, error) {
	rows, next, err := readmodel.Records(ctx, r.db, q)
	return rows, next, r.coded(err)
}

func (r reads) RecordModule(ctx context.Context, owner, id string) (string, error) {
	m, err := readmodel.RecordModule(ctx, r.db, owner, id)
	return m, r.coded(err)
}

func (r reads) RecordOutline(ctx context.Context, owner, module, id string) (model.RecordOutline, error) {
	o, err := readmodel.RecordOutline(ctx, r.db, store.RecordRef{Owner: owner, Module: module, ID: id})
	return o, r.coded(err)
}

func (r reads) GetRevision(ctx context.Context, owner, recordID string, revision int) (model.Revision, error) {
	rev, err := readmodel.GetRevision(ctx, r.db, owner, recordID, revision)
	return rev, r.coded(err)
}

func (r reads) LatestRecord(ctx context.Context, owner, module, id string) (model.Record, error) {
	rec, err := readmodel.LatestRecord(ctx, r.db, store.RecordRef{Owner: owner, Module: module, ID: id})
	return rec, r.coded(err)
}

func (r reads) Keys(ctx context.Context, q model.KeyQuery) ([]model.KeyRow, string, error) {
	rows, next, err := readmodel.Keys(ctx, r.db, q)
	return rows, next, r.coded(err)
}

func (r reads) Executions(ctx context.Context, q model.ExecutionQuery) ([]model.Execution, string, error) {
	rows, next, err := readmodel.Executions(ctx, r.db, q)
	return rows, next, r.coded(err)
}

func (r reads) Audit(ctx context.Context, q model.AuditQuery) ([]model.AuditEvent, string, error) {
	rows, next, err := readmodel.Audit(ctx, r.db, q)
	return rows, next, r.coded(err)
}

func (r reads) Timeline(ctx context.Context, q model.HistoryQuery) ([]model.Event, string, error) {
	rows, next, err := readmodel.Timeline(ctx, r.db, q)
	return rows, next, r.coded(err)
}

func (r reads) ExportHistory(ctx context.Context, q model.HistoryQuery, format model.ExportFormat, w io.Writer, max int, progress func(int)) (int, error) {
	n, err := readmodel.ExportHistory(ctx, r.db, q, format, w, max, progress)
	return n, r.coded(err)
}

func (r reads) Sessions(ctx context.Context) ([]model.Session, error) {
	s, err := readmodel.Sessions(ctx, r.db)
	return s, r.coded(err)
}

func (r reads) OutboxPage(ctx context.Context, owner string, limit int, cursor string) ([]model.OutboxMessage, string, error) {
	rows, next, err := readmodel.OutboxPage(ctx, r.db, owner, limit, cursor)
	return rows, next, r.coded(err)
}

// writes are the kernel's writes and reads of keys and invariants.
type writes struct {
	k *kernel.Kernel
	health
}

func (w writes) Create(ctx context.Context, in model.CreateInput) (model.WriteResult, error) {
	res, err := w.k.Create(ctx, in)
	return res, w.coded(err)
}

func (w writes) Patch(ctx context.Context, in model.PatchInput) (model.WriteResult, error) {
	res, err := w.k.Patch(ctx, in)
	return res, w.coded(err)
}

func (w writes) RunFeature(ctx context.Context, in model.FeatureInput) (model.WriteResult, error) {
	res, err := w.k.RunFeature(ctx, in)
	return res, w.coded(err)
}

func (w writes) ExplainKeyReuse(ctx context.Context, r model.WriteRequest) (model.ReuseReport, error) {
	rep, err := w.k.ExplainKeyReuse(ctx, r)
	return rep, w.coded(err)
}

func (w writes) InspectKey(ctx context.Context, owner, key string) (model.KeyView, error) {
	v, err := inspect.Key(ctx, w.k, owner, key)
	return v, w.coded(err)
}

func (w writes) InspectStoredKey(ctx context.Context, owner, key string) (model.KeyView, error) {
	v, err := inspect.StoredKey(ctx, w.k, owner, key)
	return v, w.coded(err)
}

func (w writes) VerifyInvariants(ctx context.Context, opts model.VerifyOptions) (model.InvariantReport, error) {
	rep, err := verify.Invariants(ctx, w.k, opts)
	return rep, w.coded(err)
}

// keySource lists keys from the store and inspects them with the kernel.
type keySource struct {
	reads
	writes
}

// catalog is the kernel's module registry and live rules.
type catalog struct{ reg *kernel.Registry }

func (c catalog) Features(module string) []views.Feature {
	mod, err := c.reg.Module(module)
	if err != nil {
		return nil
	}
	out := make([]views.Feature, 0, len(mod.Features))
	for _, f := range mod.Features {
		out = append(out, views.Feature{ID: f.ID, Label: f.Label()})
	}
	return out
}

func (c catalog) MemMaxContentLength() int     { return c.reg.Rules.Snapshot().MemMaxContentLength }
func (c catalog) SetMemMaxContentLength(n int) { c.reg.Rules.SetMemMaxContentLength(n) }

// worker is the session's outbox worker.
type worker struct {
	w *outbox.Worker
	health
}

func (w worker) Deliver(ctx context.Context, owner string, limit int) (views.OutboxPass, error) {
	rep, err := w.w.RunScoped(ctx, outbox.Scope{OwnerID: owner}, limit)
	return views.OutboxPass{Claimed: rep.Claimed, Delivered: rep.Delivered, Retried: rep.Retried, Failed: rep.Failed,
		Abandoned: rep.Abandoned, Lost: rep.Lost}, w.coded(err)
}

func (w worker) Settings() views.OutboxSettings {
	o := w.w.Options()
	return views.OutboxSettings{MaxAttempts: o.MaxAttempts, BaseBackoff: o.BaseBackoff, JitterPercent: outbox.JitterPercent, Lease: o.Lease}
}

// demos are the guided walk-throughs (package demo), delivering with the session's worker settings.
type demos struct {
	k      *kernel.Kernel
	worker *outbox.Worker
	health
}

func (d demos) NewBlockedExternalDemo(owner, keyPrefix string) views.BlockedWalk {
	return blockedWalk{demo.NewBlocked(d.k, owner, keyPrefix), d.health}
}

func (d demos) NewOutboxDemo(owner, keyPrefix string) (views.OutboxWalk, error) {
	var settings outbox.Options
	if d.worker != nil {
		settings = d.worker.Options()
	}
	w, err := demo.NewOutbox(d.k, owner, keyPrefix, settings)
	if err != nil {
		return nil, d.coded(err)
	}
	return outboxWalk{w, d.health}, nil
}

func (d demos) CompareModes(ctx context.Context, owner, blockedKey, outboxKey string) (model.ModeComparison, error) {
	c, err := demo.CompareModes(ctx, d.k, owner, blockedKey, outboxKey)
	return c, d.coded(err)
}

type blockedWalk struct {
	*demo.Blocked
	health
}

func (w blockedWalk) Next(ctx context.Context) (model.DemoStep, error) {
	s, err := w.Blocked.Next(ctx)
	return s, w.coded(err)
}

type outboxWalk struct {
	*demo.Outbox
	health
}

func (w outboxWalk) Next(ctx context.Context) (model.DemoStep, error) {
	s, err := w.Outbox.Next(ctx)
	return s, w.coded(err)
}

// serviceReads are the reads of a service's database: its keys and timeline are the store's;
// the tables of idemwork's records are not there, so their views list nothing.
type serviceReads struct{ reads }

func (serviceReads) Records(context.Context, model.RecordQuery) ([]model.Record, string, error) {
	return []model.Record{}, "", nil
}

func (serviceReads) Executions(context.Context, model.ExecutionQuery) ([]model.Execution, string, error) {
	return []model.Execution{}, "", nil
}

func (serviceReads) Audit(context.Context, model.AuditQuery) ([]model.AuditEvent, string, error) {
	return []model.AuditEvent{}, "", nil
}

func (serviceReads) OutboxPage(context.Context, string, int, string) ([]model.OutboxMessage, string, error) {
	return []model.OutboxMessage{}, "", nil
}

func (serviceReads) LatestRecord(_ context.Context, owner, module, id string) (model.Record, error) {
	return model.Record{}, apperr.New(apperr.NotFound, "a service's database holds no records of idemwork's (owner %s, %s %s)", owner, module, id)
}

func (serviceReads) RecordModule(_ context.Context, owner, id string) (string, error) {
	return "", apperr.New(apperr.NotFound, "a service's database holds no records of idemwork's (owner %s, record %s)", owner, id)
}

func (serviceReads) RecordOutline(_ context.Context, owner, _ string, id string) (model.RecordOutline, error) {
	return model.RecordOutline{}, apperr.New(apperr.NotFound, "a service's database holds no records of idemwork's (owner %s, record %s)", owner, id)
}

func (serviceReads) GetRevision(_ context.Context, owner, recordID string, _ int) (model.Revision, error) {
	return model.Revision{}, apperr.New(apperr.NotFound, "a service's database holds no records of idemwork's (owner %s, record %s)", owner, recordID)
}

// serviceInspect inspects and verifies a service's keys.
type serviceInspect struct{ in *libinspect.Inspector }

func (s serviceInspect) InspectKey(ctx context.Context, owner, key string) (model.KeyView, error) {
	v, err := s.in.InspectKey(ctx, owner, key)
	return v, Coded(err)
}

func (s serviceInspect) InspectStoredKey(ctx context.Context, owner, key string) (model.KeyView, error) {
	v, err := s.in.InspectStoredKey(ctx, owner, key)
	return v, Coded(err)
}

func (s serviceInspect) VerifyInvariants(ctx context.Context, opts model.VerifyOptions) (model.InvariantReport, error) {
	rep, err := s.in.VerifyInvariants(ctx, opts)
	return rep, Coded(err)
}

// serviceKeys lists a service's keys from the store and inspects them with its plugins.
type serviceKeys struct {
	serviceReads
	serviceInspect
}
