package soak

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/outbox"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/outboxrows"
	"github.com/idemwork/idemwork/store/records"
	"github.com/idemwork/idemwork/store/verifyrows"
	"github.com/idemwork/idemwork/storm"
	"github.com/idemwork/idemwork/storm/stormtypes"
	"github.com/idemwork/idemwork/verify"
)

// Fault is a kind of fault the soak injects.
type Fault string

// The faults of `idemwork soak --faults`.
const (
	// KillChild sends SIGKILL to one child process of a multi-process storm.
	KillChild Fault = "kill-child"
	// Terminate ends sessions of the database with pg_terminate_backend, mid-transaction too.
	Terminate Fault = "terminate"
	// Restart stops the database server immediately (no checkpoint: crash recovery) and starts
	// it again.
	Restart Fault = "restart"
	// KillServer sends SIGKILL to the `idemwork serve` process HTTP rounds go to, and starts a
	// new one after the round.
	KillServer Fault = "kill-server"
)

// AllFaults are every fault kind, in report order.
var AllFaults = []Fault{KillChild, Terminate, Restart, KillServer}

// The faults of `idemwork soak --failover`, on a pg_auto_failover formation (Options.Failover).
const (
	// Failover is a planned failover: `pg_autoctl perform failover`, the secondary promoted
	// and the old primary demoted to its secondary.
	Failover Fault = "failover"
	// KillPrimary kills the primary's node (keeper, postmaster and backends at once): the
	// monitor promotes the secondary, an unplanned failover; the killed node then rejoins.
	KillPrimary Fault = "kill-primary"
)

// FailoverFaults are the faults --failover adds.
var FailoverFaults = []Fault{Failover, KillPrimary}

// FailoverControl moves a formation's primary for the failover faults. Each call returns once
// the new primary accepts writes.
type FailoverControl interface {
	PlannedFailover(ctx context.Context) error
	KillPrimary(ctx context.Context) error
}

