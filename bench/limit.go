package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/jsonb"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/replay"
)

// The limit side is the physical limit of a write: the statements the runner's path sends for
// it, with the runner's arguments, in as few pipelined round trips as the write allows, on the
// runner's own pool. A create's prepare reads nothing, so its limit is one round trip: BEGIN, the
// transaction's settings (store's settings.go), the key read, the reservation, the work's writes
// (guarded on the reservation), SUCCEEDED, COMMIT. A feature run's new revision is a function
// of the stored record (its prepare reads it), so its limit is "read, then write": BEGIN, the
// settings, the key read, the reservation and the record's locking read (guarded on the
// reservation) in one round trip; the writes, SUCCEEDED and COMMIT in the next, sent as soon as
// the first answered. Nothing in a limit op waits on anything else: a fresh key is known to miss
// and a supply record's state is known (revision 1 of a fixed payload), so the new revision is
// computed before sending. What the runner costs beyond it is round trips and Go.
//
// The SQL texts are not copies: they are learned from a trace of the runner's own ops before
// the cells (learnPlans), by role, and the run checks after tracing both sides that the limit
// sent exactly the runner's statements with arguments of the same types, so neither can drift
// from the other unnoticed. For a replay the limit is what a replay must read — the key row and
// the rows its envelope points at (the revision with its parent, the execution), by the
// runner's own one statement — in one round trip with the transaction's BEGIN, settings and
// COMMIT, decoded into Go values and not checked.

// role names what a statement of a write path does.
type role string

const (
	roleReadKey         role = "read key"
	roleBegin           role = "begin"
	roleSettings        role = "settings"
	roleReserve         role = "reserve key"
	roleLockRecord      role = "lock record"
	roleInsertRecord    role = "insert record"
	roleUpdateRecord    role = "update record"
	roleInsertRevision  role = "insert revision"
	roleInsertExecution role = "insert execution"
	roleInsertAudit     role = "insert audit event"
	roleSucceeded       role = "record success"
	roleCommit          role = "commit"
)

// writePaths are the statements, in order, the limit side knows how to send for each write
// workload: the runner's path as SPEC §4.2 lays it out.
var writePaths = map[string][]role{
	FreshKey: {roleBegin, roleSettings, roleReadKey, roleReserve, roleInsertRecord, roleInsertRevision, roleInsertAudit, roleSucceeded,
		roleCommit},
	FeatureRun: {roleBegin, roleSettings, roleReadKey, roleReserve, roleLockRecord, roleUpdateRecord, roleInsertRevision, roleInsertExecution,
		roleInsertAudit, roleSucceeded, roleCommit},
	// A replay of a key the runner answered: its one read, in a transaction of the session's.
	ReplayHit: {roleBegin, roleSettings, roleReadKey, roleCommit},
}

// firstTrip is, for a write whose limit takes two round trips, the last role of the first: what
// the second's statements are computed from (a feature's new revision from the locked record).
var firstTrip = map[string]role{FeatureRun: roleLockRecord}

// classify names the role of one statement of the runner's write path ("" when it is none of
// them).
func classify(sql string) role {
	s := strings.Join(strings.Fields(sql), " ")
	// The runner names its table with its schema ("public"."idempotency_record"); the kernel's
	// own statements leave it to the session's search_path.
	u := qualifiedKeyTable.ReplaceAllString(strings.ToUpper(s), "IDEMPOTENCY_RECORD")
	has := func(sub string) bool { return strings.Contains(u, sub) }
	switch {
	case u == "BEGIN" || strings.HasPrefix(u, "BEGIN ISOLATION LEVEL"):
		return roleBegin
	case strings.HasPrefix(u, "SELECT PG_CATALOG.SET_CONFIG('SEARCH_PATH'"):
		return roleSettings
	case u == "COMMIT":
		return roleCommit
	case has("INSERT INTO IDEMPOTENCY_RECORD"):
		return roleReserve
	case has("UPDATE IDEMPOTENCY_RECORD SET STATUS = 'SUCCEEDED'"):
		return roleSucceeded
	case strings.HasPrefix(u, "SELECT") && has(" FROM RECORD ") && has("FOR NO KEY UPDATE"):
		// Before the key read: its guard reads the key row too.
		return roleLockRecord
	case strings.HasPrefix(u, "SELECT") && has(" FROM IDEMPOTENCY_RECORD"):
		return roleReadKey
	case has("UPDATE RECORD SET"):
		return roleUpdateRecord
	case has("INSERT INTO RECORD ("):
		return roleInsertRecord
	case has("INSERT INTO RECORD_REVISION"):
		return roleInsertRevision
	case has("INSERT INTO FEATURE_EXECUTION"):
		return roleInsertExecution
	case has("INSERT INTO AUDIT_EVENT"):
		return roleInsertAudit
	}
	return ""
}

