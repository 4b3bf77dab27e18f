package failover

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Fault is one fault of the scenario. Inject performs it and returns once the database
// accepts writes again (the new primary promoted, the crashed one recovered); the load runs on
// meanwhile.
type Fault struct {
	// Name labels the fault in the report ("planned failover", "primary killed", …).
	Name string
	// Failover is true when the fault moves the primary to another node.
	Failover bool
	Inject   func(ctx context.Context) error
}

// Options configures Run.
type Options struct {
	// URLs are the `idemwork serve` processes (run with --dev-auth) the clients send to, in turn.
	URLs []string
	// Owner is the X-Owner-Id of every request (default a fresh "failover-<hex>").
	Owner string
	// Module is the module records are created in (default NOTE).
	Module string
	// Clients is how many clients send at once (default 8).
	Clients int
	// Rate caps the keys sent per second, all clients together (0: as fast as they can). A
	// failover competes with the load for the machine; a test bounds the load so the faults,
	// not the load, decide how long it takes.
	Rate int
	// StormEvery makes every n-th key a storm: StormWidth requests with that key at once, across
	// the servers (defaults 10 and 4; StormEvery < 0: no storms).
	StormEvery, StormWidth int
	// Faults are injected one after another, each once Between answers were acknowledged since
	// the previous one (default 300); the load stops once Between more were acknowledged after
	// the last.
	Faults  []Fault
	Between int
	// PhaseTimeout bounds the wait for Between acknowledged answers (default 90 s): a server that
	// never answers again after a fault is a finding, not a hang.
	PhaseTimeout time.Duration
	// RetryFor bounds the retries of each key after the faults (default 2 minutes).
	RetryFor time.Duration
	// DSN reaches the database (the formation's URI) to read what it holds of the run's keys.
	DSN string
	// Verify runs `idemwork verify --all` on the database and returns its violations.
	Verify func(ctx context.Context) (int64, error)
	// Progress receives a line per phase (nil: none).
	Progress io.Writer
}

// Report is what the scenario saw and what the database holds.
type Report struct {
	Owner string `json:"owner"`
	// Keys is how many keys were sent, Requests how many requests (the load's and the retries').
	Keys     int `json:"keys"`
	Storms   int `json:"storms"`
	Requests int `json:"requests"`
	// Faults are the faults injected, in order, with how long each took; Failovers counts those
	// that moved the primary.
	Faults    []FaultReport `json:"faults"`
	Failovers int           `json:"failovers"`
	// Acknowledged counts keys that got a 2xx answer before the retries; Unavailable,
	// CommitUnknown and NoAnswer the keys that got DATABASE_UNAVAILABLE, COMMIT_UNKNOWN or no
	// HTTP answer at all (at least once).
	Acknowledged  int `json:"acknowledged"`
	Unavailable   int `json:"unavailable"`
	CommitUnknown int `json:"commitUnknown"`
	NoAnswer      int `json:"noAnswer"`
	// Outcomes counts the load's answers by outcome or error code.
	Outcomes map[string]int `json:"outcomes"`
	// Retried counts the keys retried after the last fault (every key).
	Retried int `json:"retried"`
	// ExecutedTwice counts keys whose work was executed more than once: answers naming two
	// different records, or two records created with the key.
	ExecutedTwice int `json:"executedTwice"`
	// Lost counts acknowledged keys whose acknowledged record the database no longer has.
	Lost int `json:"lost"`
	// Partial counts keys with a record but no SUCCEEDED key row, or a key row left PROCESSING.
	Partial int `json:"partial"`
	// Unresolved counts keys no retry got an answer for within RetryFor.
	Unresolved int `json:"unresolved"`
	// Violations is what verify --all found.
	Violations int64 `json:"violations"`
	// Examples are up to 10 keys that went wrong, and how.
	Examples []string `json:"examples"`
	TookMs   int64    `json:"tookMs"`
}

// FaultReport is one injected fault.
type FaultReport struct {
	Name   string `json:"name"`
	TookMs int64  `json:"tookMs"`
	// AckedBefore is how many keys had been acknowledged when the fault began.
	AckedBefore int `json:"ackedBefore"`
}

