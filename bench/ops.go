package bench

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"

	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store"
)

// Owner is the owner every bench request writes as.
const Owner = "bench"

// The request bodies of the workloads: a small realistic NOTE and a MEM-001 text with messy
// whitespace for F01 (rewrite) to normalise.
var (
	notePayload = json.RawMessage(`{"text":"call the plumber about the kitchen tap","tags":["home","todo"],"priority":2}`)
	noteTitle   = "bench note"
	memPayload  = `{"originalContent":"Remember   to water  the plants\ton Sunday","currentContent":"Remember   to water  the plants\ton Sunday   morning"}`
	memTitle    = "bench memory"
)

// worker is one client goroutine's state; it persists across the slices of a cell so its
// latency buffer grows rarely (and its growth barely shows in allocations per op).
type worker struct {
	id      int
	clients int // concurrent clients of the current slice
	seq     int // ops this worker did in the cell (warm-up included)
	lat     []time.Duration
	keyBuf  []byte
}

// newKey returns a fresh random key (like the UUIDs clients send), one allocation.
func (w *worker) newKey(prefix string) string {
	b := append(w.keyBuf[:0], prefix...)
	b = strconv.AppendUint(b, mrand.Uint64(), 36)
	b = strconv.AppendUint(b, mrand.Uint64(), 36)
	w.keyBuf = b
	return string(b)
}

// op is one request of one side of a workload.
type op func(ctx context.Context, w *worker) error

// supply hands out MEM-001 records no other op has used, topped up in bulk between slices so the
// feature workload always runs on a fresh record without creating it inside the timed slice.
// Every record of a supply is the same revision 1 (title, payload, created at the supply's
// creation), so the limit side knows one without reading it.
type supply struct {
	prefix  string
	created time.Time
	next    atomic.Int64
	limit   atomic.Int64 // ids prefix+[0, limit) exist
	reused  atomic.Int64 // takes past limit (wrapped around: still correct, no longer fresh)
}

func (s *supply) id(n int64) string { return fmt.Sprintf("%s%010d", s.prefix, n) }

func (s *supply) take() string {
	n := s.next.Add(1) - 1
	if lim := s.limit.Load(); n >= lim {
		s.reused.Add(1)
		n %= lim
	}
	return s.id(n)
}

// ensure makes at least need unused records available.
func (s *supply) ensure(ctx context.Context, pool *pgxpool.Pool, need int) error {
	lim, next := s.limit.Load(), s.next.Load()
	if lim-next >= int64(need) {
		return nil
	}
	from := max(lim, next)
	to := from + int64(need) + int64(need)/2
	_, err := pool.Exec(ctx, `WITH r AS (
			INSERT INTO record (owner_id, id, module_code, revision, title, summary, payload, created_at, updated_at)
			SELECT $1, $2 || lpad(g::text, 10, '0'), 'MEM-001', 1, $6, '', $3::jsonb, $7::timestamptz, $7::timestamptz
			FROM generate_series($4::bigint, $5::bigint - 1) g
			RETURNING owner_id, id, module_code, revision, title, summary, payload, created_at, updated_at)
		INSERT INTO record_revision (owner_id, record_id, revision, snapshot, idempotency_key, created_at)
		SELECT owner_id, id, 1, jsonb_build_object('id', id, 'ownerId', owner_id, 'moduleCode', module_code,
			'revision', revision, 'title', title, 'summary', summary, 'payload', payload,
			'createdAt', created_at, 'updatedAt', updated_at), NULL, created_at
		FROM r`, Owner, s.prefix, memPayload, from, to, memTitle, s.created)
	if err != nil {
		return fmt.Errorf("bench: provision MEM-001 records: %w", err)
	}
	s.limit.Store(to)
	return nil
}

// fixtures is what the sides of every workload share: record supplies and committed keys to
// replay, one set per side so each side replays results it wrote itself (the limit reads the
// runner's key rows), and the runner's statements the limit side sends (learned before the
// cells, read-only afterwards).
type fixtures struct {
	nonce            string
	runnerRecords    *supply
	rawRecords       *supply
	limitRecords     *supply
	runnerReplayKeys []string
	rawReplayKeys    []string
	plans            limitPlans
}

