package storm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/store"
	"github.com/idemwork/idemwork/storm/stormtypes"
	"github.com/idemwork/idemwork/wire"
)

// The worker protocol between a storm and its child processes:
//
//   - the parent starts each child with WorkerEnvVar=1, the job (one JSON object) on stdin and
//     the read end of a pipe as file descriptor 3;
//   - a firing child (role "") connects, warms Concurrency connections, parks its workers and
//     prints a {"t":"ready"} line on stdout; when every child is ready the parent writes one
//     byte per child into the shared barrier pipe in a single write, which wakes every child at
//     once; a child reading EOF instead (the parent died or gave up) exits without firing; it
//     prints one {"t":"event"} line per request, then {"t":"done"};
//   - a serving child (role "serve") connects, serves the HTTP API on a loopback port, prints
//     {"t":"listening","url":…} and serves until its pipe reaches EOF (the parent closed it, or
//     died), then shuts down gracefully and prints {"t":"done"}.
//
// What a child may do is its host's decision (WorkerSession), from the host's own session rules
// (flags, config, environment), never from the job alone: a job can ask for less, never more.

// WorkerEnvVar is set to "1" in a storm's child processes. A test binary re-executed as a
// worker checks it in TestMain and calls WorkerMain instead of running tests.
const WorkerEnvVar = "IDEMWORK_STORM_WORKER"

// BarrierFD is the file descriptor of the barrier pipe in a child.
const BarrierFD = 3

// Roles of a child process.
const (
	roleFire  = ""
	roleServe = "serve"
)

// WorkerSession is what the host of a worker allows, from its own session rules.
type WorkerSession struct {
	// DSN, when set, is the database the worker connects to, whatever the job names (the CLI
	// resolves it as every command does: --dsn, IDEMWORK_DSN, config, or the embedded cluster).
	DSN string
	// ReadOnly refuses the job before anything connects: a storm writes.
	ReadOnly bool
	// Serve serves the HTTP API for a serving child (the host's HTTP adapter).
	Serve ServeFunc
}

// workerJob is what the parent tells a child.
type workerJob struct {
	Role      string          `json:"role,omitempty"`
	Spec      stormtypes.Spec `json:"spec"` // for a firing child N is its share and Processes is 1
	IndexBase int             `json:"indexBase"`
	// DSN is used only when the host's session names none (test binaries).
	DSN string `json:"dsn,omitempty"`
	// ReadOnly can only add to the host's session rules.
	ReadOnly bool `json:"readOnly,omitempty"`
	// AppName names the child's database sessions; MaxConns sizes its pool.
	AppName  string `json:"appName,omitempty"`
	MaxConns int    `json:"maxConns,omitempty"`
	// TTL and MemMaxContentLength make the child's kernel behave like the parent's.
	TTL                 time.Duration `json:"ttl"`
	MemMaxContentLength int           `json:"memMaxContentLength"`
	// ClockOffset is how far the parent's clock is moved (the TUI can move it to expire keys):
	// a child judges expiry by the same time.
	ClockOffset time.Duration `json:"clockOffset,omitempty"`
	// FaultClaim is the file whose creation claims the storm's one injected failure.
	FaultClaim string `json:"faultClaim,omitempty"`
	// URLs and Token: the servers a firing child sends to over HTTP; for a serving child,
	// Token is the one it accepts (for the storm's owner) and MaxBodyBytes its body cap.
	URLs         []string `json:"urls,omitempty"`
	Token        string   `json:"token,omitempty"`
	MaxBodyBytes int64    `json:"maxBodyBytes,omitempty"`
	// NilRaw names the JSON fields of Spec that are absent (nil) rather than a JSON null: both
	// travel as null, and the kernel treats them differently.
	NilRaw []string `json:"nilRaw,omitempty"`
}

// rawFields are Spec's JSON-document fields by name.
func rawFields(s *stormtypes.Spec) map[string]*json.RawMessage {
	return map[string]*json.RawMessage{"create.payload": &s.Create.Payload, "patch.payload": &s.Patch.Payload, "action.input": &s.Action.Input}
}

