package storm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/store/stormrows"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// A service storm fires N concurrent requests with one Idempotency-Key at any HTTP service built
// on the runner library (the idemhttp middleware's contract), round-robin over one or more of
// its instances, and judges the answers against the database: the outcomes come from the
// answers' headers, the verdict from the library's key table (through a session whose schema is
// the service's) and the service's own rows counted by a query of the user's (one row = executed
// once). Nothing is inferred from the answers alone.

// ServiceSpec is one service storm.
type ServiceSpec struct {
	// N requests with Concurrency workers (0: min(N, DefaultConcurrency)).
	N, Concurrency int
	// URLs are the service's endpoint on each instance (http://host:port/orders), sent to
	// round-robin.
	URLs []string
	// Method, Body and Header are the request's; the storm adds the Idempotency-Key.
	Method string
	Body   []byte
	Header http.Header
	// Key is the Idempotency-Key (empty: a generated storm-… key); Owner is whose key it is in
	// the service's table — the service learns it from the request (Header), the storm only
	// reads the verdict for it.
	Key, Owner string
	// CountSQL counts the service's rows the request writes: $1 is the key, $2 the owner (use
	// what you need). Empty: the service's rows are not counted.
	CountSQL string
	// ID names the storm (generated when empty).
	ID string
}

var placeholder = regexp.MustCompile(`\$([0-9]+)`)

// Normalized checks s and fills its defaults.
func (s ServiceSpec) Normalized() (ServiceSpec, error) {
	if s.N < 1 || s.N > stormtypes.MaxRequests {
		return s, usage("--n: want 1-%d requests, got %d", stormtypes.MaxRequests, s.N)
	}
	if s.Concurrency < 0 || s.Concurrency > stormtypes.MaxConcurrency {
		return s, usage("--concurrency: want 1-%d, got %d", stormtypes.MaxConcurrency, s.Concurrency)
	}
	if s.Concurrency == 0 {
		s.Concurrency = min(s.N, stormtypes.DefaultConcurrency)
	}
	s.Concurrency = min(s.Concurrency, s.N)
	if len(s.URLs) == 0 || len(s.URLs) > stormtypes.MaxServers {
		return s, usage("a service storm needs 1-%d --url (the service's endpoint on each instance), got %d", stormtypes.MaxServers, len(s.URLs))
	}
	for _, raw := range s.URLs {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return s, usage("--url %q: want http://host:port/path", raw)
		}
	}
	s.Method = strings.ToUpper(s.Method)
	if s.Method == "" || strings.ContainsAny(s.Method, " \t\r\n") {
		return s, usage("--method %q: want an HTTP method (POST, PUT…)", s.Method)
	}
	if err := idemtype.ValidateOwner(s.Owner); err != nil {
		return s, usage("--owner: %s (the owner whose key the service stores, for the verdict)", strings.TrimPrefix(err.Error(), "VALIDATION_FAILED: owner: "))
	}
	if s.Key == "" {
		s.Key = "storm-" + stormtypes.RandomHex(8)
	}
	if err := idemtype.ValidateKey(s.Key); err != nil {
		return s, usage("--key: %s", strings.TrimPrefix(err.Error(), "VALIDATION_FAILED: key: "))
	}
	if s.Header == nil {
		s.Header = http.Header{}
	}
	if s.Header.Get(idemtype.HeaderIdempotencyKey) != "" {
		return s, usage("--header: the storm sends the Idempotency-Key itself (--key)")
	}
	for _, m := range placeholder.FindAllStringSubmatch(s.CountSQL, -1) {
		if n, _ := strconv.Atoi(m[1]); n < 1 || n > 2 {
			return s, usage("--count-sql: $%s is not a parameter of the count ($1 is the key, $2 the owner)", m[1])
		}
	}
	if s.ID == "" {
		s.ID = stormtypes.RandomHex(6)
	}
	return s, nil
}