func newFixtures() *fixtures {
	var b [3]byte
	_, _ = rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	created := time.Now().UTC().Truncate(time.Microsecond)
	return &fixtures{nonce: nonce,
		runnerRecords: &supply{prefix: "MR" + nonce + "-", created: created},
		rawRecords:    &supply{prefix: "MW" + nonce + "-", created: created},
		limitRecords:  &supply{prefix: "ML" + nonce + "-", created: created}}
}

// records is side's supply.
func (fx *fixtures) records(side sideKind) *supply {
	switch side {
	case sideRunner:
		return fx.runnerRecords
	case sideRaw:
		return fx.rawRecords
	}
	return fx.limitRecords
}

// target binds the workloads to one database: the measured pools, or the traced ones that count
// round trips. The runner and the limit side share the store's pool; raw has its own.
type target struct {
	k     *kernel.Kernel
	db    *store.DB
	pool  *pgxpool.Pool
	fx    *fixtures
	ids   *idGen
	limit limitInputs
}

func newTarget(db *store.DB, raw *pgxpool.Pool, fx *fixtures, memMaxContentLength int) (*target, error) {
	// Every bench client writes as one owner: the per-owner share of the pool (a fairness policy
	// between owners, half the pool by default) would throttle the runner's side only, so it is
	// the whole pool here, as the raw side has it.
	limits := idem.Limits{OwnerMaxConns: db.MaxConns()}
	reg := kernel.NewRegistry(kernel.NewRules(memMaxContentLength))
	k := kernel.New(db, reg, kernel.Options{Runner: idem.Options{Limits: limits}})
	in, err := newLimitInputs(reg)
	if err != nil {
		return nil, err
	}
	return &target{k: k, db: db, pool: raw, fx: fx, ids: newIDGen(), limit: in}, nil
}

// rawPool opens the hand-written side's own pool on dsn (traced when tracer is set).
func rawPool(ctx context.Context, dsn string, maxConns int32, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("bench: the database URL is not valid: %s", store.RedactDSN(dsn))
	}
	cfg.MaxConns = maxConns
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: raw pool: %w", err)
	}
	return pool, nil
}

// idGen makes ULIDs for the raw side exactly as the kernel does (monotonic, under a mutex).
type idGen struct {
	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
}

func newIDGen() *idGen { return &idGen{entropy: ulid.Monotonic(rand.Reader, 0)} }

func (g *idGen) newID(t time.Time) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return ulid.MustNew(ulid.Timestamp(t), g.entropy).String()
}

// ---- the runner side: the kernel, as users call it ----

func (t *target) runnerFreshKey(ctx context.Context, w *worker) error {
	res, err := t.k.Create(ctx, model.CreateInput{Owner: Owner, Module: kernel.ModuleNote, Key: w.newKey("fk-"),
		Title: noteTitle, Payload: notePayload})
	if err != nil {
		return err
	}
	return expect(res.Outcome, idemtype.Executed)
}

func (t *target) runnerFeatureRun(ctx context.Context, w *worker) error {
	return t.runnerFeature(ctx, t.fx.runnerRecords.take(), w.newKey("fr-"))
}

func (t *target) runnerFeature(ctx context.Context, recordID, key string) error {
	res, err := t.k.RunFeature(ctx, model.FeatureInput{Owner: Owner, Module: kernel.ModuleMem, RecordID: recordID,
		FeatureID: "F01", Key: key})
	if err != nil {
		return err
	}
	return expect(res.Outcome, idemtype.Executed)
}

func (t *target) runnerReplayHit(ctx context.Context, w *worker) error {
	keys := t.fx.runnerReplayKeys
	res, err := t.k.RunFeature(ctx, model.FeatureInput{Owner: Owner, Module: kernel.ModuleMem,
		RecordID: replayRecord(keys, w), FeatureID: "F01", Key: replayKey(keys, w)})
	if err != nil {
		return err
	}
	return expect(res.Outcome, idemtype.Replayed)
}

// Replay keys are "<recordId> <key>"; worker i of c uses keys i, i+c, i+2c… so no two clients
// replay the same key at once (which would JOIN a flight instead of reading the database).
func replayPair(keys []string, w *worker) string {
	per := max(len(keys)/w.clients, 1)
	return keys[(w.id+w.clients*(w.seq%per))%len(keys)]
}