// newWorkerJob is the job of a child of the storm run by r: the parent's rules and kernel
// settings, role and spec filled in by the caller.
func newWorkerJob(s stormtypes.Spec, env Env) workerJob {
	j := workerJob{Spec: s, DSN: env.DSN}
	for name, f := range rawFields(&j.Spec) {
		if *f == nil {
			j.NilRaw = append(j.NilRaw, name)
		}
	}
	if k := env.Kernel; k != nil {
		j.ReadOnly = k.DB().ReadOnly
		j.TTL = k.Runner().TTL()
		j.MemMaxContentLength = k.Registry.Rules.Snapshot().MemMaxContentLength
		if c, ok := k.Runner().Clock().(interface{ Offset() time.Duration }); ok {
			j.ClockOffset = c.Offset()
		}
	}
	return j
}

// restoreNilRaw puts back the absent JSON fields after decoding.
func (j *workerJob) restoreNilRaw() {
	fields := rawFields(&j.Spec)
	for _, name := range j.NilRaw {
		if f, ok := fields[name]; ok {
			*f = nil
		}
	}
}

// workerMsg is one line a child prints.
type workerMsg struct {
	T     string            `json:"t"` // ready | listening | event | error | done
	PID   int               `json:"pid,omitempty"`
	Event *stormtypes.Event `json:"e,omitempty"`
	Msg   string            `json:"msg,omitempty"`
	URL   string            `json:"url,omitempty"`
	// Code is an error line's code (its Msg is the message without it): the parent answers a
	// child that could not get ready with it, not with INTERNAL.
	Code apperr.Code `json:"code,omitempty"`
}

