package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/outbox"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/demorows"
	"github.com/idemwork/idemwork/store/outboxrows"
	"github.com/idemwork/idemwork/store/readmodel"
)

// Outbox walks through the replacement of a direct provider call (SPEC §7) on real rows,
// one step at a time, as Blocked does for the call that fails closed: COMMITMENT F02
// commits a PENDING execution and its outbox message in the request's transaction; a replay
// returns the same execution; a delivery worker of the demo's own, outside any business
// transaction, calls the demo's provider with the message's idempotency id, retries after a
// backoff when it fails, delivers again after a crash between the call and the settle (the
// provider deduplicates: one effect), and gives up with FAILED after the last attempt. Time
// passes on the workbench clock (the runner's), which the demo moves to each due moment and says
// by how much. The worker only ever claims the demo's own messages. Every claim is checked
// against the database (and the provider), never assumed. It is not safe for concurrent use.
type Outbox struct {
	k        *kernel.Kernel
	owner    string
	prefix   string
	run      string
	worker   *outbox.Worker
	provider *outbox.MemoryProvider
	crash    *outbox.CrashSwitch
	clock    interface{ Advance(time.Duration) }
	moved    time.Duration
	next     int
	record   *model.Record
	revision int
	notes    []notification
	reused   []string
}

// notification is one F02 request of the demo.
type notification struct {
	key  string
	exec model.Execution
	msg  model.OutboxMessage
}

// NewOutbox prepares the walk-through over k for owner. Its record's key is keyPrefix+":record" (a
// later run replays it and reuses the record); each run's notifications get keys of their own
// under keyPrefix. settings are the delivery worker's (attempts, backoff, lease, call timeout:
// the workbench's or the config's); the demo's worker has its own provider and crash switch and
// runs on the runner's clock, which must be one that can move (idem.OffsetClock).
func NewOutbox(k *kernel.Kernel, owner, keyPrefix string, settings outbox.Options) (*Outbox, error) {
	mod, err := k.Registry.Module(kernel.ModuleCommitment)
	if err != nil {
		return nil, err
	}
	feat, ok := mod.Feature("F02")
	if !ok || feat.Mode != kernel.ModeOutbox {
		return nil, apperr.New(apperr.Internal, "COMMITMENT F02 is not an outbox feature: the outbox walk-through has nothing to show")
	}
	clock, ok := k.Runner().Clock().(interface {
		Now() time.Time
		Advance(time.Duration)
	})
	if !ok {
		return nil, apperr.New(apperr.Internal, "the outbox walk-through moves the workbench clock, and this runner's clock cannot move")
	}
	provider, crash := outbox.NewMemoryProvider(), &outbox.CrashSwitch{}
	settings.Providers = map[string]outbox.Provider{feat.Provider: provider}
	settings.Clock = clock
	settings.AfterCall = crash.AfterCall
	w := outbox.NewWorker(k.DB(), settings)
	if w.MaxAttempts() < 2 {
		return nil, apperr.New(apperr.ValidationFailed, "outbox.max_attempts: it is %d; the walk-through needs at least 2 to show a retry", w.MaxAttempts())
	}
	return &Outbox{k: k, owner: owner, prefix: keyPrefix, run: strings.ToLower(ulid.Make().String()), worker: w, provider: provider,
		crash: crash, clock: clock}, nil
}

// Done reports whether every step ran.
func (d *Outbox) Done() bool { return d.next >= len(model.OutboxSteps) }

// StepsDone is how many steps ran.
func (d *Outbox) StepsDone() int { return d.next }

// RecordKey is the Idempotency-Key of the demo's record.
func (d *Outbox) RecordKey() string { return d.prefix + ":record" }

// NotifyKey is the Idempotency-Key of this run's notification n (1, 2, 3).
func (d *Outbox) NotifyKey(n int) string {
	return fmt.Sprintf("%s:%s:notify-%d", d.prefix, d.run, n)
}

// Reused lists what this run found from an earlier one instead of writing it anew.
func (d *Outbox) Reused() []string { return append([]string{}, d.reused...) }

// Provider is the demo's simulated provider (what it was called with and delivered).
func (d *Outbox) Provider() *outbox.MemoryProvider { return d.provider }

// ClockMoved is how far the demo moved the workbench clock.
func (d *Outbox) ClockMoved() time.Duration { return d.moved }