func replayRecord(keys []string, w *worker) string {
	p := replayPair(keys, w)
	return p[:strings.IndexByte(p, ' ')]
}

func replayKey(keys []string, w *worker) string {
	p := replayPair(keys, w)
	return p[strings.IndexByte(p, ' ')+1:]
}

func expect(got, want idemtype.Outcome) error {
	if got != want {
		return fmt.Errorf("bench: outcome %s, want %s", got, want)
	}
	return nil
}

// ---- the raw side: the same statements a user would hand-write with pgx, one per round trip ----

const (
	rawReadKey = `SELECT operation, fingerprint, status, response, expires_at FROM idempotency_record
		WHERE owner_id = $1 AND idempotency_key = $2`
	rawReserve = `INSERT INTO idempotency_record (owner_id, idempotency_key, operation, fingerprint, status, created_at, expires_at, updated_at)
		VALUES ($1, $2, $3, $4, 'PROCESSING', $5, $6, $5) ON CONFLICT (owner_id, idempotency_key) DO NOTHING`
	rawInsertRecord = `INSERT INTO record (owner_id, id, module_code, revision, title, summary, payload, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`
	rawInsertRevision = `INSERT INTO record_revision (owner_id, record_id, revision, snapshot, idempotency_key, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`
	rawInsertAudit = `INSERT INTO audit_event (owner_id, id, module_code, record_id, action, revision, execution_id, idempotency_key, detail, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`
	rawSucceeded = `UPDATE idempotency_record SET status = 'SUCCEEDED', response = $3, updated_at = $4
		WHERE owner_id = $1 AND idempotency_key = $2`
	rawLockRecord = `SELECT id, owner_id, module_code, revision, title, summary, payload, created_at, updated_at
		FROM record WHERE owner_id = $1 AND module_code = $2 AND id = $3 FOR NO KEY UPDATE`
	rawUpdateRecord = `UPDATE record SET revision = $4, payload = $5, updated_at = $6
		WHERE owner_id = $1 AND module_code = $2 AND id = $3 AND revision = $7`
	rawInsertExecution = `INSERT INTO feature_execution (owner_id, id, module_code, record_id, feature_id, mode, status,
			record_revision, input, output, idempotency_key, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`
	rawReadRevision  = `SELECT snapshot FROM record_revision WHERE owner_id = $1 AND record_id = $2 AND revision = $3`
	rawReadExecution = `SELECT id, owner_id, module_code, record_id, feature_id, mode, status, record_revision, input, output,
			idempotency_key, created_at, updated_at
		FROM feature_execution WHERE owner_id = $1 AND module_code = $2 AND record_id = $3 AND id = $4`
)

var errRawHit = errors.New("bench: raw fresh key found an existing row")

type rawEnvelope struct {
	SchemaVersion int    `json:"schemaVersion"`
	Policy        string `json:"policy"`
	Result        any    `json:"result"`
}

type rawRecordRef struct {
	RecordID string `json:"recordId"`
	Revision int    `json:"revision"`
}

type rawExecutionRef struct {
	RecordID    string `json:"recordId"`
	Revision    int    `json:"revision"`
	ExecutionID string `json:"executionId"`
}

// rawFingerprint is what a naive implementation stores: SHA-256 of operation and body.
func rawFingerprint(operation string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(operation))
	h.Write([]byte{0})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// rawBeginReserved is the start every raw write shares, a statement per round trip: fingerprint
// the body, read the key (it must miss), BEGIN, and INSERT the reservation (it must win). The
// caller owns the transaction and rolls it back unless it commits.
func (t *target) rawBeginReserved(ctx context.Context, key, operation string, body []byte) (pgx.Tx, time.Time, error) {
	fp := rawFingerprint(operation, body)
	if err := t.rawMiss(ctx, key); err != nil {
		return nil, time.Time{}, err
	}
	tx, err := t.pool.Begin(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	now := time.Now()
	tag, err := tx.Exec(ctx, rawReserve, Owner, key, operation, fp, now, now.Add(idem.DefaultTTL))
	if err == nil && tag.RowsAffected() != 1 {
		err = errRawHit
	}
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, time.Time{}, err
	}
	return tx, now, nil
}

