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

	"idemwork/idem"
	"idemwork/kernel"
	"idemwork/store"
)

// The worker protocol between a storm and its child processes:
//
//   - the parent starts each child with WorkerEnvVar=1, the job (one JSON object) on stdin and
//     the read end of one shared barrier pipe as file descriptor 3;
//   - the child connects, warms Concurrency connections, parks its workers and prints a
//     {"t":"ready"} line on stdout;
//   - when every child is ready the parent writes one byte per child into the barrier pipe in a
//     single write, which wakes every child at once; a child reading EOF instead (the parent
//     died or gave up) exits without firing;
//   - the child prints one {"t":"event"} line per request, then {"t":"done"}.

// WorkerEnvVar is set to "1" in a storm's child processes. A test binary re-executed as a
// worker checks it in TestMain and calls WorkerMain instead of running tests.
const WorkerEnvVar = "IDEMWORK_STORM_WORKER"

// BarrierFD is the file descriptor of the barrier pipe in a child.
const BarrierFD = 3

// workerJob is what the parent tells a child.
type workerJob struct {
	Spec      Spec   `json:"spec"` // N is this child's share; Processes is 1
	IndexBase int    `json:"indexBase"`
	DSN       string `json:"dsn,omitempty"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
	// TTL and MemMaxContentLength make the child's kernel behave like the parent's.
	TTL                 time.Duration `json:"ttl"`
	MemMaxContentLength int           `json:"memMaxContentLength"`
	// ClockOffset is how far the parent's clock is moved (the TUI can move it to expire keys):
	// a child judges expiry by the same time.
	ClockOffset time.Duration `json:"clockOffset,omitempty"`
	// FaultClaim is the file whose creation claims the storm's one injected failure.
	FaultClaim string `json:"faultClaim,omitempty"`
	URL        string `json:"url,omitempty"`
	Token      string `json:"token,omitempty"`
	// NilRaw names the JSON fields of Spec that are absent (nil) rather than a JSON null: both
	// travel as null, and the kernel treats them differently.
	NilRaw []string `json:"nilRaw,omitempty"`
}

// rawFields are Spec's JSON-document fields by name.
func rawFields(s *Spec) map[string]*json.RawMessage {
	return map[string]*json.RawMessage{"create.payload": &s.Create.Payload, "patch.payload": &s.Patch.Payload, "action.input": &s.Action.Input}
}

func newWorkerJob(s Spec) workerJob {
	j := workerJob{Spec: s}
	for name, f := range rawFields(&j.Spec) {
		if *f == nil {
			j.NilRaw = append(j.NilRaw, name)
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
	T     string `json:"t"` // ready | event | error | done
	PID   int    `json:"pid,omitempty"`
	Event *Event `json:"e,omitempty"`
	Msg   string `json:"msg,omitempty"`
}

// WorkerMain runs this process as a storm child: the job from in, the barrier from BarrierFD,
// results to out. It is what the hidden `idemwork storm-worker` command calls.
func WorkerMain(ctx context.Context, in io.Reader, out io.Writer) error {
	if os.Getenv(WorkerEnvVar) != "1" {
		return usage("storm-worker is started by 'idemwork storm --processes N', not by hand")
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(BarrierFD, &st); err != nil {
		return usage("storm-worker: no barrier pipe on file descriptor %d", BarrierFD)
	}
	barrier := os.NewFile(BarrierFD, "storm-barrier")
	defer barrier.Close()
	return ServeWorker(ctx, in, out, barrier)
}

// ServeWorker runs one child's share of a storm (see the protocol above).
func ServeWorker(ctx context.Context, in io.Reader, out io.Writer, barrier io.Reader) error {
	w := &lineWriter{enc: json.NewEncoder(out)}
	err := serveWorker(ctx, in, w, barrier)
	if err != nil {
		w.send(workerMsg{T: "error", Msg: err.Error()})
	}
	return err
}

func serveWorker(ctx context.Context, in io.Reader, w *lineWriter, barrier io.Reader) error {
	var job workerJob
	if err := json.NewDecoder(in).Decode(&job); err != nil {
		return fmt.Errorf("storm-worker: read the job: %w", err)
	}
	job.restoreNilRaw()
	spec := job.Spec
	if spec.N < 1 || spec.Concurrency < 1 {
		return fmt.Errorf("storm-worker: the job has no requests")
	}
	var do doer
	if spec.Via == ViaHTTP {
		c := newHTTPClient(spec.Concurrency)
		defer c.CloseIdleConnections()
		t := httpTarget{url: job.URL, token: job.Token}
		if err := warmHTTP(ctx, c, t.url, spec.Concurrency); err != nil {
			return err
		}
		d, err := httpDoer(c, t, spec)
		if err != nil {
			return err
		}
		do = d
	} else {
		db, err := store.Open(ctx, job.DSN, store.Options{ReadOnly: job.ReadOnly, MaxConns: int32(spec.Concurrency + 2)})
		if err != nil {
			return fmt.Errorf("storm-worker: %w", err)
		}
		defer db.Close()
		if err := warmPool(ctx, db.Pool, spec.Concurrency); err != nil {
			return err
		}
		clock := &idem.OffsetClock{}
		clock.Advance(job.ClockOffset)
		runner := idem.NewRunner(db, idem.Options{TTL: job.TTL, Clock: clock})
		k := kernel.New(runner, kernel.NewRegistry(kernel.NewRules(job.MemMaxContentLength)), kernel.Options{})
		do = kernelDoer(k, spec)
	}
	var fault idem.FaultFunc
	if spec.FailFirst && job.FaultClaim != "" {
		fault = claimFault(job.FaultClaim)
	}

	pid := os.Getpid()
	release := make(chan struct{})
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var parked, wg sync.WaitGroup
	parked.Add(spec.Concurrency)
	wg.Go(func() {
		fire(withFault(fctx, fault), spec.N, spec.Concurrency, job.IndexBase, pid, do, &parked, release, func(ev Event) {
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