// WorkerMain runs this process as a storm child: the job from in, the barrier from BarrierFD,
// results to out, within what session allows. It is what the hidden `idemwork storm-worker`
// command calls.
func WorkerMain(ctx context.Context, in io.Reader, out io.Writer, session WorkerSession) error {
	if os.Getenv(WorkerEnvVar) != "1" {
		return usage("storm-worker is started by 'idemwork storm --processes N', not by hand")
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(BarrierFD, &st); err != nil {
		return usage("storm-worker: no barrier pipe on file descriptor %d", BarrierFD)
	}
	barrier := os.NewFile(BarrierFD, "storm-barrier")
	defer barrier.Close()
	return ServeWorker(ctx, in, out, barrier, session)
}

// ServeWorker runs one child's part of a storm (see the protocol above).
func ServeWorker(ctx context.Context, in io.Reader, out io.Writer, barrier io.Reader, session WorkerSession) error {
	w := &lineWriter{enc: json.NewEncoder(out)}
	err := serveWorker(ctx, in, w, barrier, session)
	if err != nil {
		// What the parent shows its user: the coded message, never the driver's text.
		ae := wire.Coded(err)
		w.send(workerMsg{T: "error", Code: ae.Code, Msg: ae.Message})
	}
	return err
}

func serveWorker(ctx context.Context, in io.Reader, w *lineWriter, barrier io.Reader, session WorkerSession) error {
	var job workerJob
	if err := json.NewDecoder(in).Decode(&job); err != nil {
		return fmt.Errorf("storm-worker: read the job: %w", err)
	}
	job.restoreNilRaw()
	if session.ReadOnly || job.ReadOnly {
		return apperr.New(apperr.ReadOnly, "storm-worker: this session is read-only and a storm writes (the parent passes --allow-writes when its own session may write)")
	}
	dsn := session.DSN
	if dsn == "" {
		dsn = job.DSN
	}
	var f faults
	if job.Spec.FailFirst && job.FaultClaim != "" {
		f.fail = claimFault(job.FaultClaim)
	}
	f.hold = job.Spec.Hold
	if job.Role == roleServe {
		return serveAPI(ctx, job, dsn, session.Serve, f, w, barrier)
	}
	spec := job.Spec
	if spec.N < 1 || spec.Concurrency < 1 {
		return apperr.New(apperr.Internal, "storm-worker: the job has no requests")
	}
	var t Target
	if spec.Via == stormtypes.ViaHTTP {
		if len(job.URLs) == 0 {
			return apperr.New(apperr.Internal, "storm-worker: the job names no server")
		}
		ht, err := NewHTTPTarget(job.URLs, job.Token, spec, spec.Concurrency)
		if err != nil {
			return err
		}
		t = ht
		f = faults{} // the servers inject, not their clients
	} else {
		k, closeK, err := openKernel(ctx, dsn, job.kernelOptions(spec.Concurrency+2))
		if err != nil {
			return err
		}
		defer closeK()
		t = NewKernelTarget(f.on(k), spec)
	}
	defer t.Close()
	if err := t.Warm(ctx, spec.Concurrency); err != nil {
		return err
	}

	pid := os.Getpid()
	release := make(chan struct{})
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var parked, wg sync.WaitGroup
	parked.Add(spec.Concurrency)
	wg.Go(func() {
		fire(fctx, spec.N, spec.Concurrency, job.IndexBase, pid, t, &parked, release, func(ev stormtypes.Event) {
			w.send(workerMsg{T: "event", Event: &ev})
		})
	})
	parked.Wait()
	w.send(workerMsg{T: "ready", PID: pid})

	var b [1]byte
	n, err := barrier.Read(b[:])
	if n != 1 {
		cancel() // never released: the parent gave up or died
		wg.Wait()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("storm-worker: the barrier closed without a release: %w", err)
	}
	close(release)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := w.err(); err != nil {
		return err
	}
	w.send(workerMsg{T: "done", PID: pid})
	return w.err()
}

// kernelOptions are the job's kernel settings for a pool of want connections.
func (j workerJob) kernelOptions(want int) kernelOptions {
	clock := &idem.OffsetClock{}
	clock.Advance(j.ClockOffset)
	if j.MaxConns > 0 { // the parent sized the pool for this child, within its cap
		want = j.MaxConns
	}
	return kernelOptions{appName: j.AppName, maxConns: want, ttl: j.TTL, clock: clock,
		registry: kernel.NewRegistry(kernel.NewRules(j.MemMaxContentLength))}
}

// serveAPI is a serving child: the HTTP API over its own kernel until its pipe closes.
func serveAPI(ctx context.Context, job workerJob, dsn string, serve ServeFunc, f faults, w *lineWriter, lifeline io.Reader) error {
	if serve == nil {
		return errors.New("storm-worker: this host cannot serve the HTTP API (WorkerSession.Serve)")
	}
	k, closeK, err := openKernel(ctx, dsn, job.kernelOptions(job.Spec.Concurrency+2))
	if err != nil {
		return err
	}
	defer closeK()
	url, stop, err := startServer(ctx, serve, k, job.Token, job.Spec.Owner(), job.MaxBodyBytes, f)
	if err != nil {
		return err
	}
	defer stop()
	pid := os.Getpid()
	w.send(workerMsg{T: "listening", PID: pid, URL: url})
	_, _ = io.Copy(io.Discard, lifeline) // until the parent closes it, or dies
	stop()
	w.send(workerMsg{T: "done", PID: pid})
	return w.err()
}

// kernelOptions describe a kernel of the storm's own: its pool and the home kernel's settings.
type kernelOptions struct {
	appName  string
	readOnly bool
	maxConns int
	ttl      time.Duration
	clock    idem.Clock
	registry *kernel.Registry
}

// openKernel opens a pool on dsn named o.appName and a kernel over it; close releases both.
func openKernel(ctx context.Context, dsn string, o kernelOptions) (*kernel.Kernel, func(), error) {
	if dsn == "" {
		return nil, nil, errors.New("storm: no database to connect to (Env.DSN)")
	}
	db, err := store.Open(ctx, dsn, store.Options{ReadOnly: o.readOnly, MaxConns: int32(o.maxConns), ApplicationName: o.appName})
	if err != nil {
		return nil, nil, fmt.Errorf("storm: %w", err)
	}
	// A storm is a deliberate load on one key, sized by its own pool: the per-key and per-owner
	// shares that keep one client of `serve` from starving the others would only hide what it is
	// fired to show (every request on the unique index), so its runner may use the whole pool.
	all := db.MaxConns()
	limits := idem.Limits{KeyMaxConns: all, OwnerMaxConns: all}
	k := kernel.New(db, o.registry, kernel.Options{Runner: idem.Options{TTL: o.ttl, Clock: o.clock, Limits: limits}})
	return k, db.Close, nil
}

// lineWriter writes one JSON message per line; workers share it.
type lineWriter struct {
	mu       sync.Mutex
	enc      *json.Encoder
	writeErr error
}

func (w *lineWriter) send(m workerMsg) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.writeErr != nil {
		return
	}
	if err := w.enc.Encode(m); err != nil {
		w.writeErr = errors.Join(errors.New("storm-worker: write to the parent"), err)
	}
}

func (w *lineWriter) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writeErr
}