// rawMiss is the cache read every keyed request starts with; on the fresh paths it must miss.
func (t *target) rawMiss(ctx context.Context, key string) error {
	var op, fp, status string
	var resp []byte
	var exp time.Time
	err := t.pool.QueryRow(ctx, rawReadKey, Owner, key).Scan(&op, &fp, &status, &resp, &exp)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return errRawHit
}

func (t *target) rawFreshKey(ctx context.Context, w *worker) error {
	key := w.newKey("fk-")
	operation := model.OpCreate(kernel.ModuleNote)
	body, err := json.Marshal(map[string]any{"title": noteTitle, "payload": notePayload})
	if err != nil {
		return err
	}
	tx, now, err := t.rawBeginReserved(ctx, key, operation, body)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rec := model.Record{ID: t.ids.newID(now), OwnerID: Owner, ModuleCode: kernel.ModuleNote, Revision: 1, Title: noteTitle,
		Payload: notePayload, CreatedAt: now, UpdatedAt: now}
	if _, err := tx.Exec(ctx, rawInsertRecord, rec.OwnerID, rec.ID, rec.ModuleCode, rec.Revision, rec.Title, rec.Summary,
		rec.Payload, rec.CreatedAt, rec.UpdatedAt); err != nil {
		return err
	}
	snap, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, rawInsertRevision, Owner, rec.ID, 1, json.RawMessage(snap), key, now); err != nil {
		return err
	}
	detail, err := json.Marshal(map[string]any{"operation": operation})
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, rawInsertAudit, Owner, t.ids.newID(now), kernel.ModuleNote, rec.ID, "RECORD_CREATED", 1, nil, key,
		json.RawMessage(detail), now); err != nil {
		return err
	}
	env, err := json.Marshal(rawEnvelope{SchemaVersion: 1, Policy: kernel.PolicyRecordSnapshot, Result: rawRecordRef{RecordID: rec.ID, Revision: 1}})
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, rawSucceeded, Owner, key, json.RawMessage(env), time.Now()); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (t *target) rawFeatureRun(ctx context.Context, w *worker) error {
	return t.rawFeature(ctx, t.fx.rawRecords.take(), w.newKey("fr-"))
}