// countArgs are the arguments of the count: the key ($1), then the owner ($2), as far as the
// text uses them.
func (s ServiceSpec) countArgs() []any {
	n := 0
	for _, m := range placeholder.FindAllStringSubmatch(s.CountSQL, -1) {
		v, _ := strconv.Atoi(m[1])
		n = max(n, v)
	}
	return []any{s.Key, s.Owner}[:n]
}

// RunService fires spec at the service and reads the verdict through db (a session on the
// service's database whose schema holds the runner's table: store.DB.Service). events, when
// set, receives each request as it finishes.
func RunService(ctx context.Context, db *store.DB, spec ServiceSpec, events chan<- stormtypes.Event) (stormtypes.Summary, error) {
	spec, err := spec.Normalized()
	if err != nil {
		return stormtypes.Summary{}, err
	}
	before, err := readServiceState(ctx, db, spec)
	if err != nil {
		return stormtypes.Summary{}, fmt.Errorf("storm: read the key before the storm: %w", err)
	}
	col := newCollector(ctx, spec.N, events)
	t := newServiceTarget(spec)
	defer t.Close()
	if err := t.Warm(ctx, spec.Concurrency); err != nil {
		col.finish()
		return stormtypes.Summary{}, err
	}
	release := make(chan struct{})
	var parked, wg sync.WaitGroup
	parked.Add(spec.Concurrency)
	wg.Go(func() { fire(ctx, spec.N, spec.Concurrency, 0, os.Getpid(), t, &parked, release, col.add) })
	parked.Wait()
	released := time.Now()
	close(release)
	wg.Wait()
	col.finish()
	stopped := ctx.Err() != nil

	vctx := ctx
	if stopped {
		var cancel context.CancelFunc
		vctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
	}
	sum := col.summarize(stormtypes.Spec{Op: stormtypes.OpService, N: spec.N, Concurrency: spec.Concurrency, Processes: 1, Via: stormtypes.ViaHTTP, URLs: spec.URLs, Share: true, ID: spec.ID},
		released, stopped, spec.URLs)
	sum.Storm.Owner, sum.Storm.Key, sum.Storm.Method, sum.Storm.CountSQL = spec.Owner, spec.Key, spec.Method, spec.CountSQL
	bodies := map[string]bool{}
	for i, ev := range col.results {
		if col.got[i] && ev.Succeeded() {
			bodies[ev.BodySHA256] = true
		}
	}
	sum.Distinct.Bodies = len(bodies)
	sum.Verified = verifyService(vctx, db, spec, before, sum)
	sum.Storm.Operation = sum.Verified.Operation
	sum.Verdict = judgeService(sum, stopped)
	return sum, ctx.Err()
}

// serviceState is the key's row and the service's count at one moment.
type serviceState struct {
	status, operation string
	rows              *int64
}

func readServiceState(ctx context.Context, db *store.DB, spec ServiceSpec) (serviceState, error) {
	st := serviceState{status: "ABSENT"}
	k, err := stormrows.ReadKeyState(ctx, db, spec.Owner, spec.Key)
	if err != nil {
		return st, err
	}
	if k.Found {
		st.status, st.operation = k.Status, k.Operation
	}
	if spec.CountSQL != "" {
		n, err := stormrows.CountServiceRows(ctx, db, spec.CountSQL, spec.countArgs()...)
		if err != nil {
			return st, err
		}
		st.rows = &n
	}
	return st, nil
}