// Next runs the next step.
func (d *Outbox) Next(ctx context.Context) (model.DemoStep, error) {
	if d.Done() {
		return model.DemoStep{}, fmt.Errorf("the demo has no more steps")
	}
	step := model.DemoStep{Step: model.OutboxSteps[d.next], Notes: []string{}, Checks: []model.DemoCheck{}}
	// One method per step, in OutboxSteps' order.
	run := [...]func(*Outbox, context.Context, *model.DemoStep) error{(*Outbox).createRecord, (*Outbox).notify,
		(*Outbox).replay, (*Outbox).deliver, (*Outbox).retry, (*Outbox).crashBeforeSettle, (*Outbox).redeliver,
		(*Outbox).exhaust, (*Outbox).settled}
	err := run[d.next](d, ctx, &step)
	if err != nil {
		return step, err
	}
	d.next++
	return step, nil
}

// RunOutbox runs every step of the outbox walk-through.
func RunOutbox(ctx context.Context, k *kernel.Kernel, owner, keyPrefix string, settings outbox.Options) ([]model.DemoStep, []string, error) {
	d, err := NewOutbox(k, owner, keyPrefix, settings)
	if err != nil {
		return nil, nil, err
	}
	var steps []model.DemoStep
	for !d.Done() {
		s, err := d.Next(ctx)
		if err != nil {
			return steps, d.Reused(), err
		}
		steps = append(steps, s)
	}
	return steps, d.Reused(), nil
}

// noteState is what the database holds about one notification now.
type noteState struct {
	execs    []model.Execution
	messages []model.OutboxMessage
	audit    []model.AuditEvent
	writers  []demorows.RowWriter
	settles  int
}

func (s noteState) exec() model.Execution {
	if len(s.execs) == 1 {
		return s.execs[0]
	}
	return model.Execution{}
}

func (s noteState) msg() model.OutboxMessage {
	if len(s.messages) == 1 {
		return s.messages[0]
	}
	return model.OutboxMessage{}
}

// xmins maps each table to the transaction ids that last wrote its rows of the key.
func (s noteState) xmin(table, what string) string {
	for _, w := range s.writers {
		if w.Table == table && (what == "" || w.What == what) {
			return w.Xmin
		}
	}
	return ""
}

// reread reads notification i's rows again, keeps its message as the notification's latest and
// shows its execution and message on step.
func (d *Outbox) reread(ctx context.Context, step *model.DemoStep, i int) (noteState, model.Execution, model.OutboxMessage, error) {
	st, err := d.read(ctx, d.notes[i].key)
	if err != nil {
		return st, model.Execution{}, model.OutboxMessage{}, err
	}
	e, m := st.exec(), st.msg()
	d.notes[i].msg = m
	step.Execution, step.Message = &e, &m
	return st, e, m, nil
}

func (d *Outbox) read(ctx context.Context, key string) (noteState, error) {
	var s noteState
	var err error
	if s.execs, err = demorows.ExecutionsForKey(ctx, d.k.DB(), d.owner, key); err != nil {
		return s, err
	}
	for _, e := range s.execs {
		m, err := demorows.OutboxForExecution(ctx, d.k.DB(), d.owner, e.ID)
		if err != nil {
			return s, err
		}
		s.messages = append(s.messages, m...)
	}
	if s.audit, err = readmodel.AuditForKey(ctx, d.k.DB(), d.owner, key); err != nil {
		return s, err
	}
	if s.writers, err = demorows.KeyWriters(ctx, d.k.DB(), d.owner, key); err != nil {
		return s, err
	}
	s.settles, err = outboxrows.CountSettleAudits(ctx, d.k.DB(), d.owner, key)
	return s, err
}

// pass runs the demo's worker over one message of the demo, and only that one.
func (d *Outbox) pass(ctx context.Context, m model.OutboxMessage) (outbox.Report, error) {
	return d.worker.RunScoped(ctx, outbox.Scope{OwnerID: d.owner, MessageIDs: []string{m.ID}}, 1)
}