func (t *target) rawFeature(ctx context.Context, recordID, key string) error {
	operation := model.OpFeature(kernel.ModuleMem, recordID, "F01")
	body, err := json.Marshal(map[string]any{})
	if err != nil {
		return err
	}
	tx, now, err := t.rawBeginReserved(ctx, key, operation, body)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var rec model.Record
	if err := tx.QueryRow(ctx, rawLockRecord, Owner, kernel.ModuleMem, recordID).Scan(&rec.ID, &rec.OwnerID, &rec.ModuleCode,
		&rec.Revision, &rec.Title, &rec.Summary, &rec.Payload, &rec.CreatedAt, &rec.UpdatedAt); err != nil {
		return err
	}
	// F01 (rewrite): collapse the whitespace of currentContent.
	var payload map[string]any
	if err := json.Unmarshal(rec.Payload, &payload); err != nil {
		return err
	}
	cur, _ := payload["currentContent"].(string)
	rewritten := strings.Join(strings.Fields(cur), " ")
	payload["currentContent"] = rewritten
	if rec.Payload, err = json.Marshal(payload); err != nil {
		return err
	}
	output, err := json.Marshal(map[string]any{"charactersBefore": len([]rune(cur)), "charactersAfter": len([]rune(rewritten))})
	if err != nil {
		return err
	}
	from := rec.Revision
	rec.Revision++
	rec.UpdatedAt = now
	tag, err := tx.Exec(ctx, rawUpdateRecord, Owner, kernel.ModuleMem, recordID, rec.Revision, rec.Payload, now, from)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return errors.New("bench: raw feature run lost its record")
	}
	snap, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, rawInsertRevision, Owner, recordID, rec.Revision, json.RawMessage(snap), key, now); err != nil {
		return err
	}
	execID := t.ids.newID(now)
	if _, err := tx.Exec(ctx, rawInsertExecution, Owner, execID, kernel.ModuleMem, recordID, "F01", "internal", "SUCCEEDED",
		rec.Revision, json.RawMessage(body), json.RawMessage(output), key, now, now); err != nil {
		return err
	}
	detail, err := json.Marshal(map[string]any{"operation": operation, "featureId": "F01", "mode": "internal", "status": "SUCCEEDED"})
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, rawInsertAudit, Owner, t.ids.newID(now), kernel.ModuleMem, recordID, "FEATURE_F01_EXECUTED",
		rec.Revision, execID, key, json.RawMessage(detail), now); err != nil {
		return err
	}
	env, err := json.Marshal(rawEnvelope{SchemaVersion: 1, Policy: kernel.PolicyFeatureExecution,
		Result: rawExecutionRef{RecordID: recordID, Revision: rec.Revision, ExecutionID: execID}})
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, rawSucceeded, Owner, key, json.RawMessage(env), time.Now()); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// rawReplayHit is the three plain SELECTs of a replay, autocommit: the key row, the revision it
// references, the execution it references.
func (t *target) rawReplayHit(ctx context.Context, w *worker) error {
	keys := t.fx.rawReplayKeys
	recordID, key := replayRecord(keys, w), replayKey(keys, w)
	operation := model.OpFeature(kernel.ModuleMem, recordID, "F01")
	body, err := json.Marshal(map[string]any{})
	if err != nil {
		return err
	}
	fp := rawFingerprint(operation, body)
	var gotOp, gotFP, status string
	var resp []byte
	var exp time.Time
	if err := t.pool.QueryRow(ctx, rawReadKey, Owner, key).Scan(&gotOp, &gotFP, &status, &resp, &exp); err != nil {
		return err
	}
	if status != "SUCCEEDED" || gotOp != operation || gotFP != fp || !exp.After(time.Now()) {
		return errors.New("bench: raw replay found no usable result")
	}
	var env struct {
		Policy string          `json:"policy"`
		Result rawExecutionRef `json:"result"`
	}
	if err := json.Unmarshal(resp, &env); err != nil {
		return err
	}
	var snap []byte
	if err := t.pool.QueryRow(ctx, rawReadRevision, Owner, env.Result.RecordID, env.Result.Revision).Scan(&snap); err != nil {
		return err
	}
	var rec model.Record
	if err := json.Unmarshal(snap, &rec); err != nil {
		return err
	}
	var e model.Execution
	if err := t.pool.QueryRow(ctx, rawReadExecution, Owner, kernel.ModuleMem, env.Result.RecordID, env.Result.ExecutionID).Scan(
		&e.ID, &e.OwnerID, &e.ModuleCode, &e.RecordID, &e.FeatureID, &e.Mode, &e.Status, &e.RecordRevision, &e.Input, &e.Output,
		&e.IdempotencyKey, &e.CreatedAt, &e.UpdatedAt); err != nil {
		return err
	}
	if rec.Revision != env.Result.Revision || e.RecordRevision != rec.Revision {
		return errors.New("bench: raw replay read inconsistent rows")
	}
	return nil
}

// provisionReplayKeys commits n feature runs per side (each side through its own path) for the
// replay workload to restore.
func (t *target) provisionReplayKeys(ctx context.Context, n, concurrency int) error {
	fx := t.fx
	if err := fx.runnerRecords.ensure(ctx, t.pool, n); err != nil {
		return err
	}
	if err := fx.rawRecords.ensure(ctx, t.pool, n); err != nil {
		return err
	}
	fx.runnerReplayKeys, fx.rawReplayKeys = make([]string, n), make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, concurrency)
	for c := range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || errs[c] != nil {
					return
				}
				rr, rk := fx.runnerRecords.take(), fmt.Sprintf("rp-r-%s-%d", fx.nonce, i)
				if err := t.runnerFeature(ctx, rr, rk); err != nil {
					errs[c] = err
					return
				}
				wr, wk := fx.rawRecords.take(), fmt.Sprintf("rp-w-%s-%d", fx.nonce, i)
				if err := t.rawFeature(ctx, wr, wk); err != nil {
					errs[c] = err
					return
				}
				fx.runnerReplayKeys[i], fx.rawReplayKeys[i] = rr+" "+rk, wr+" "+wk
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench: provision replay keys: %w", err)
	}
	return nil
}