// OK reports whether exactly-once held: nothing executed twice, lost, partial or unresolved,
// and verify clean.
func (r Report) OK() bool {
	return r.ExecutedTwice == 0 && r.Lost == 0 && r.Partial == 0 && r.Unresolved == 0 && r.Violations == 0
}

// answer is one HTTP exchange.
type answer struct {
	status   int
	outcome  string // EXECUTED, REPLAYED, JOINED, or the error code; NO_ANSWER without a response
	recordID string
	retry    bool
}

type keyState struct {
	storm   bool
	answers []answer
}

type run struct {
	opts   Options
	client *http.Client
	body   func(key string) []byte

	mu   sync.Mutex
	keys map[string]*keyState
	list []string

	acked    atomic.Int64 // keys acknowledged so far (first 2xx of a key)
	requests atomic.Int64
	next     atomic.Int64
}

// Run runs the scenario. The error is for a scenario that could not run (a fault that failed,
// the database unreadable at the end); what went wrong with keys is in the Report.
func Run(ctx context.Context, opts Options) (Report, error) {
	start := time.Now()
	if len(opts.URLs) == 0 || opts.DSN == "" {
		return Report{}, errors.New("failover: Options.URLs and Options.DSN are required")
	}
	if opts.Owner == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		opts.Owner = fmt.Sprintf("failover-%x", b)
	}
	if opts.Module == "" {
		opts.Module = "NOTE"
	}
	if opts.Clients <= 0 {
		opts.Clients = 8
	}
	if opts.StormEvery == 0 {
		opts.StormEvery = 10
	}
	if opts.StormWidth <= 0 {
		opts.StormWidth = 4
	}
	if opts.Between <= 0 {
		opts.Between = 300
	}
	if opts.PhaseTimeout <= 0 {
		opts.PhaseTimeout = 90 * time.Second
	}
	if opts.RetryFor <= 0 {
		opts.RetryFor = 2 * time.Minute
	}
	r := &run{opts: opts, keys: map[string]*keyState{},
		client: &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		body:   func(key string) []byte { return fmt.Appendf(nil, `{"title":"failover %s"}`, key) }}
	rep := Report{Owner: opts.Owner, Outcomes: map[string]int{}, Examples: []string{}, Faults: []FaultReport{}}

	// The load: clients send until stopped, each key once (or as a storm).
	loadCtx, stopLoad := context.WithCancel(ctx)
	var pace <-chan time.Time
	if opts.Rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(opts.Rate))
		defer t.Stop()
		pace = t.C
	}
	var clients sync.WaitGroup
	for range opts.Clients {
		clients.Go(func() { r.sendKeys(loadCtx, pace) })
	}
	var runErr error
	phase := func(what string) {
		if runErr != nil {
			return
		}
		if err := r.waitAcked(ctx, opts.Between); err != nil {
			runErr = fmt.Errorf("%s: %w", what, err)
		}
	}
	phase("before the first fault")
	for _, f := range opts.Faults {
		if runErr != nil {
			break
		}
		before := int(r.acked.Load())
		r.progress("failover: %d keys acknowledged; %s", before, f.Name)
		began := time.Now()
		if err := f.Inject(ctx); err != nil {
			runErr = fmt.Errorf("%s: %w", f.Name, err)
			break
		}
		rep.Faults = append(rep.Faults, FaultReport{Name: f.Name, TookMs: time.Since(began).Milliseconds(), AckedBefore: before})
		if f.Failover {
			rep.Failovers++
		}
		r.progress("failover: %s done in %s", f.Name, time.Since(began).Round(time.Millisecond))
		phase("after " + f.Name)
	}
	stopLoad()
	clients.Wait()
	if runErr != nil {
		return rep, runErr
	}

	// Every key again, one request at a time, until it gets an answer: what a client does.
	r.progress("failover: %d keys sent; retrying each", len(r.list))
	rep.Retried, rep.Unresolved = r.retryAll(ctx)

	held, err := readKeys(ctx, opts.DSN, opts.Owner)
	if err != nil {
		return rep, err
	}
	r.count(&rep, held)
	if opts.Verify != nil {
		v, err := opts.Verify(ctx)
		if err != nil {
			return rep, fmt.Errorf("verify --all: %w", err)
		}
		rep.Violations = v
	}
	rep.Requests = int(r.requests.Load())
	rep.TookMs = time.Since(start).Milliseconds()
	return rep, nil
}