// verifyService reads the key and the service's rows after the storm and checks them against
// the answers: when a request succeeded, the key is SUCCEEDED, at most one request executed,
// every success carries the same bytes and the service holds exactly one row of the key; when
// none did, the key and the rows are as they were.
func verifyService(ctx context.Context, db *store.DB, spec ServiceSpec, before serviceState, sum stormtypes.Summary) stormtypes.Verified {
	v := stormtypes.Verified{KeyStatus: "ABSENT", KeyStatusBefore: before.status, ServiceRowsBefore: before.rows}
	after, err := readServiceState(ctx, db, spec)
	if err != nil {
		unread(&v, "read the key and the service's rows", err)
		return v
	}
	v.KeyStatus, v.Operation, v.ServiceRows = after.status, after.operation, after.rows
	problem := v.AddProblem
	if n := sum.Outcomes[string(idemtype.Executed)]; n > 1 {
		problem("%d requests report EXECUTED: the work ran more than once", n)
	}
	switch {
	case sum.Successes() == 0:
		if after.status != before.status {
			problem("no request succeeded, yet the key is %s (it was %s)", after.status, before.status)
		}
		if after.rows != nil && before.rows != nil && *after.rows != *before.rows {
			problem("no request succeeded, yet the service's rows of the key went from %d to %d", *before.rows, *after.rows)
		}
	default:
		if after.status != "SUCCEEDED" {
			problem("requests succeeded, yet the key is %s", after.status)
		}
		if sum.Distinct.Bodies > 1 {
			problem("the successful answers carry %d different bodies: a replay must answer the first answer's bytes", sum.Distinct.Bodies)
		}
		if after.rows != nil && *after.rows != 1 {
			problem("the service holds %d rows of the key (--count-sql), not 1: executed %d times", *after.rows, *after.rows)
		}
	}
	v.Agrees = len(v.Problems) == 0 && v.Unread == nil
	return v
}

// judgeService is a service storm's verdict: agrees (every answer a success or a SPEC
// rejection, and the database agrees), rejected (every request refused with one code), failed
// (requests failed, or the database could not be read) or disagrees.
func judgeService(s stormtypes.Summary, stopped bool) stormtypes.Verdict {
	var v stormtypes.Verdict
	succ, failed := 0, 0
	var parts []string
	for _, code := range stormtypes.OrderedOutcomes(s.Outcomes) {
		n := s.Outcomes[code]
		parts = append(parts, fmt.Sprintf("%s %d", code, n))
		switch {
		case code == string(idemtype.Executed) || code == string(idemtype.Replayed) || code == string(idemtype.Joined):
			succ += n
		case s.Errors[code].Status == 0 || s.Errors[code].Status >= 500:
			failed += n
		}
	}
	v.Answers = stormtypes.Part{OK: failed == 0, Text: fmt.Sprintf("%d requests: %s", s.Requests, strings.Join(parts, ", "))}
	d := s.Verified
	v.Database.OK = d.Agrees
	switch {
	case d.Unread != nil:
		v.Database.Text = "not verified: the database could not be read: " + d.Unread.Code + ": " + d.Unread.Message
	case !d.Agrees:
		v.Database.Text = fmt.Sprintf("key %s: %s", d.KeyStatus, strings.Join(d.Problems, "; "))
	default:
		v.Database.Text = fmt.Sprintf("key %s (operation %s)", d.KeyStatus, d.Operation)
		if d.ServiceRows != nil {
			v.Database.Text += fmt.Sprintf(", %d service row(s) of the key", *d.ServiceRows)
		}
		if s.Distinct.Bodies == 1 {
			v.Database.Text += ", every success the same bytes"
		}
	}
	top, n := s.TopError()
	switch {
	case stopped:
		v.Verdict, v.Code, v.Text = stormtypes.VerdictStopped, string(stormtypes.CodeCancelled), "stopped before every request was answered"
	case d.Unread != nil:
		v.Verdict, v.Code, v.Text = stormtypes.VerdictFailed, d.Unread.Code, "not verified: the database could not be read to check the answers"
	case !d.Agrees:
		v.Verdict, v.Code = stormtypes.VerdictDisagrees, string(stormtypes.CodeDisagrees)
		v.Text = "the database disagrees with the answers: " + strings.Join(d.Problems, "; ")
	case failed > 0:
		v.Verdict, v.Code = stormtypes.VerdictFailed, top
		v.Text = fmt.Sprintf("%d of %d requests failed (%s: %s)", failed, s.Requests, top, s.Errors[top].Sample)
	case succ == 0 && n == s.Requests:
		v.Verdict, v.Code = stormtypes.VerdictRejected, top
		v.Text = fmt.Sprintf("every request was refused: %s: %s", top, s.Errors[top].Sample)
	default:
		v.Verdict = stormtypes.VerdictAgrees
		v.Text = fmt.Sprintf("executed at most once: %d EXECUTED, %d REPLAYED, %d JOINED; the database agrees",
			s.Outcomes[string(idemtype.Executed)], s.Outcomes[string(idemtype.Replayed)], s.Outcomes[string(idemtype.Joined)])
	}
	return v
}