// advanceTo moves the workbench clock to t when t is still ahead, and says so.
func (d *Outbox) advanceTo(step *model.DemoStep, t time.Time, why string) {
	now := d.k.Runner().Clock().Now()
	if !t.After(now) {
		return
	}
	by := t.Sub(now)
	d.clock.Advance(by)
	d.moved += by
	step.Notes = append(step.Notes, fmt.Sprintf("the workbench clock moves %s forward, %s", secondsText(by), why))
}

// secondsText is "0.52 s", "30 s".
func secondsText(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.0f s", d.Seconds())
}

// calls is what the provider saw of one idempotency id.
func (d *Outbox) calls(id string) string {
	n := d.provider.Calls(id)
	what := "nothing delivered"
	if d.provider.HasDelivered(id) {
		what = "delivered"
	}
	return fmt.Sprintf("provider: %d call(s) with idempotency id %s, %s", n, id, what)
}

// within reports whether delay is in [lo, hi], with the timestamps' microsecond of slack.
func within(delay, lo, hi time.Duration) bool {
	return delay >= lo-time.Millisecond && delay <= hi+time.Millisecond
}

// envelopeRecord is the record id an envelope references.
func envelopeRecord(raw json.RawMessage) string {
	var env struct {
		Result struct {
			RecordID string `json:"recordId"`
		} `json:"result"`
	}
	_ = json.Unmarshal(raw, &env)
	return env.Result.RecordID
}

func (d *Outbox) createRecord(ctx context.Context, step *model.DemoStep) error {
	key := d.RecordKey()
	res, err := d.k.Create(ctx, model.CreateInput{Owner: d.owner, Module: kernel.ModuleCommitment, Key: key, Title: "Outbox demo: tell the team the release is out",
		Payload: json.RawMessage(`{"status":"OPEN"}`)})
	if err != nil {
		return err
	}
	latest, err := readmodel.LatestRecord(ctx, d.k.DB(), store.RecordRef{Owner: d.owner, Module: kernel.ModuleCommitment, ID: res.Record.ID})
	if err != nil {
		return err
	}
	row, err := readmodel.GetKey(ctx, d.k.DB(), d.owner, key)
	if err != nil {
		return err
	}
	writers, err := demorows.KeyWriters(ctx, d.k.DB(), d.owner, key)
	if err != nil {
		return err
	}
	revisions := 0
	for _, w := range writers {
		if w.Table == "record_revision" {
			revisions++
		}
	}
	d.record, d.revision = &latest, latest.Revision
	step.Outcome, step.Result, step.Record = res.Outcome, model.OutcomeText(res.Outcome, nil), res.Record
	step.Notes = append(step.Notes, fmt.Sprintf("%s: COMMITMENT record %s at revision %d (key %s)", res.Outcome, res.Record.ID, res.Record.Revision, key))
	step.Checks = append(step.Checks,
		check(row.Status == "SUCCEEDED" && envelopeRecord(row.Response) == res.Record.ID && latest.ID == res.Record.ID,
			"the record and its key's result are committed", "idempotency_record %s %s → record %s; record %s at revision %d in the database",
			key, row.Status, envelopeRecord(row.Response), latest.ID, latest.Revision))
	if res.Outcome == idemtype.Replayed {
		step.Reused = fmt.Sprintf("record %s, created %s by an earlier run (its key %s replayed)", res.Record.ID,
			latest.CreatedAt.UTC().Format(time.RFC3339), key)
		d.reused = append(d.reused, step.Reused)
		step.Notes = append(step.Notes, "reused: "+step.Reused)
		step.Checks = append(step.Checks, check(revisions == 1, "a rerun reuses the record: the replay wrote no second revision",
			"record_revision rows carrying the key: %d", revisions))
	}
	return nil
}

