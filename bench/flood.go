package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemwork/idemwork/storm"
)

// A flood is the flooding owner's side of the fairness cell: N GETs of one URL, InFlight at a
// time (all N at once when InFlight ≥ N), each on its own connection. `idemwork bench` fires it
// from a child process of its own (FloodMain, the hidden `bench-flood` command), as a real
// client is: a flood fired from the server's own process would queue the server's goroutines
// behind its 2,000 client goroutines and measure that instead.

// FloodJob is what a flood fires; it travels on the child's stdin (the token with it, never in
// its arguments). With Probe it is the other owner's side instead (probeMain): GETs of URL one
// after another on one connection, timed.
type FloodJob struct {
	URL      string `json:"url"`
	Token    string `json:"token"`
	N        int    `json:"n"`
	InFlight int    `json:"inFlight"`
	Probe    bool   `json:"probe,omitempty"`
}

// ProbeResult is what a probe measured: each GET's latency in microseconds, one after another,
// or why one failed (any answer but 200 is a failure: the other owner is never refused).
type ProbeResult struct {
	LatenciesUs []int64 `json:"latenciesUs"`
	Error       string  `json:"error,omitempty"`
}

// FloodResult is what a flood got.
type FloodResult struct {
	WallMs   float64        `json:"wallMs"`
	Statuses map[string]int `json:"statuses"`
}

// flood fires job; ready is called once every request is parked on its connection, and the
// flood starts when release closes.
func flood(ctx context.Context, job FloodJob, ready func(), release <-chan struct{}) FloodResult {
	inFlight := min(max(job.InFlight, 1), job.N)
	client := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: inFlight, MaxIdleConns: inFlight}}
	defer client.CloseIdleConnections()
	res := FloodResult{Statuses: map[string]int{}}
	var mu sync.Mutex
	var parked, done sync.WaitGroup
	next := make(chan struct{}, job.N)
	for range job.N {
		next <- struct{}{}
	}
	close(next)
	parked.Add(inFlight)
	for range inFlight {
		done.Go(func() {
			parked.Done()
			<-release
			for range next {
				key := "error"
				if req, err := http.NewRequestWithContext(ctx, http.MethodGet, job.URL, nil); err == nil {
					req.Header.Set("Authorization", "Bearer "+job.Token)
					if resp, err := client.Do(req); err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
						key = fmt.Sprint(resp.StatusCode)
					}
				}
				mu.Lock()
				res.Statuses[key]++
				mu.Unlock()
			}
		})
	}
	parked.Wait()
	ready()
	<-release
	start := time.Now()
	done.Wait()
	res.WallMs = ms(time.Since(start))
	return res
}

// FloodMain is the child side of a flood: the job on in, a "ready" line on out once every
// request is parked, the flood when a line arrives on in, then the result as one JSON line.
func FloodMain(ctx context.Context, in io.Reader, out io.Writer) error {
	r := bufio.NewReader(in)
	line, err := r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("bench-flood: read the job: %w", err)
	}
	var job FloodJob
	if err := json.Unmarshal(line, &job); err != nil || job.URL == "" || job.N < 1 && !job.Probe {
		return fmt.Errorf("bench-flood: the job is not a flood (%v)", err)
	}
	if job.Probe {
		return probeMain(ctx, job, r, out)
	}
	release := make(chan struct{})
	res := flood(ctx, job, func() {
		fmt.Fprintln(out, `{"ready":true}`)
		go func() {
			_, _ = r.ReadBytes('\n')
			close(release)
		}()
	}, release)
	b, _ := json.Marshal(res)
	_, err = fmt.Fprintln(out, string(b))
	return err
}

// probeMain is the other owner's side of the fairness cell, in a process of its own as the
// flood's is, so that neither side's client competes with the server's goroutines inside the
// server's process (where the cell measured its probe before: each of its GETs then waited for
// the server's run queue three times, its own request, its client's write and its client's
// read). It answers a "ready" line, then takes commands, one a line, each answered by one
// ProbeResult line: a number N probes N times; "run" probes until the next line arrives.
// It ends at the end of in.
func probeMain(ctx context.Context, job FloodJob, in *bufio.Reader, out io.Writer) error {
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	get := func() (time.Duration, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, job.URL, nil)
		if err != nil {
			return 0, err
		}
		req.Header.Set("Authorization", "Bearer "+job.Token)
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		d := time.Since(t0)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("the other owner's GET answered %d", resp.StatusCode)
		}
		return d, err
	}
	fmt.Fprintln(out, `{"ready":true}`)
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return nil
		}
		cmd := strings.TrimSpace(line)
		var res ProbeResult
		record := func() bool {
			d, err := get()
			if err != nil {
				res.Error = err.Error()
				return false
			}
			res.LatenciesUs = append(res.LatenciesUs, d.Microseconds())
			return true
		}
		if cmd == "run" {
			stop := make(chan struct{})
			go func() {
				_, _ = in.ReadString('\n')
				close(stop)
			}()
		probing:
			for record() {
				select {
				case <-stop:
					break probing
				default:
				}
			}
			<-stop
		} else if n, err := strconv.Atoi(cmd); err == nil {
			for i := 0; i < n && record(); i++ {
			}
		} else {
			res.Error = fmt.Sprintf("unknown command %q", cmd)
		}
		b, _ := json.Marshal(res)
		if _, err := fmt.Fprintln(out, string(b)); err != nil {
			return err
		}
	}
}

