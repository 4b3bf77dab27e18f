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
// its arguments).
type FloodJob struct {
	URL      string `json:"url"`
	Token    string `json:"token"`
	N        int    `json:"n"`
	InFlight int    `json:"inFlight"`
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
	if err := json.Unmarshal(line, &job); err != nil || job.N < 1 || job.URL == "" {
		return fmt.Errorf("bench-flood: the job is not a flood (%v)", err)
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
	exe := f.exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return nil, nil, err
		}
	}
	cmd := exec.CommandContext(ctx, exe, f.args...)
	// Marked as a storm's child is: a test binary standing in for idemwork runs the command line
	// it is given instead of its tests (the CLI's TestMain).
	cmd.Env = append(os.Environ(), storm.WorkerEnvVar+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("bench: start the flood process: %w", err)
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