func (d *Outbox) notify(ctx context.Context, step *model.DemoStep) error {
	key := d.NotifyKey(1)
	res, err := d.k.RunFeature(ctx, model.FeatureInput{Owner: d.owner, Module: kernel.ModuleCommitment, RecordID: d.record.ID, FeatureID: "F02", Key: key})
	if err != nil {
		return err
	}
	st, err := d.read(ctx, key)
	if err != nil {
		return err
	}
	latest, err := readmodel.LatestRecord(ctx, d.k.DB(), store.RecordRef{Owner: d.owner, Module: kernel.ModuleCommitment, ID: d.record.ID})
	if err != nil {
		return err
	}
	e, m := st.exec(), st.msg()
	d.notes = append(d.notes, notification{key: key, exec: e, msg: m})
	step.Outcome, step.Result, step.Record, step.Execution, step.Message = res.Outcome, model.OutcomeText(res.Outcome, res.Execution), res.Record, res.Execution, &m
	step.Notes = append(step.Notes, fmt.Sprintf("%s: execution %s, outbox message %s (key %s)", step.Result, res.Execution.ID, m.ID, key),
		"the client gets {record, execution PENDING}: the notification is accepted and on its way, not done")
	want := st.xmin("idempotency_record", "")
	same := want != ""
	var tables []string
	for _, w := range st.writers {
		same = same && w.Xmin == want
		tables = append(tables, w.Table)
	}
	step.Checks = append(step.Checks,
		check(len(st.execs) == 1 && e.ID == res.Execution.ID && e.Mode == "outbox", "F02 is an outbox feature: the request queues the call, it does not make it",
			"feature_execution rows of the key: %d, mode %s", len(st.execs), e.Mode),
		check(e.Status == "PENDING", "the execution is PENDING: accepted, not yet delivered", "feature_execution.status = %s", e.Status),
		check(len(st.messages) == 1 && m.Status == "PENDING" && m.Attempts == 0 && m.IdempotencyID == e.ID,
			"one outbox message, carrying the execution's id as the provider's idempotency id",
			"outbox_message rows of the execution: %d · provider %s · idempotency_id %s · %s, %d attempts", len(st.messages), m.Provider, m.IdempotencyID, m.Status, m.Attempts),
		check(same && len(st.writers) == 4 && st.xmin("outbox_message", "") != "" && st.xmin("audit_event", "FEATURE_F02_QUEUED") != "",
			"the message committed in the same transaction as the execution, the audit event and the key's result",
			"xmin %s on %s", want, strings.Join(tables, ", ")),
		check(latest.Revision == d.revision, "the record keeps its revision", "record.revision = %d (before the request: %d)", latest.Revision, d.revision),
		check(d.provider.Calls(e.ID) == 0, "no provider is called inside the transaction", "%s", d.calls(e.ID)))
	return nil
}

func (d *Outbox) replay(ctx context.Context, step *model.DemoStep) error {
	n := d.notes[0]
	before, err := d.read(ctx, n.key)
	if err != nil {
		return err
	}
	res, err := d.k.RunFeature(ctx, model.FeatureInput{Owner: d.owner, Module: kernel.ModuleCommitment, RecordID: d.record.ID, FeatureID: "F02", Key: n.key})
	if err != nil {
		return err
	}
	st, err := d.read(ctx, n.key)
	if err != nil {
		return err
	}
	m := st.msg()
	step.Outcome, step.Result, step.Record, step.Execution, step.Message = res.Outcome, model.OutcomeText(res.Outcome, res.Execution), res.Record, res.Execution, &m
	step.Notes = append(step.Notes, fmt.Sprintf("%s: the client gets execution %s again, as it is now", step.Result, res.Execution.ID))
	step.Checks = append(step.Checks,
		check(res.Outcome == idemtype.Replayed, "a replay returns the stored result", "outcome %s", res.Outcome),
		check(res.Execution.ID == n.exec.ID, "the same execution, still queued", "execution %s, %s", res.Execution.ID, res.Execution.Status),
		check(len(st.execs) == 1 && len(st.messages) == 1, "no second execution and no second message",
			"feature_execution rows of the key: %d · outbox_message rows: %d", len(st.execs), len(st.messages)),
		check(fmt.Sprint(st.writers) == fmt.Sprint(before.writers), "the replay wrote nothing",
			"audit events of the key: %s; every row's xmin as before", actions(st.audit)))
	return nil
}