// qualifiedKeyTable is the runner's table named with its schema, in upper case.
var qualifiedKeyTable = regexp.MustCompile(`(?:"[^"]*"\.)?"IDEMPOTENCY_RECORD"`)

// limitPlan is one write workload's statements as the runner sends them, by role.
type limitPlan map[role]string

// limitPlans are the learned plans of the write workloads.
type limitPlans map[string]limitPlan

// newLimitPlan checks that stmts (one runner op of workload, in order) are exactly the path the
// limit side knows, and keeps their texts.
func newLimitPlan(workload string, stmts []tracedStmt) (limitPlan, error) {
	want := writePaths[workload]
	got := make([]role, len(stmts))
	for i, s := range stmts {
		got[i] = classify(s.sql)
	}
	if !slices.Equal(got, want) {
		return nil, fmt.Errorf("bench: the runner's %s path now sends %s; the limit side (bench/limit.go) sends %s: "+
			"teach it the new path", workload, rolesLabel(got, stmts), rolesLabel(want, nil))
	}
	p := limitPlan{}
	for i, s := range stmts {
		p[got[i]] = s.sql
	}
	return p, nil
}

func rolesLabel(rs []role, stmts []tracedStmt) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = string(r)
		if r == "" {
			parts[i] = "(" + shortSQL(stmts[i].sql) + ")"
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// learnPlans runs one runner op of each write workload on t, whose pools tr traces, and keeps
// their statements in t's fixtures for every target sharing them.
func (t *target) learnPlans(ctx context.Context, tr *rtTracer) error {
	if err := t.fx.runnerRecords.ensure(ctx, t.pool, 2); err != nil {
		return err
	}
	plans := limitPlans{}
	replayRecord := t.fx.runnerRecords.take()
	learnReplay := func(ctx context.Context, _ *worker) error {
		// A key this runner answered: its replay is the read alone.
		if err := t.runnerFeature(ctx, replayRecord, "learn-replay"); err != nil {
			return err
		}
		tr.take()
		res, err := t.k.RunFeature(ctx, model.FeatureInput{Owner: Owner, Module: kernel.ModuleMem, RecordID: replayRecord,
			FeatureID: "F01", Key: "learn-replay"})
		if err != nil {
			return err
		}
		return expect(res.Outcome, idemtype.Replayed)
	}
	for _, wl := range []struct {
		name string
		op   op
	}{{FreshKey, t.runnerFreshKey}, {FeatureRun, t.runnerFeatureRun}, {ReplayHit, learnReplay}} {
		tr.take()
		if err := wl.op(ctx, &worker{clients: 1}); err != nil {
			return fmt.Errorf("bench: learn the runner's %s statements: %w", wl.name, err)
		}
		p, err := newLimitPlan(wl.name, flatten(tr.take()))
		if err != nil {
			return err
		}
		plans[wl.name] = p
	}
	t.fx.plans = plans
	return nil
}

// sameStatements reports how the limit op's statements differ from the runner op's (nil: the
// same texts in the same order, each with as many arguments of the same Go types).
func sameStatements(workload string, runner, limit []tracedStmt) error {
	if len(runner) != len(limit) {
		return fmt.Errorf("bench: the %s limit sent %d statements, the runner %d", workload, len(limit), len(runner))
	}
	for i := range runner {
		r, l := runner[i], limit[i]
		if r.sql != l.sql {
			return fmt.Errorf("bench: statement %d of the %s limit is %q, the runner's is %q", i+1, workload, shortSQL(l.sql), shortSQL(r.sql))
		}
		if !slices.Equal(r.argTypes, l.argTypes) {
			return fmt.Errorf("bench: statement %d of the %s limit (%s) has arguments %v, the runner's %v", i+1, workload,
				classify(r.sql), l.argTypes, r.argTypes)
		}
	}
	return nil
}

// limitInputs are what every limit op of a workload sends alike, computed once the way the
// kernel computes them per request.
type limitInputs struct {
	createOp          string
	createFingerprint string
	notePayload       json.RawMessage // canonical, as the kernel stores it
	createAudit       json.RawMessage
	featureBody       []byte // the canonical body of a feature run without input
	featureInput      json.RawMessage
	// memF01 is MEM-001's F01: each limit run applies it to the record it read (kernel.ApplyInternal),
	// as hand-written code would have to — its next payload is a function of the stored one.
	memF01 kernel.Feature
}

var (
	recordFields    = []string{"recordId", "revision"}
	executionFields = []string{"recordId", "revision", "executionId"}
)

// newLimitInputs computes the fixed parts of the limit side's writes with the kernel's exported
// pieces: the JSON boundary, MEM-001's F01, the fingerprint.
func newLimitInputs(reg *kernel.Registry) (limitInputs, error) {
	var in limitInputs
	var err error
	if in.notePayload, err = model.CanonicalObject("payload", notePayload); err != nil {
		return in, err
	}
	in.createOp = model.OpCreate(kernel.ModuleNote)
	body := jsonb.AppendObject(nil, jsonb.Member{Name: "title", Value: jsonb.AppendString(nil, noteTitle)},
		jsonb.Member{Name: "payload", Value: in.notePayload})
	in.createFingerprint = idem.Fingerprint(in.createOp, body)
	in.createAudit = auditDetail("operation", in.createOp)
	in.featureBody = jsonb.AppendObject(nil)
	in.featureInput = json.RawMessage(`{}`)

	mod, err := reg.Module(kernel.ModuleMem)
	if err != nil {
		return in, err
	}
	f01, ok := mod.Feature("F01")
	if !ok || f01.Apply == nil {
		return in, errors.New("bench: MEM-001 has no internal feature F01")
	}
	in.memF01 = f01
	return in, nil
}

// auditDetail is the kernel's audit detail: an object of the given name/value strings.
func auditDetail(nameValues ...string) json.RawMessage {
	ms := make([]jsonb.Member, 0, len(nameValues)/2)
	for i := 0; i+1 < len(nameValues); i += 2 {
		ms = append(ms, jsonb.Member{Name: nameValues[i], Value: jsonb.AppendString(nil, nameValues[i+1])})
	}
	return jsonb.AppendObject(nil, ms...)
}

// refJSON is a result reference as the kernel's policies write it (executionID "": none): the
// runner's Serialize, for the ids the limit makes.
func refJSON(recordID string, revision int, executionID string) []byte {
	b := append(make([]byte, 0, 64+len(recordID)+len(executionID)), `{"recordId":`...)
	b = strconv.AppendInt(append(jsonb.AppendString(b, recordID), `,"revision":`...), int64(revision), 10)
	if executionID != "" {
		b = jsonb.AppendString(append(b, `,"executionId":`...), executionID)
	}
	return append(b, '}')
}

// limitNow is the runner's clock: UTC at PostgreSQL's precision.
func limitNow() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func (t *target) limitFreshKey(ctx context.Context, w *worker) error {
	return t.limitCreate(ctx, w.newKey("fl-"))
}

// limitCreate is the runner's create of the bench NOTE under key, in one round trip.
func (t *target) limitCreate(ctx context.Context, key string) error {
	p, in := t.fx.plans[FreshKey], &t.limit
	if p == nil {
		return errors.New("bench: the limit side has not learned the runner's statements")
	}
	now := limitNow()
	rec := model.Record{ID: t.ids.newID(now), OwnerID: Owner, ModuleCode: kernel.ModuleNote, Revision: 1, Title: noteTitle,
		Payload: in.notePayload, CreatedAt: now, UpdatedAt: now}
	snap, err := store.AppendSnapshot(nil, rec)
	if err != nil {
		return err
	}
	env, err := idem.BuildEnvelope(kernel.PolicyRecordSnapshot, recordFields, refJSON(rec.ID, rec.Revision, ""))
	if err != nil {
		return err
	}
	// Pointers go as the values they point to, as the store's batch sends them.
	recordID, revision := rec.ID, rec.Revision
	var b pgx.Batch
	b.Queue(p[roleBegin])
	_, settings := t.db.TxSettings()
	b.Queue(p[roleSettings], settings...)
	b.Queue(p[roleReadKey], Owner, key, kernel.ModuleNote)
	b.Queue(p[roleReserve], Owner, key, in.createOp, in.createFingerprint, now, now.Add(idem.DefaultTTL))
	// The writes travel behind the reservation, each guarded on it: the key is their last argument.
	b.Queue(p[roleInsertRecord], rec.OwnerID, rec.ID, rec.ModuleCode, rec.Revision, rec.Title, rec.Summary, rec.Payload,
		rec.CreatedAt, rec.UpdatedAt, key)
	b.Queue(p[roleInsertRevision], rec.OwnerID, rec.ID, rec.Revision, json.RawMessage(snap), key, rec.UpdatedAt, key)
	b.Queue(p[roleInsertAudit], Owner, t.ids.newID(now), kernel.ModuleNote, recordID, "RECORD_CREATED", revision,
		nil, key, in.createAudit, now, key)
	b.Queue(p[roleSucceeded], Owner, key, env, limitNow())
	b.Queue(p[roleCommit])
	br := t.db.SendBatchAsIs(ctx, &b)
	return readLimit(br, writePaths[FreshKey], "", nil)
}

func (t *target) limitFeatureRun(ctx context.Context, w *worker) error {
	return t.limitFeature(ctx, t.fx.limitRecords.take(), w.newKey("fl-"))
}

// limitFeature is the runner's F01 run on recordID (a limit supply record at revision 1) under
// key, in two round trips: the first reads the key, reserves it and locks the record; F01 is
// applied to the payload that read returned; the second writes the next revision, the
// execution, the audit event and SUCCEEDED, and commits.
func (t *target) limitFeature(ctx context.Context, recordID, key string) error {
	p, in := t.fx.plans[FeatureRun], &t.limit
	if p == nil {
		return errors.New("bench: the limit side has not learned the runner's statements")
	}
	op := model.OpFeature(kernel.ModuleMem, recordID, "F01")
	now := limitNow()
	var read, b pgx.Batch
	read.Queue(p[roleBegin])
	_, settings := t.db.TxSettings()
	read.Queue(p[roleSettings], settings...)
	read.Queue(p[roleReadKey], Owner, key, kernel.ModuleMem)
	read.Queue(p[roleReserve], Owner, key, op, idem.Fingerprint(op, in.featureBody), now, now.Add(idem.DefaultTTL))
	read.Queue(p[roleLockRecord], Owner, kernel.ModuleMem, recordID, key, Owner)
	// Read, then write: two round trips on one connection, the second sent when the first answered.
	conn, err := t.db.AcquireAsIs(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	path := writePaths[FeatureRun]
	split := slices.Index(path, firstTrip[FeatureRun]) + 1
	var locked model.Record
	if err := readLimit(conn.SendBatch(ctx, &read), path[:split], recordID, &locked); err != nil {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "rollback")
		return err
	}
	// The record's next revision as F01 writes it, from the payload just read.
	next, output, err := kernel.ApplyInternal(in.memF01, locked.Payload, in.featureInput)
	if err != nil {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "rollback")
		return err
	}
	rec := locked
	rec.Revision, rec.Payload, rec.UpdatedAt = locked.Revision+1, next, now
	snap, err := store.AppendSnapshot(nil, rec)
	if err != nil {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "rollback")
		return err
	}
	exec := model.Execution{ID: t.ids.newID(now), OwnerID: Owner, ModuleCode: kernel.ModuleMem, RecordID: recordID, FeatureID: "F01",
		Mode: "internal", Status: "SUCCEEDED", RecordRevision: rec.Revision, Input: in.featureInput, Output: output,
		IdempotencyKey: &key, CreatedAt: now, UpdatedAt: now}
	env, err := idem.BuildEnvelope(kernel.PolicyFeatureExecution, executionFields, refJSON(recordID, rec.Revision, exec.ID))
	if err != nil {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "rollback")
		return err
	}
	rid, revision, execID := recordID, rec.Revision, exec.ID
	b.Queue(p[roleUpdateRecord], rec.OwnerID, rec.ModuleCode, rec.ID, rec.Revision, rec.Title, rec.Summary, rec.Payload,
		rec.UpdatedAt, 1)
	b.Queue(p[roleInsertRevision], rec.OwnerID, rec.ID, rec.Revision, json.RawMessage(snap), key, rec.UpdatedAt)
	b.Queue(p[roleInsertExecution], exec.OwnerID, exec.ID, exec.ModuleCode, exec.RecordID, exec.FeatureID, exec.Mode, exec.Status,
		exec.RecordRevision, exec.Input, exec.Output, key, exec.CreatedAt, exec.UpdatedAt)
	b.Queue(p[roleInsertAudit], Owner, t.ids.newID(now), kernel.ModuleMem, rid, "FEATURE_F01_EXECUTED", revision, execID, key,
		auditDetail("operation", op, "featureId", "F01", "mode", exec.Mode, "status", exec.Status), now)
	b.Queue(p[roleSucceeded], Owner, key, env, limitNow())
	b.Queue(p[roleCommit])
	if err := readLimit(conn.SendBatch(ctx, &b), path[split:], recordID, nil); err != nil {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "rollback")
		return err
	}
	return nil
}