// ParseFaults reads a comma-separated list of fault kinds ("" or "none" for none).
func ParseFaults(s string) ([]Fault, error) {
	if s == "" || s == "none" {
		return nil, nil
	}
	var out []Fault
	for _, part := range strings.Split(s, ",") {
		f := Fault(strings.TrimSpace(part))
		if !slices.Contains(AllFaults, f) && !slices.Contains(FailoverFaults, f) {
			return nil, apperr.New(apperr.Usage, "--faults: %q is not a fault; want a comma-separated list of kill-child, terminate, restart, kill-server, failover, kill-primary (or none)", part)
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// MaxRounds bounds one soak.
const MaxRounds = 1_000_000

// Options configures Run.
type Options struct {
	Rounds int
	Faults []Fault
	// Rates are the faults' chances per round (nil: DefaultRates).
	Rates map[Fault]float64
	// Seed makes the rounds' choices reproducible (0: a random seed, reported in the result).
	Seed uint64
	// Kernel writes the in-process rounds; its database is the one soaked and verified.
	Kernel *kernel.Kernel
	// DSN is what child processes and the serve process connect with.
	DSN string
	// Executable is this binary (default os.Executable()); ChildEnv extra environment for the
	// processes it starts.
	Executable string
	ChildEnv   []string
	// Restart restarts the database server immediately and returns once it accepts connections
	// again; nil makes the restart fault unavailable.
	Restart func(ctx context.Context) error
	// Failover moves the primary of the pg_auto_failover formation DSN reaches; nil makes the
	// failover faults unavailable.
	Failover FailoverControl
	// Progress receives a line every ProgressEvery rounds (nil: none).
	Progress      io.Writer
	ProgressEvery int
}

// Result is SPEC §10.2's {"rounds", "requests", "faults", "executions", "duplicates",
// "violations", "tookMs"} plus what explains them.
type Result struct {
	Rounds int `json:"rounds"`
	// Requests counts every request sent: the storms' and the retries that learned outcomes.
	Requests int `json:"requests"`
	// Faults counts the faults injected by kind: children killed, sessions terminated, server
	// restarts, serve processes killed.
	Faults map[string]int `json:"faults"`
	// Executions counts the committed executions of the rounds' keys, read from the database
	// (one per round when all is well); Duplicates those beyond the first of a key.
	Executions int64 `json:"executions"`
	Duplicates int64 `json:"duplicates"`
	// Violations counts the invariants verify found broken, plus the rounds whose outcome could
	// not be learned or whose responses contradict the database.
	Violations int64   `json:"violations"`
	TookMs     float64 `json:"tookMs"`

	Seed uint64 `json:"seed"`
	// Outcomes counts the faulted storms' requests by outcome or error code.
	Outcomes map[string]int `json:"outcomes"`
	// Retries counts the requests that learned a round's outcome after its faults.
	Retries int `json:"retries"`
	// Paths and Ops count the rounds by how requests travelled and what they wrote.
	Paths map[string]int `json:"paths"`
	Ops   map[string]int `json:"ops"`
	// Outbox is what the delivery worker did meanwhile (and in the drain after the last round).
	Outbox outbox.Report `json:"outbox"`
	// OutboxMessages reconciles the messages the rounds queued with what became of them.
	OutboxMessages OutboxTally `json:"outboxMessages"`
	// Verify is the check of the soak's own rows (its owners), after the last round: its
	// violations are the soak's and count in Violations.
	Verify VerifySummary `json:"verify"`
	// PreExisting is verify --all before the first round: what the database held already, never
	// counted against the soak. AfterAll is verify --all after the last round, for comparison.
	PreExisting VerifySummary `json:"preExisting"`
	AfterAll    VerifySummary `json:"afterAll"`
	// Problems are up to 10 examples of what went wrong.
	Problems []string `json:"problems"`
}

// VerifySummary is the part of a verify a soak reports.
type VerifySummary struct {
	Checked    map[string]int64  `json:"checked"`
	Violations int64             `json:"violations"`
	Failed     []model.Invariant `json:"failed"`
	TookMs     float64           `json:"tookMs"`
}

func summary(rep model.InvariantReport) VerifySummary {
	s := VerifySummary{Checked: rep.Checked, Violations: rep.Violations, Failed: rep.Failed(), TookMs: rep.TookMs}
	if s.Failed == nil {
		s.Failed = []model.Invariant{}
	}
	return s
}

// OutboxTally is what became of the outbox messages the rounds queued, read from the database
// after the worker drained them: Queued = Delivered + Failed + Pending, each named where not
// delivered.
type OutboxTally struct {
	Queued    int `json:"queued"`
	Delivered int `json:"delivered"`
	Failed    int `json:"failed"`
	Pending   int `json:"pending"`
	// FailedIDs and PendingIDs name the messages (at most 20 each).
	FailedIDs  []string `json:"failedIds"`
	PendingIDs []string `json:"pendingIds"`
	// Balanced is Queued = Delivered + Failed + Pending.
	Balanced bool `json:"balanced"`
}

// OK reports whether the soak passed: no duplicate and no violation.
func (r Result) OK() bool { return r.Duplicates == 0 && r.Violations == 0 }

// Paths a round's requests take.
const (
	pathShared    = "inproc"
	pathNoShare   = "inproc-no-share"
	pathHTTP      = "http"
	pathProcesses = "processes"
)

// Operations a round writes.
const (
	opCreate     = "create"
	opPatch      = "patch"
	opArchive    = "note-F01"
	opRewrite    = "mem-F01"
	opBlocked    = "mem-F02-blocked"
	opOutbox     = "commitment-F02-outbox"
	ownersPerRun = 6
)

type owner struct {
	id, token             string
	note, mem, commitment string
}

type engine struct {
	opts        Options
	k           *kernel.Kernel
	env         storm.Env
	envChildren storm.Env
	// mark is the NAME=value every worker process of this soak carries in its environment.
	mark  string
	rng   *mrand.Rand
	runID string

	owners []owner
	srv    *server
	ctl    *control
	dir    string

	res      Result
	mu       sync.Mutex // res.Faults, res.Problems from fault goroutines
	wall     map[string]time.Duration
	provider *outbox.MemoryProvider
}

// Run soaks opts.Kernel's database and returns the result (with err only when the soak could
// not run at all: a failing soak is a Result whose OK is false).
func Run(ctx context.Context, opts Options) (Result, error) {
	start := time.Now()
	if opts.Rounds < 1 || opts.Rounds > MaxRounds {
		return Result{}, apperr.New(apperr.Usage, "--rounds: want 1-%d, got %d", MaxRounds, opts.Rounds)
	}
	if opts.Kernel == nil || opts.DSN == "" {
		return Result{}, errors.New("soak: Options.Kernel and Options.DSN are required")
	}
	if slices.Contains(opts.Faults, Restart) && opts.Restart == nil {
		return Result{}, apperr.New(apperr.Usage, "--faults restart restarts the server: it needs the embedded cluster (drop --dsn, or leave restart out)")
	}
	if opts.Failover == nil && slices.ContainsFunc(opts.Faults, func(f Fault) bool { return slices.Contains(FailoverFaults, f) }) {
		return Result{}, apperr.New(apperr.Usage, "--faults failover and kill-primary move a pg_auto_failover formation's primary: run soak with --failover")
	}
	if opts.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return Result{}, fmt.Errorf("soak: find this binary: %w", err)
		}
		opts.Executable = exe
	}
	if opts.Rates == nil {
		opts.Rates = DefaultRates
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = 500
	}
	if opts.Seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		opts.Seed = binary.LittleEndian.Uint64(b[:]) | 1
	}
	e := &engine{opts: opts, k: opts.Kernel, rng: mrand.New(mrand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		wall: map[string]time.Duration{}, provider: outbox.NewMemoryProvider()}
	// The run's keys are its own even when a seed repeats the choices of an earlier run.
	var id [4]byte
	_, _ = rand.Read(id[:])
	e.runID = fmt.Sprintf("%x", id)
	e.res = Result{Seed: opts.Seed, Faults: map[string]int{}, Outcomes: map[string]int{}, Paths: map[string]int{}, Ops: map[string]int{}, Problems: []string{}}
	for _, f := range opts.Faults {
		e.res.Faults[string(f)] = 0
	}
	dir, err := os.MkdirTemp("", "idemwork-soak-")
	if err != nil {
		return Result{}, err
	}
	e.dir = dir
	defer os.RemoveAll(dir)

	// What the database held before: reported apart, never the soak's.
	pre, err := e.retryVerify(ctx, "")
	if err != nil {
		return Result{}, fmt.Errorf("soak: the verify before the first round failed: %w", err)
	}
	e.res.PreExisting = summary(pre)

	if err := e.setUp(ctx); err != nil {
		e.tearDown()
		return Result{}, err
	}
	// The delivery worker runs through every fault too; its settles are fenced.
	wctx, stopWorker := context.WithCancel(ctx)
	var worker sync.WaitGroup
	worker.Go(func() { e.deliver(wctx) })

	for i := 0; i < opts.Rounds && ctx.Err() == nil; i++ {
		e.round(ctx, i)
		e.res.Rounds++
		if opts.Progress != nil && (i+1)%opts.ProgressEvery == 0 {
			fmt.Fprintf(opts.Progress, "soak: round %d/%d, %d requests, faults %v, %d executions, %d duplicates, %d problems, %.0f s\n",
				i+1, opts.Rounds, e.res.Requests, e.faultCounts(), e.res.Executions, e.res.Duplicates, len(e.res.Problems), time.Since(start).Seconds())
		}
	}
	stopWorker()
	worker.Wait()
	e.tearDown()
	if ctx.Err() != nil {
		return e.res, ctx.Err()
	}
	// The last rounds' messages are delivered before the tally: claims whose lease a fault cut
	// short come due again within a lease and a backoff.
	if err := e.drainOutbox(ctx, 30*time.Second); err != nil {
		return e.res, err
	}

	// Then every invariant of the soak's own rows, after the last fault: each owner's.
	own := model.InvariantReport{Checked: map[string]int64{}}
	for _, o := range e.owners {
		rep, err := e.retryVerify(ctx, o.id)
		if err != nil {
			return e.res, fmt.Errorf("soak: the final verify failed: %w", err)
		}
		own = merge(own, rep)
	}
	e.res.Verify = summary(own)
	e.res.Violations += own.Violations
	for _, inv := range own.Failed() {
		e.problem("verify: %s: %d violation(s), e.g. %+v", inv.Name, inv.Count, inv.Examples[0])
	}
	after, err := e.retryVerify(ctx, "")
	if err != nil {
		return e.res, fmt.Errorf("soak: the final verify failed: %w", err)
	}
	e.res.AfterAll = summary(after)
	e.res.TookMs = float64(time.Since(start).Milliseconds())
	return e.res, nil
}

func (e *engine) faultCounts() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps(e.res.Faults)
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (e *engine) countFault(f Fault, n int) {
	if n <= 0 {
		return
	}
	e.mu.Lock()
	e.res.Faults[string(f)] += n
	e.mu.Unlock()
}

// problem records a violation the soak itself saw (verify's are counted from its report).
func (e *engine) problem(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.res.Problems) < 10 {
		e.res.Problems = append(e.res.Problems, fmt.Sprintf(format, args...))
	}
}