func (r *run) progress(format string, args ...any) {
	if r.opts.Progress != nil {
		fmt.Fprintf(r.opts.Progress, format+"\n", args...)
	}
}

// waitAcked waits until n more keys were acknowledged than when it was called.
func (r *run) waitAcked(ctx context.Context, n int) error {
	target := r.acked.Load() + int64(n)
	deadline := time.Now().Add(r.opts.PhaseTimeout)
	for r.acked.Load() < target {
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d keys acknowledged within %s: the servers did not answer again", r.acked.Load()-target+int64(n), n, r.opts.PhaseTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// sendKeys sends keys until ctx ends: a fresh key each time, every StormEvery-th as a storm,
// each when pace ticks (nil: at once).
func (r *run) sendKeys(ctx context.Context, pace <-chan time.Time) {
	for ctx.Err() == nil {
		if pace != nil {
			select {
			case <-ctx.Done():
				return
			case <-pace:
			}
		}
		n := r.next.Add(1)
		key := fmt.Sprintf("%s-%06d", r.opts.Owner, n)
		storm := r.opts.StormEvery > 0 && n%int64(r.opts.StormEvery) == 0
		r.mu.Lock()
		r.keys[key] = &keyState{storm: storm}
		r.list = append(r.list, key)
		r.mu.Unlock()
		if !storm {
			r.record(key, r.send(ctx, r.opts.URLs[int(n)%len(r.opts.URLs)], key, false))
			continue
		}
		var wg sync.WaitGroup
		for i := range r.opts.StormWidth {
			wg.Go(func() { r.record(key, r.send(ctx, r.opts.URLs[(int(n)+i)%len(r.opts.URLs)], key, false)) })
		}
		wg.Wait()
	}
}

func (r *run) record(key string, a answer) {
	if a.outcome == "" {
		return // the load was stopped before the request went out
	}
	r.mu.Lock()
	k := r.keys[key]
	first := !k.acknowledged()
	k.answers = append(k.answers, a)
	now := k.acknowledged()
	r.mu.Unlock()
	if first && now {
		r.acked.Add(1)
	}
}

func (k *keyState) acknowledged() bool {
	return slices.ContainsFunc(k.answers, func(a answer) bool { return !a.retry && a.status/100 == 2 })
}

// send posts one create with key and reads its outcome and record id.
func (r *run) send(ctx context.Context, base, key string, retry bool) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/modules/"+r.opts.Module+"/records", bytes.NewReader(r.body(key)))
	if err != nil {
		return answer{outcome: "NO_ANSWER", retry: retry}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("X-Owner-Id", r.opts.Owner)
	resp, err := r.client.Do(req)
	if err != nil {
		if ctx.Err() != nil && !retry {
			return answer{} // stopped, not failed
		}
		r.requests.Add(1)
		return answer{outcome: "NO_ANSWER", retry: retry}
	}
	defer resp.Body.Close()
	r.requests.Add(1)
	var body struct {
		Outcome string `json:"outcome"`
		Record  struct {
			ID string `json:"id"`
		} `json:"record"`
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	a := answer{status: resp.StatusCode, retry: retry}
	if json.Unmarshal(raw, &body) != nil {
		a.outcome = "HTTP_" + strconv.Itoa(resp.StatusCode)
		return a
	}
	a.outcome, a.recordID = body.Outcome, body.Record.ID
	if body.Error.Code != "" {
		a.outcome = body.Error.Code
	}
	if a.outcome == "" {
		a.outcome = "HTTP_" + strconv.Itoa(resp.StatusCode)
	}
	return a
}

// retryAll retries every key until it gets an answer (2xx or 4xx), Clients at a time, and
// returns how many keys it retried and how many it could not settle.
func (r *run) retryAll(ctx context.Context) (retried, unresolved int) {
	keys := slices.Clone(r.list)
	work := make(chan string)
	var bad atomic.Int64
	var wg sync.WaitGroup
	for c := range r.opts.Clients {
		wg.Go(func() {
			for key := range work {
				if !r.retry(ctx, key, c) {
					bad.Add(1)
				}
			}
		})
	}
	for _, k := range keys {
		work <- k
	}
	close(work)
	wg.Wait()
	return len(keys), int(bad.Load())
}

func (r *run) retry(ctx context.Context, key string, c int) bool {
	deadline := time.Now().Add(r.opts.RetryFor)
	wait := 50 * time.Millisecond
	for i := 0; ; i++ {
		a := r.send(ctx, r.opts.URLs[(c+i)%len(r.opts.URLs)], key, true)
		r.record(key, a)
		if a.status/100 == 2 || a.status/100 == 4 {
			return a.status/100 == 2
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// held is what the database holds of one key.
type held struct {
	status  string   // SUCCEEDED, PROCESSING, "" (no key row)
	records []string // records created with the key (revision 1 written under it)
}

func readKeys(ctx context.Context, dsn, owner string) (map[string]*held, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("failover: read the keys: %w", err)
	}
	defer conn.Close(context.Background())
	out := map[string]*held{}
	get := func(k string) *held {
		if out[k] == nil {
			out[k] = &held{}
		}
		return out[k]
	}
	rows, err := conn.Query(ctx, `SELECT idempotency_key, status FROM idempotency_record WHERE owner_id = $1`, owner)
	if err != nil {
		return nil, fmt.Errorf("failover: read the keys: %w", err)
	}
	for rows.Next() {
		var k, st string
		if err := rows.Scan(&k, &st); err != nil {
			return nil, err
		}
		get(k).status = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("failover: read the keys: %w", err)
	}
	rows, err = conn.Query(ctx, `SELECT idempotency_key, record_id FROM record_revision
		WHERE owner_id = $1 AND revision = 1 AND idempotency_key IS NOT NULL ORDER BY created_at, record_id`, owner)
	if err != nil {
		return nil, fmt.Errorf("failover: read the records: %w", err)
	}
	for rows.Next() {
		var k, id string
		if err := rows.Scan(&k, &id); err != nil {
			return nil, err
		}
		h := get(k)
		h.records = append(h.records, id)
	}
	return out, rows.Err()
}

// count compares every key's answers with what the database holds.
func (r *run) count(rep *Report, db map[string]*held) {
	example := func(format string, args ...any) {
		if len(rep.Examples) < 10 {
			rep.Examples = append(rep.Examples, fmt.Sprintf(format, args...))
		}
	}
	rep.Keys = len(r.list)
	for _, key := range r.list {
		k := r.keys[key]
		if k.storm {
			rep.Storms++
		}
		h := db[key]
		if h == nil {
			h = &held{}
		}
		executed := map[string]bool{} // records named by EXECUTED answers
		acked := map[string]bool{}    // records named by the load's 2xx answers
		codes := map[string]bool{}
		for _, a := range k.answers {
			if !a.retry {
				rep.Outcomes[a.outcome]++
				codes[a.outcome] = true
			}
			if a.status/100 == 2 && a.outcome == "EXECUTED" && a.recordID != "" {
				executed[a.recordID] = true
			}
			if a.status/100 == 2 && !a.retry && a.recordID != "" {
				acked[a.recordID] = true
			}
		}
		if len(acked) > 0 {
			rep.Acknowledged++
		}
		if codes["DATABASE_UNAVAILABLE"] {
			rep.Unavailable++
		}
		if codes["COMMIT_UNKNOWN"] {
			rep.CommitUnknown++
		}
		if codes["NO_ANSWER"] {
			rep.NoAnswer++
		}
		if len(executed) > 1 || len(h.records) > 1 {
			rep.ExecutedTwice++
			example("%s executed %d times (answers named %v; the database holds %v)", key, max(len(executed), len(h.records)), sortedKeys(executed), h.records)
		}
		for id := range acked {
			if !slices.Contains(h.records, id) {
				rep.Lost++
				example("%s was acknowledged with record %s, which the database no longer holds (it holds %v)", key, id, h.records)
				break
			}
		}
		if h.status == "PROCESSING" || (len(h.records) > 0 && h.status != "SUCCEEDED") {
			rep.Partial++
			example("%s: key row %q with records %v", key, h.status, h.records)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