// readLimit reads the results of a limit batch (the roles of path) and checks each as the
// runner would: the key read misses, the reservation wins, the locked record is the expected
// revision 1 (read into locked), every write succeeds (the guarded ones fail on the server
// otherwise), COMMIT commits.
func readLimit(br pgx.BatchResults, path []role, recordID string, locked *model.Record) (err error) {
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	for _, r := range path {
		switch r {
		case roleReadKey:
			rows, err := br.Query()
			if err != nil {
				return err
			}
			found := rows.Next()
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if found {
				return errors.New("bench: the limit's fresh key was already there")
			}
		case roleReserve:
			var reserved bool
			var snapshot string
			if err := br.QueryRow().Scan(&reserved, &snapshot); err != nil {
				return fmt.Errorf("%s: %w", r, err)
			}
			if !reserved {
				return errors.New("bench: the limit's reservation lost")
			}
		case roleLockRecord:
			var rec model.Record
			if err := br.QueryRow().Scan(&rec.ID, &rec.OwnerID, &rec.ModuleCode, &rec.Revision, &rec.Title, &rec.Summary, &rec.Payload,
				&rec.CreatedAt, &rec.UpdatedAt); err != nil {
				return fmt.Errorf("%s %s: %w", r, recordID, err)
			}
			if rec.Revision != 1 {
				return fmt.Errorf("bench: the limit's record %s is at revision %d, not 1", recordID, rec.Revision)
			}
			if locked != nil {
				*locked = rec
			}
		case roleCommit:
			tag, err := br.Exec()
			if err != nil {
				return fmt.Errorf("%s: %w", r, err)
			}
			if tag.String() != "COMMIT" {
				return fmt.Errorf("bench: the limit's transaction did not commit (%s)", tag)
			}
		default:
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("%s: %w", r, err)
			}
		}
	}
	return nil
}