// floodRunner starts a flood and reports when it ended: in this process, or in a child
// (exe args…) when args is set.
type floodRunner struct {
	exe  string
	args []string
}

// start parks job's requests and returns a function that releases them and a channel that
// yields the result once the flood is over.
func (f floodRunner) start(ctx context.Context, job FloodJob) (release func(), result <-chan FloodResult, err error) {
	out := make(chan FloodResult, 1)
	if len(f.args) == 0 {
		go0 := make(chan struct{})
		parked := make(chan struct{})
		go func() { out <- flood(ctx, job, func() { close(parked) }, go0) }()
		<-parked
		return func() { close(go0) }, out, nil
	}
	cmd, stdin, stdout, err := f.command(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := deprioritize(cmd.Process.Pid, FloodNice); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, nil, err
	}
	job.InFlight = min(max(job.InFlight, 1), job.N)
	b, _ := json.Marshal(job)
	if _, err := stdin.Write(append(b, '\n')); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, nil, err
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || !json.Valid(lines.Bytes()) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, nil, fmt.Errorf("bench: the flood process never got ready")
	}
	go func() {
		var res FloodResult
		if lines.Scan() {
			_ = json.Unmarshal(lines.Bytes(), &res)
		}
		_ = cmd.Wait()
		if res.Statuses == nil {
			res.Statuses = map[string]int{"flood process failed": job.N}
		}
		out <- res
	}()
	return func() {
		_, _ = stdin.Write([]byte("go\n"))
		_ = stdin.Close()
	}, out, nil
}

// command starts the child (exe args…) with pipes to its stdin and from its stdout.
func (f floodRunner) command(ctx context.Context) (*exec.Cmd, io.WriteCloser, io.Reader, error) {
	exe := f.exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, nil, nil, err
		}
	}
	cmd := exec.CommandContext(ctx, exe, f.args...)
	// Marked as a storm's child is: a test binary standing in for idemwork runs the command line
	// it is given instead of its tests (the CLI's TestMain).
	cmd.Env = append(os.Environ(), storm.WorkerEnvVar+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, nil, fmt.Errorf("bench: start the flood process: %w", err)
	}
	return cmd, stdin, stdout, nil
}

// prober is the other owner's side of the fairness cell (probeMain): in a child when the runner
// has args, else in a goroutine of this process (tests).
type prober struct {
	in    io.WriteCloser
	lines *bufio.Scanner
	wait  func()
}

// probe starts the other owner's side for job (its URL and token) and waits until it is ready.
func (f floodRunner) probe(ctx context.Context, job FloodJob) (*prober, error) {
	job.Probe = true
	p := &prober{}
	var out io.Reader
	if len(f.args) == 0 {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan struct{})
		go func() {
			_ = FloodMain(ctx, inR, outW)
			_ = outW.Close()
			_ = inR.Close()
			close(done)
		}()
		p.in, out, p.wait = inW, outR, func() { <-done }
	} else {
		cmd, stdin, stdout, err := f.command(ctx)
		if err != nil {
			return nil, err
		}
		p.in, out, p.wait = stdin, stdout, func() { _ = cmd.Wait() }
	}
	p.lines = bufio.NewScanner(out)
	p.lines.Buffer(nil, 64<<20)
	b, _ := json.Marshal(job)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		p.close()
		return nil, err
	}
	if !p.lines.Scan() || !json.Valid(p.lines.Bytes()) {
		p.close()
		return nil, fmt.Errorf("bench: the probe process never got ready")
	}
	return p, nil
}

// send writes one command line (a count, "run", or the line that ends a run).
func (p *prober) send(line string) error {
	_, err := io.WriteString(p.in, line+"\n")
	return err
}

// result reads the answer to a count or a run.
func (p *prober) result() ([]time.Duration, error) {
	if !p.lines.Scan() {
		return nil, fmt.Errorf("bench: the probe process ended without its result")
	}
	var res ProbeResult
	if err := json.Unmarshal(p.lines.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("bench: the probe's result: %w", err)
	}
	if res.Error != "" {
		return nil, fmt.Errorf("bench: fairness: %s", res.Error)
	}
	out := make([]time.Duration, len(res.LatenciesUs))
	for i, us := range res.LatenciesUs {
		out[i] = time.Duration(us) * time.Microsecond
	}
	return out, nil
}

// count probes n times, one after another.
func (p *prober) count(n int) ([]time.Duration, error) {
	if err := p.send(strconv.Itoa(n)); err != nil {
		return nil, err
	}
	return p.result()
}

func (p *prober) close() {
	_ = p.in.Close()
	p.wait()
}