func (d *Outbox) deliver(ctx context.Context, step *model.DemoStep) error {
	n := d.notes[0]
	rep, err := d.pass(ctx, n.msg)
	if err != nil {
		return err
	}
	st, err := d.read(ctx, n.key)
	if err != nil {
		return err
	}
	e, m := st.exec(), st.msg()
	step.Execution, step.Message = &e, &m
	step.Notes = append(step.Notes, fmt.Sprintf("worker pass: %d claimed, %d delivered (FOR UPDATE SKIP LOCKED, a short transaction of its own; the call runs after it committed)",
		rep.Claimed, rep.Delivered))
	request, settle := st.xmin("idempotency_record", ""), st.xmin("audit_event", "FEATURE_F02_DELIVERED")
	step.Checks = append(step.Checks,
		check(d.provider.Calls(m.IdempotencyID) == 1 && d.provider.HasDelivered(m.IdempotencyID) && m.IdempotencyID == e.ID,
			"the provider received the message's idempotency id", "%s", d.calls(m.IdempotencyID)),
		check(m.Status == "DELIVERED" && m.Attempts == 1 && m.LastError == nil, "the message is DELIVERED after one attempt",
			"outbox_message %s, attempts %d, last_error %s", m.Status, m.Attempts, lastError(m)),
		check(e.Status == "DELIVERED", "the execution is settled", "feature_execution.status = %s", e.Status),
		check(st.settles == 1 && actions(st.audit) == "FEATURE_F02_QUEUED, FEATURE_F02_DELIVERED", "the settle is audited once", "audit events of the key: %s", actions(st.audit)),
		check(settle != "" && settle != request && st.xmin("outbox_message", "") == settle && st.xmin("feature_execution", "") == settle,
			"the settle is a transaction of its own, after the request's", "message, execution and FEATURE_F02_DELIVERED: xmin %s; the request's key row: xmin %s", settle, request))
	return nil
}

func lastError(m model.OutboxMessage) string {
	if m.LastError == nil {
		return "none"
	}
	return fmt.Sprintf("%q", *m.LastError)
}

// queue runs notification n (2 or 3) and reads what it committed.
func (d *Outbox) queue(ctx context.Context, step *model.DemoStep, n int) (notification, error) {
	key := d.NotifyKey(n)
	res, err := d.k.RunFeature(ctx, model.FeatureInput{Owner: d.owner, Module: kernel.ModuleCommitment, RecordID: d.record.ID, FeatureID: "F02", Key: key})
	if err != nil {
		return notification{}, err
	}
	st, err := d.read(ctx, key)
	if err != nil {
		return notification{}, err
	}
	note := notification{key: key, exec: st.exec(), msg: st.msg()}
	if len(st.execs) != 1 || len(st.messages) != 1 {
		return note, apperr.New(apperr.Internal, "notification %s committed %d execution(s) and %d message(s), not one of each", key, len(st.execs), len(st.messages))
	}
	d.notes = append(d.notes, note)
	step.Outcome, step.Result, step.Record = res.Outcome, model.OutcomeText(res.Outcome, res.Execution), res.Record
	step.Notes = append(step.Notes, fmt.Sprintf("%s: execution %s, outbox message %s (key %s)", step.Result, note.exec.ID, note.msg.ID, key))
	return note, nil
}

func (d *Outbox) retry(ctx context.Context, step *model.DemoStep) error {
	n, err := d.queue(ctx, step, 2)
	if err != nil {
		return err
	}
	d.provider.AddFailures(1)
	step.Notes = append(step.Notes, "the provider is told to fail its next call")
	if _, err := d.pass(ctx, n.msg); err != nil {
		return err
	}
	st, e, m, err := d.reread(ctx, step, 1)
	if err != nil {
		return err
	}
	delay := m.NextAttemptAt.Sub(m.UpdatedAt)
	lo, hi := d.worker.BackoffRange(1)
	step.Checks = append(step.Checks,
		check(d.provider.Calls(m.IdempotencyID) == 1 && !d.provider.HasDelivered(m.IdempotencyID), "the call reached the provider and failed", "%s", d.calls(m.IdempotencyID)),
		check(m.Status == "PENDING" && m.Attempts == 1 && m.LastError != nil, "the message waits for a retry, with the failure recorded",
			"outbox_message %s, attempts %d of %d, last_error %s", m.Status, m.Attempts, d.worker.MaxAttempts(), lastError(m)),
		check(within(delay, lo, hi), "the retry comes after a backoff", "next attempt %s after the failure (attempt 1 backs off %s–%s)",
			secondsText(delay), secondsText(lo), secondsText(hi)),
		check(e.Status == "PENDING" && st.settles == 0, "nothing is settled yet", "feature_execution.status = %s; settle audit events of the key: %d", e.Status, st.settles))
	return nil
}