// limitReplayHit is what a replay must read, in one round trip on the runner's pool: the key row
// and the rows its envelope points at, by the runner's own statement, in a transaction of the
// session's (BEGIN, settings, the read, COMMIT), decoded into the Go values the runner decodes
// them into (replay.ScanExecution). Nothing is checked or restored: no fingerprint, no
// digest, no snapshot.
func (t *target) limitReplayHit(ctx context.Context, w *worker) (err error) {
	p := t.fx.plans[ReplayHit]
	if p == nil {
		return errors.New("bench: the limit side has not learned the runner's statements")
	}
	key := replayKey(t.fx.runnerReplayKeys, w)
	var b pgx.Batch
	b.Queue(p[roleBegin])
	_, settings := t.db.TxSettings()
	b.Queue(p[roleSettings], settings...)
	b.Queue(p[roleReadKey], Owner, key, kernel.ModuleMem)
	b.Queue(p[roleCommit])
	br := t.db.SendBatchAsIs(ctx, &b)
	defer func() {
		if cerr := br.Close(); err == nil {
			err = cerr
		}
	}()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	r, found, err := replay.ScanExecution(br.QueryRow())
	if err != nil {
		return err
	}
	if !found || r.Key.Status != "SUCCEEDED" || r.Revision == nil || r.Execution == nil {
		return errors.New("bench: the limit's replay found no result")
	}
	_, err = br.Exec()
	return err
}