func (e *engine) has(f Fault) bool { return slices.Contains(e.opts.Faults, f) }

// setUp writes each owner's records, starts the serve process and opens the control session.
func (e *engine) setUp(ctx context.Context) error {
	tokens := map[string]string{}
	for i := range ownersPerRun {
		o := owner{id: fmt.Sprintf("soak-%s-%d", e.runID, i), token: fmt.Sprintf("soak-token-%s-%d", e.runID, i)}
		tokens[o.token] = o.id
		var err error
		if o.note, err = e.seed(ctx, model.CreateInput{Owner: o.id, Module: kernel.ModuleNote, Title: "soak note", Payload: json.RawMessage(`{"n":0}`)}); err != nil {
			return err
		}
		if o.mem, err = e.seed(ctx, model.CreateInput{Owner: o.id, Module: kernel.ModuleMem, Title: "soak memo",
			Payload: json.RawMessage(`{"originalContent":"a  soak  memo","currentContent":"a  soak  memo"}`)}); err != nil {
			return err
		}
		if o.commitment, err = e.seed(ctx, model.CreateInput{Owner: o.id, Module: kernel.ModuleCommitment, Title: "soak promise",
			Payload: json.RawMessage(`{"status":"OPEN"}`)}); err != nil {
			return err
		}
		e.owners = append(e.owners, o)
	}
	// In-process rounds share the soak's kernel and pool (storm.Run opens a pool of its own per
	// storm when given a DSN); only the child processes need the DSN.
	e.env = storm.Env{Kernel: e.k}
	// Each worker process carries this soak's mark, so kill-child strikes only this soak's own
	// workers, never those of another storm the same process runs (a test binary runs several).
	e.mark = childMarkVar + "=" + stormtypes.RandomHex(8)
	e.envChildren = storm.Env{Kernel: e.k, DSN: e.opts.DSN, Executable: e.opts.Executable,
		WorkerEnv: append(append([]string(nil), e.opts.ChildEnv...), e.mark), ReadyTimeout: 30 * time.Second}
	// The serve child is this binary too; a test binary dispatches to the CLI on the storm
	// worker's variable, which the real binary ignores outside storm-worker.
	srv, err := newServer(e.dir, e.opts.Executable, e.opts.DSN, append([]string{storm.WorkerEnvVar + "=1"}, e.opts.ChildEnv...), tokens)
	if err != nil {
		return err
	}
	e.srv = srv
	if err := e.srv.start(ctx); err != nil {
		return err
	}
	e.ctl = &control{dsn: e.opts.DSN}
	return nil
}