func (d *Outbox) crashBeforeSettle(ctx context.Context, step *model.DemoStep) error {
	n := d.notes[1]
	d.advanceTo(step, n.msg.NextAttemptAt, "to when the retry is due")
	d.crash.Set(true)
	rep, err := d.pass(ctx, n.msg)
	d.crash.Set(false)
	if err != nil {
		return err
	}
	st, e, m, err := d.reread(ctx, step, 1)
	if err != nil {
		return err
	}
	step.Notes = append(step.Notes, fmt.Sprintf("worker pass: %d claimed, %d abandoned between the provider call and the settle (a crash)", rep.Claimed, rep.Abandoned))
	held := m.NextAttemptAt.Sub(m.UpdatedAt)
	step.Checks = append(step.Checks,
		check(d.provider.Calls(m.IdempotencyID) == 2 && d.provider.HasDelivered(m.IdempotencyID), "the provider did the work", "%s", d.calls(m.IdempotencyID)),
		check(rep.Abandoned == 1 && m.Status == "PENDING" && m.Attempts == 2 && e.Status == "PENDING" && st.settles == 0,
			"the database does not know: nothing was settled", "outbox_message %s, attempts %d; feature_execution %s; settle audit events: %d",
			m.Status, m.Attempts, e.Status, st.settles),
		check(within(held, d.worker.Lease(), d.worker.Lease()), "the claim's lease hides the message until it runs out",
			"next_attempt_at = the claim + %s (the lease is %s)", secondsText(held), secondsText(d.worker.Lease())))
	return nil
}

func (d *Outbox) redeliver(ctx context.Context, step *model.DemoStep) error {
	n := d.notes[1]
	d.advanceTo(step, n.msg.NextAttemptAt, "past the crashed claim's lease")
	effects := d.provider.Delivered()
	if _, err := d.pass(ctx, n.msg); err != nil {
		return err
	}
	st, e, m, err := d.reread(ctx, step, 1)
	if err != nil {
		return err
	}
	step.Checks = append(step.Checks,
		check(d.provider.Calls(m.IdempotencyID) == 3 && m.IdempotencyID == e.ID, "the redelivery carries the same idempotency id", "%s", d.calls(m.IdempotencyID)),
		check(d.provider.HasDelivered(m.IdempotencyID) && d.provider.Delivered() == effects, "the provider deduplicates by the id: one effect",
			"effects at the provider: %d before the redelivery, %d after", effects, d.provider.Delivered()),
		check(m.Status == "DELIVERED" && m.Attempts == 3, "the message is DELIVERED", "outbox_message %s, attempts %d", m.Status, m.Attempts),
		check(e.Status == "DELIVERED" && st.settles == 1, "the execution is settled once", "feature_execution.status = %s; settle audit events of the key: %d", e.Status, st.settles))
	return nil
}

func (d *Outbox) exhaust(ctx context.Context, step *model.DemoStep) error {
	n, err := d.queue(ctx, step, 3)
	if err != nil {
		return err
	}
	last := d.worker.MaxAttempts()
	d.provider.AddFailures(last)
	step.Notes = append(step.Notes, fmt.Sprintf("the provider is told to fail its next %d calls (max attempts: %d)", last, last))
	m := n.msg
	var waits []string
	backoffs := true
	var moved time.Duration
	for attempt := 1; attempt <= last && m.Status == "PENDING"; attempt++ {
		if now := d.k.Runner().Clock().Now(); m.NextAttemptAt.After(now) {
			by := m.NextAttemptAt.Sub(now)
			d.clock.Advance(by)
			d.moved += by
			moved += by
		}
		if _, err := d.pass(ctx, m); err != nil {
			return err
		}
		msgs, err := demorows.OutboxForExecution(ctx, d.k.DB(), d.owner, n.exec.ID)
		if err != nil {
			return err
		}
		if len(msgs) != 1 {
			return apperr.New(apperr.Internal, "execution %s has %d outbox messages, not one", n.exec.ID, len(msgs))
		}
		m = msgs[0]
		if m.Status == "PENDING" {
			delay := m.NextAttemptAt.Sub(m.UpdatedAt)
			lo, hi := d.worker.BackoffRange(attempt)
			backoffs = backoffs && within(delay, lo, hi)
			waits = append(waits, secondsText(delay))
		}
	}
	if moved > 0 {
		step.Notes = append(step.Notes, fmt.Sprintf("the workbench clock moves %s forward in all, to each retry as it comes due", secondsText(moved)))
	}
	st, err := d.read(ctx, n.key)
	if err != nil {
		return err
	}
	e := st.exec()
	d.notes[2].msg = m
	step.Execution, step.Message = &e, &m
	step.Checks = append(step.Checks,
		check(d.provider.Calls(m.IdempotencyID) == last && !d.provider.HasDelivered(m.IdempotencyID), "every attempt reached the provider and failed", "%s", d.calls(m.IdempotencyID)),
		check(backoffs && len(waits) == last-1, "each retry waited its backoff, doubling",
			"waits after attempts 1–%d: %s (attempt n backs off %s·2^(n-1) ±%d %%, at most %s)", last-1, strings.Join(waits, ", "),
			secondsText(d.worker.Options().BaseBackoff), outbox.JitterPercent, secondsText(d.worker.Options().MaxBackoff)),
		check(m.Status == "FAILED" && m.Attempts == last && m.LastError != nil, "after the last attempt the message is FAILED",
			"outbox_message %s, attempts %d of %d, last_error %s", m.Status, m.Attempts, last, lastError(m)),
		check(e.Status == "FAILED" && st.settles == 1 && actions(st.audit) == "FEATURE_F02_QUEUED, FEATURE_F02_FAILED", "the execution is settled as FAILED, audited once",
			"feature_execution.status = %s; audit events of the key: %s", e.Status, actions(st.audit)))
	return nil
}