// serviceTarget sends the service storm's request round-robin.
type serviceTarget struct {
	c      *http.Client
	spec   ServiceSpec
	header http.Header
}

func newServiceTarget(s ServiceSpec) *serviceTarget {
	h := s.Header.Clone()
	h.Set(idemtype.HeaderIdempotencyKey, s.Key)
	if h.Get("Content-Type") == "" && json.Valid(s.Body) {
		h.Set("Content-Type", "application/json")
	}
	return &serviceTarget{c: newHTTPClient(s.Concurrency, 0), spec: s, header: h}
}

func (t *serviceTarget) Close() { t.c.CloseIdleConnections() }

// Warm opens keep-alive connections to every instance (a GET of its root: any answer will do).
func (t *serviceTarget) Warm(ctx context.Context, n int) error {
	roots := make([]string, len(t.spec.URLs))
	for i, raw := range t.spec.URLs {
		u, _ := url.Parse(raw)
		roots[i] = u.Scheme + "://" + u.Host
	}
	per := (n + len(roots) - 1) / len(roots)
	for _, r := range roots {
		if err := warmHTTP(ctx, t.c, r, per); err != nil {
			return err
		}
	}
	return nil
}

func (t *serviceTarget) Do(ctx context.Context, i int) stormtypes.Event {
	server := i % len(t.spec.URLs)
	ev := t.do(ctx, t.spec.URLs[server])
	ev.Server = server + 1
	return ev
}

func (t *serviceTarget) do(ctx context.Context, target string) stormtypes.Event {
	req, err := http.NewRequestWithContext(ctx, t.spec.Method, target, bytes.NewReader(t.spec.Body))
	if err != nil {
		return stormtypes.Event{Outcome: string(stormtypes.CodeHTTPError), Err: err.Error()}
	}
	req.Header = t.header.Clone()
	resp, err := t.c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return stormtypes.Event{Outcome: string(stormtypes.CodeCancelled), Err: errCutShort, Status: 499}
		}
		return stormtypes.Event{Outcome: string(stormtypes.CodeHTTPError), Err: oneLine(err.Error())}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		if ctx.Err() != nil {
			return stormtypes.Event{Outcome: string(stormtypes.CodeCancelled), Err: errCutShort, Status: 499}
		}
		return stormtypes.Event{Outcome: string(stormtypes.CodeHTTPError), Err: oneLine(err.Error()), Status: resp.StatusCode}
	}
	ev := stormtypes.Event{Status: resp.StatusCode, Waited: resp.Header.Get(idemtype.HeaderWaited) == "true"}
	outcome := resp.Header.Get(idemtype.HeaderOutcome)
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300 && outcome != "" && outcome != idemtype.OutcomeUnknown:
		ev.Outcome = outcome
		sum := sha256.Sum256(raw)
		ev.BodySHA256 = hex.EncodeToString(sum[:])
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		ev.Outcome, ev.Err = fmt.Sprintf("HTTP_%d", resp.StatusCode), "a success without an Idempotency-Outcome header: is the route behind the idempotency middleware?"
	default:
		var eb errorBody
		if json.Unmarshal(raw, &eb) == nil && eb.Error.Code != "" {
			ev.Outcome, ev.Err = eb.Error.Code, oneLine(eb.Error.Message)
		} else {
			ev.Outcome, ev.Err = fmt.Sprintf("HTTP_%d", resp.StatusCode), oneLine(string(raw))
		}
	}
	return ev
}