func (e *engine) seed(ctx context.Context, in model.CreateInput) (string, error) {
	res, err := e.k.Create(ctx, in)
	if err != nil {
		return "", fmt.Errorf("soak: set up %s: %w", in.Owner, err)
	}
	return res.Record.ID, nil
}

func (e *engine) tearDown() {
	if e.srv != nil {
		e.srv.stop()
	}
	if e.ctl != nil {
		e.ctl.close()
	}
}

// deliver runs outbox passes until ctx ends, adding up what they did.
func (e *engine) deliver(ctx context.Context) {
	w := outbox.NewWorker(e.k.DB(), outbox.Options{Providers: map[string]outbox.Provider{"notifier": e.provider},
		Lease: 3 * time.Second, CallTimeout: time.Second, BaseBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second})
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		for _, o := range e.owners {
			// Only the soak's own messages; a failed pass (a terminated session) is retried at the
			// next tick.
			rep, _ := w.RunScoped(ctx, outbox.Scope{OwnerID: o.id}, 50)
			e.mu.Lock()
			e.res.Outbox.Claimed += rep.Claimed
			e.res.Outbox.Delivered += rep.Delivered
			e.res.Outbox.Retried += rep.Retried
			e.res.Outbox.Failed += rep.Failed
			e.res.Outbox.Lost += rep.Lost
			e.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// plan is one round's random choices, drawn up front (the rng is not shared with goroutines).
type plan struct {
	owner  owner
	op     string
	path   string
	n      int
	faults []scheduled
}

type scheduled struct {
	fault Fault
	after time.Duration
	count int // sessions to terminate
}

func (e *engine) pick(weights map[string]int) string {
	keys := make([]string, 0, len(weights))
	total := 0
	for k, w := range weights {
		keys = append(keys, k)
		total += w
	}
	slices.Sort(keys)
	x := e.rng.IntN(total)
	for _, k := range keys {
		if x -= weights[k]; x < 0 {
			return k
		}
	}
	return keys[len(keys)-1]
}

// DefaultRates are the chances per round that a fault is injected (kill-child: of rounds from
// child processes, kill-server: of rounds over HTTP). A restart costs a second or two and is
// rarer than a terminated session; a failover costs seconds to a minute.
var DefaultRates = map[Fault]float64{Terminate: 0.35, KillChild: 0.7, KillServer: 0.08, Restart: 0.004, Failover: 0.01, KillPrimary: 0.01}

// ParseRates reads "kind=p,..." over DefaultRates (each p in 0..1).
func ParseRates(s string) (map[Fault]float64, error) {
	out := make(map[Fault]float64, len(DefaultRates))
	for k, v := range DefaultRates {
		out[k] = v
	}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		kind, val, ok := strings.Cut(part, "=")
		p, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		f := Fault(strings.TrimSpace(kind))
		if !ok || err != nil || p < 0 || p > 1 || (!slices.Contains(AllFaults, f) && !slices.Contains(FailoverFaults, f)) {
			return nil, apperr.New(apperr.Usage, "--rates: %q: want kind=probability (0-1) for kill-child, terminate, restart, kill-server, failover or kill-primary", part)
		}
		out[f] = p
	}
	return out, nil
}

func (e *engine) plan() plan {
	p := plan{owner: e.owners[e.rng.IntN(len(e.owners))], n: 4 + e.rng.IntN(9)}
	p.op = e.pick(map[string]int{opCreate: 30, opPatch: 20, opArchive: 10, opRewrite: 10, opBlocked: 10, opOutbox: 20})
	p.path = e.pick(map[string]int{pathShared: 30, pathNoShare: 30, pathHTTP: 30, pathProcesses: 10})
	est := e.wall[p.path]
	if est == 0 {
		est = 20 * time.Millisecond
	}
	at := func() time.Duration { return time.Duration(e.rng.Int64N(int64(est) + 1)) }
	if e.has(Terminate) && e.rng.Float64() < e.opts.Rates[Terminate] {
		p.faults = append(p.faults, scheduled{fault: Terminate, after: at(), count: 1 + e.rng.IntN(3)})
	}
	if e.has(KillChild) && p.path == pathProcesses && e.rng.Float64() < e.opts.Rates[KillChild] {
		p.faults = append(p.faults, scheduled{fault: KillChild, after: at(), count: e.rng.IntN(1 << 16)})
	}
	if e.has(KillServer) && p.path == pathHTTP && e.rng.Float64() < e.opts.Rates[KillServer] {
		p.faults = append(p.faults, scheduled{fault: KillServer, after: at()})
	}
	if e.has(Restart) && e.rng.Float64() < e.opts.Rates[Restart] {
		p.faults = append(p.faults, scheduled{fault: Restart, after: at()})
	}
	if f, ok := e.failoverFault(); ok {
		p.faults = append(p.faults, scheduled{fault: f, after: at()})
	}
	return p
}

// failoverFault draws the round's failover, at most one: a round draws one with the two
// kinds' chances together, and the kind that has struck less often so far (by chance between
// equals), so a short soak sees both.
func (e *engine) failoverFault() (Fault, bool) {
	var kinds []Fault
	total := 0.0
	for _, f := range FailoverFaults {
		if e.has(f) {
			kinds = append(kinds, f)
			total += e.opts.Rates[f]
		}
	}
	if len(kinds) == 0 || e.rng.Float64() >= total {
		return "", false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	slices.SortStableFunc(kinds, func(a, b Fault) int { return e.res.Faults[string(a)] - e.res.Faults[string(b)] })
	if len(kinds) == 2 && e.res.Faults[string(kinds[0])] == e.res.Faults[string(kinds[1])] && e.rng.Float64()*total >= e.opts.Rates[kinds[0]] {
		return kinds[1], true
	}
	return kinds[0], true
}

// spec builds the round's storm on a fresh key.
func (e *engine) spec(ctx context.Context, round int, p plan) (stormtypes.Spec, error) {
	key := fmt.Sprintf("soak-%s-%06d", e.runID, round)
	o := p.owner
	s := stormtypes.Spec{N: p.n, Concurrency: p.n, Share: p.path != pathNoShare}
	feature := func(module, record, id string) {
		s.Op = stormtypes.OpAction
		s.Action = model.FeatureInput{Owner: o.id, Module: module, RecordID: record, FeatureID: id, Key: key}
	}
	switch p.op {
	case opCreate:
		s.Op = stormtypes.OpCreate
		s.Create = model.CreateInput{Owner: o.id, Module: kernel.ModuleNote, Key: key, Title: fmt.Sprintf("soak round %d", round),
			Payload: json.RawMessage(fmt.Sprintf(`{"round":%d}`, round))}
	case opPatch:
		// The record's revision now: every earlier round has settled, so nothing else moves it.
		cur, err := records.FindRecord(ctx, e.k.DB(), store.RecordRef{Owner: o.id, Module: kernel.ModuleNote, ID: o.note}, false)
		if err != nil {
			return s, fmt.Errorf("read the note's revision: %w", err)
		}
		title := fmt.Sprintf("patched by round %d", round)
		s.Op = stormtypes.OpPatch
		s.Patch = model.PatchInput{Owner: o.id, Module: kernel.ModuleNote, RecordID: o.note, Key: key, ExpectRevision: cur.Revision, Title: &title}
	case opArchive:
		feature(kernel.ModuleNote, o.note, "F01")
	case opRewrite:
		feature(kernel.ModuleMem, o.mem, "F01")
	case opBlocked:
		feature(kernel.ModuleMem, o.mem, "F02")
	case opOutbox:
		feature(kernel.ModuleCommitment, o.commitment, "F02")
	}
	switch p.path {
	case pathHTTP:
		s.Via, s.URL, s.Token = stormtypes.ViaHTTP, e.srv.url(), o.token
	case pathProcesses:
		s.Processes, s.Concurrency = 2, (p.n+1)/2
	}
	return s, nil
}

// round runs one faulted storm, learns its outcome by retrying its key, and checks the
// database's count of executions against what the responses said.
func (e *engine) round(ctx context.Context, i int) {
	p := e.plan()
	e.res.Paths[p.path]++
	e.res.Ops[p.op]++
	spec, err := e.spec(ctx, i, p)
	if err != nil {
		// The record could not be read (the server was restarting): try it as a create.
		p.op = opCreate
		if spec, err = e.spec(ctx, i, p); err != nil {
			e.problem("round %d: %v", i, err)
			return
		}
	}
	if p.path == pathHTTP && !e.srv.running() {
		if err := e.srv.start(ctx); err != nil {
			e.problem("round %d: start serve: %v", i, err)
			return
		}
		spec.URL = e.srv.url()
	}

	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	var faults sync.WaitGroup
	var killedServer atomic.Bool
	for _, f := range p.faults {
		faults.Go(func() {
			if e.inject(ctx, rctx, f) && f.fault == KillServer {
				killedServer.Store(true)
			}
		})
	}
	events := make(chan stormtypes.Event, spec.N)
	start := time.Now()
	env := e.env
	if p.path == pathProcesses {
		env = e.envChildren
	}
	sum, runErr := storm.Run(rctx, env, spec, events)
	e.wall[p.path] = (e.wall[p.path]*7 + time.Since(start)) / 8
	cancel() // faults not yet due are not injected: the storm is over
	faults.Wait()
	close(events)
	e.res.Requests += sum.Requests
	for code, n := range sum.Outcomes {
		e.res.Outcomes[code] += n
	}
	if sum.Requests == 0 && runErr != nil {
		e.res.Outcomes["NOT_STARTED"]++
	}
	if killedServer.Load() || !e.srv.running() {
		if err := e.srv.start(ctx); err != nil {
			e.problem("round %d: restart serve: %v", i, err)
		}
	}

	truth, ok := e.learn(ctx, i, spec)
	if !ok {
		return
	}
	e.check(ctx, i, p, spec, truth, events)
}

// learn retries the round's key once at a time, in process and unshared, until it gets a
// result: a client that lost its answer does the same. The answer's verdict (read from the
// database) says how often the key's work committed.
func (e *engine) learn(ctx context.Context, round int, spec stormtypes.Spec) (stormtypes.Summary, bool) {
	rs := spec
	rs.N, rs.Concurrency, rs.Processes, rs.Via, rs.URL, rs.Token, rs.Share = 1, 1, 1, stormtypes.ViaInproc, "", "", false
	deadline := time.Now().Add(2 * time.Minute)
	wait := 20 * time.Millisecond
	for {
		sum, _ := storm.Run(ctx, e.env, rs, nil)
		e.res.Retries += sum.Requests
		e.res.Requests += sum.Requests
		// A success whose verdict found no key row could not read the verdict (a pool
		// connection from before a restart): ask again, the next answer is a replay.
		if sum.Successes() == 1 && sum.Verified.KeyStatus != "ABSENT" {
			return sum, true
		}
		code, _ := sum.TopError()
		if code != "" && sum.Successes() == 0 && apperr.Code(code).Status() < 500 {
			// A refusal, not a failure: the key or the record is not what the round left.
			e.problem("round %d (%s): the retry of key %s was refused with %s: %v", round, spec.Operation(), spec.Key(), code, sum.Verified.Problems)
			e.res.Violations++
			return sum, false
		}
		if ctx.Err() != nil {
			return sum, false
		}
		if time.Now().After(deadline) {
			e.problem("round %d: no retry of key %s succeeded within 2 minutes (last %s)", round, spec.Key(), code)
			e.res.Violations++
			return sum, false
		}
		time.Sleep(wait)
		wait = min(wait*2, time.Second)
	}
}

// check compares the round's responses and the key's rows.
func (e *engine) check(ctx context.Context, round int, p plan, spec stormtypes.Spec, truth stormtypes.Summary, events <-chan stormtypes.Event) {
	v := truth.Verified
	units := v.Revisions
	if spec.Op == stormtypes.OpAction {
		units = v.Executions
	}
	e.res.Executions += int64(units)
	if units > 1 {
		e.res.Duplicates += int64(units - 1)
		e.problem("round %d (%s via %s): key %s executed %d times: %v", round, spec.Operation(), p.path, spec.Key(), units, v.Problems)
	}
	if !v.Agrees && units <= 1 && !e.onlySettled(ctx, spec, v) {
		e.res.Violations++
		e.problem("round %d (%s via %s): the database disagrees about key %s: %v", round, spec.Operation(), p.path, spec.Key(), v.Problems)
	}
	// Every answer a client got must be the stored result, and at most one may say EXECUTED.
	executed := truth.Outcomes[string(idemtype.Executed)]
	lied := 0
	for ev := range events {
		if !ev.Succeeded() {
			continue
		}
		if ev.Outcome == string(idemtype.Executed) {
			executed++
		}
		if ref := v.Envelope; ref != nil && (ev.RecordID != ref.RecordID || ev.Revision != ref.Revision || ev.ExecutionID != ref.ExecutionID) {
			lied++
		}
	}
	if executed > 1 {
		e.res.Violations++
		e.problem("round %d (%s via %s): %d responses said EXECUTED for key %s", round, spec.Operation(), p.path, executed, spec.Key())
	}
	if lied > 0 {
		e.res.Violations++
		e.problem("round %d (%s via %s): %d responses for key %s do not point at the stored result", round, spec.Operation(), p.path, lied, spec.Key())
	}
}

// onlySettled reports whether the storm's verdict disagrees only because the delivery worker
// already settled the round's outbox message: its DELIVERED or FAILED audit event carries the
// key too, and the verdict counts every audit event of the key. (That the settle happened once
// is verify's outbox_settled_once.)
func (e *engine) onlySettled(ctx context.Context, spec stormtypes.Spec, v stormtypes.Verified) bool {
	if spec.Op != stormtypes.OpAction || spec.Action.Module != kernel.ModuleCommitment || len(v.Problems) != 1 || v.Executions != 1 {
		return false
	}
	settles, err := outboxrows.CountSettleAudits(ctx, e.k.DB(), spec.Owner(), spec.Key())
	return err == nil && settles > 0 && v.AuditEvents == 1+settles
}

// retryVerify runs a verify of owner ("" every owner), retrying while the server is still coming
// back.
func (e *engine) retryVerify(ctx context.Context, owner string) (model.InvariantReport, error) {
	for {
		rep, err := verify.Invariants(ctx, e.k, model.VerifyOptions{Owner: owner})
		if err == nil || ctx.Err() != nil || apperr.CodeOf(err) != apperr.Internal {
			return rep, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// merge adds b's counts and examples to a.
func merge(a, b model.InvariantReport) model.InvariantReport {
	if a.Invariants == nil {
		a.Invariants = make([]model.Invariant, len(b.Invariants))
		for i, inv := range b.Invariants {
			a.Invariants[i] = model.Invariant{Name: inv.Name, Description: inv.Description, Examples: []model.Violation{}}
		}
	}
	for i, inv := range b.Invariants {
		a.Invariants[i].Count += inv.Count
		for _, ex := range inv.Examples {
			if len(a.Invariants[i].Examples) < verify.MaxExamples {
				a.Invariants[i].Examples = append(a.Invariants[i].Examples, ex)
			}
		}
	}
	for t, n := range b.Checked {
		a.Checked[t] += n
	}
	a.Violations += b.Violations
	a.Batches += b.Batches
	a.TookMs += b.TookMs
	return a
}

// drainOutbox runs the delivery worker (faults over) until none of the soak's messages is
// PENDING or limit passes, then tallies them.
func (e *engine) drainOutbox(ctx context.Context, limit time.Duration) error {
	owners := make([]string, len(e.owners))
	for i, o := range e.owners {
		owners[i] = o.id
	}
	w := outbox.NewWorker(e.k.DB(), outbox.Options{Providers: map[string]outbox.Provider{"notifier": e.provider},
		Lease: 3 * time.Second, CallTimeout: time.Second, BaseBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second})
	deadline := time.Now().Add(limit)
	for {
		t, err := verifyrows.OutboxTally(ctx, e.k.DB(), owners, 20)
		if err != nil {
			return fmt.Errorf("soak: tally the outbox: %w", err)
		}
		e.res.OutboxMessages = OutboxTally{Queued: t.Queued, Delivered: t.Delivered, Failed: t.Failed, Pending: t.Pending,
			FailedIDs: nonNil(t.FailedIDs), PendingIDs: nonNil(t.PendingIDs), Balanced: t.Queued == t.Delivered+t.Failed+t.Pending}
		if t.Pending == 0 || time.Now().After(deadline) {
			if !e.res.OutboxMessages.Balanced {
				e.problem("outbox: %d message(s) queued but %d delivered + %d failed + %d pending", t.Queued, t.Delivered, t.Failed, t.Pending)
			}
			return nil
		}
		for _, o := range owners {
			rep, _ := w.RunScoped(ctx, outbox.Scope{OwnerID: o}, 50) // only the soak's own messages
			e.res.Outbox.Claimed += rep.Claimed
			e.res.Outbox.Delivered += rep.Delivered
			e.res.Outbox.Retried += rep.Retried
			e.res.Outbox.Failed += rep.Failed
			e.res.Outbox.Lost += rep.Lost
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