func (d *Outbox) settled(ctx context.Context, step *model.DemoStep) error {
	var execs, msgs, settles, effects []string
	all, once := true, true
	for i, n := range d.notes {
		st, err := d.read(ctx, n.key)
		if err != nil {
			return err
		}
		e, m := st.exec(), st.msg()
		want := "DELIVERED"
		if i == 2 {
			want = "FAILED"
		}
		all = all && e.Status == want && m.Status == want
		once = once && st.settles == 1
		execs = append(execs, fmt.Sprintf("notify-%d %s", i+1, e.Status))
		msgs = append(msgs, m.Status)
		settles = append(settles, fmt.Sprint(st.settles))
		if d.provider.HasDelivered(m.IdempotencyID) {
			effects = append(effects, fmt.Sprintf("notify-%d", i+1))
		}
	}
	first := d.notes[0]
	res, err := d.k.RunFeature(ctx, model.FeatureInput{Owner: d.owner, Module: kernel.ModuleCommitment, RecordID: d.record.ID, FeatureID: "F02", Key: first.key})
	if err != nil {
		return err
	}
	latest, err := readmodel.LatestRecord(ctx, d.k.DB(), store.RecordRef{Owner: d.owner, Module: kernel.ModuleCommitment, ID: d.record.ID})
	if err != nil {
		return err
	}
	step.Outcome, step.Result, step.Record, step.Execution = res.Outcome, model.OutcomeText(res.Outcome, res.Execution), res.Record, res.Execution
	step.Notes = append(step.Notes, fmt.Sprintf("%s: a replay of %s now tells the client the notification went out", step.Result, first.key))
	step.Checks = append(step.Checks,
		check(all, "every notification is settled, none PENDING", "feature_execution: %s; outbox_message: %s", strings.Join(execs, ", "), strings.Join(msgs, ", ")),
		check(once, "each is settled exactly once", "settle audit events per key: %s", strings.Join(settles, ", ")),
		check(res.Outcome == idemtype.Replayed && res.Execution.ID == first.exec.ID && res.Execution.Status == "DELIVERED",
			"a replay of the first key returns the same execution, now settled", "outcome %s: execution %s %s", res.Outcome, res.Execution.ID, res.Execution.Status),
		check(latest.Revision == d.revision, "the outbox never wrote the record", "record.revision = %d, as before the first notification", latest.Revision),
		check(len(effects) == 2 && d.provider.Delivered() == 2, "one effect per delivered notification, none for the FAILED one",
			"effects at the provider: %d (%s)", d.provider.Delivered(), strings.Join(effects, ", ")))
	if d.moved > 0 {
		step.Notes = append(step.Notes, fmt.Sprintf("the workbench clock was moved %s in all by this walk-through", secondsText(d.moved)))
	}
	return nil
}
