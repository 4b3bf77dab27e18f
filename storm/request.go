package storm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"idemwork/httpapi"
	"idemwork/idem"
	"idemwork/kernel"
	"idemwork/wire"
)

// doer performs request i (its index in the whole storm) and describes its result; the caller
// stamps index, pid and latency.
type doer func(ctx context.Context, i int) Event

// kernelDoer calls the kernel directly: the in-process path.
func kernelDoer(k *kernel.Kernel, s Spec) doer {
	share := s.Share
	switch s.Op {
	case OpPatch:
		in := s.Patch
		in.ShareInFlight = &share
		return func(ctx context.Context, _ int) Event { return eventOf(k.Patch(ctx, in)) }
	case OpAction:
		in := s.Action
		in.ShareInFlight = &share
		return func(ctx context.Context, _ int) Event { return eventOf(k.RunFeature(ctx, in)) }
	default:
		in := s.Create
		in.ShareInFlight = &share
		return func(ctx context.Context, _ int) Event { return eventOf(k.Create(ctx, in)) }
	}
}

func eventOf(res kernel.WriteResult, err error) Event {
	if err != nil {
		return errorEvent(err)
	}
	ev := Event{Outcome: string(res.Outcome), Waited: res.Waited, Status: http.StatusOK}
	if res.Record != nil {
		ev.RecordID, ev.Revision = res.Record.ID, res.Record.Revision
	}
	if res.Execution != nil {
		ev.ExecutionID, ev.ExecutionStatus = res.Execution.ID, res.Execution.Status
	}
	return ev
}

// errCutShort is the sample of a request the storm's stop cut short.
const errCutShort = "cut short: the storm was stopped while this request ran"

func errorEvent(err error) Event {
	if errors.Is(err, context.Canceled) {
		return Event{Outcome: string(CodeCancelled), Err: errCutShort, Status: 499}
	}
	// What a client would be told (a known cause coded, anything else INTERNAL naming the step
	// and the SQLSTATE), never the driver's text.
	ae := wire.Coded(err)
	msg := oneLine(ae.Message)
	// The same fact as a replay's waited: this request queued on the unique index first.
	return Event{Outcome: string(ae.Code), Err: msg, Status: ae.Status(), Waited: idem.WaitedOnIndex(err)}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// httpTarget is the servers a storm sends to (round-robin) and the bearer token for them.
type httpTarget struct {
	urls  []string
	token string
}

// newHTTPClient returns a client keeping up to conns idle connections per host and never
// going through an environment proxy (the targets are normally loopback); a request may take
// the storm's hold on top of its two minutes.
func newHTTPClient(conns int, hold time.Duration) *http.Client {
	return &http.Client{
		Timeout: 2*time.Minute + hold,
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
}

// warmTargets opens keep-alive connections to every server (conns in all, spread evenly)
// before the barrier.
func warmTargets(ctx context.Context, c *http.Client, t httpTarget, conns int) error {
	per := (conns + len(t.urls) - 1) / len(t.urls)
	for _, u := range t.urls {
		if err := warmHTTP(ctx, c, u, per); err != nil {
			return err
		}
	}
	return nil
}

// warmHTTP opens conns keep-alive connections to the server before the barrier, so the storm
// measures requests, not TCP handshakes. A server that cannot be reached at all is an error.
func warmHTTP(ctx context.Context, c *http.Client, base string, conns int) error {
	var wg sync.WaitGroup
	errs := make([]error, conns)
	for i := range conns {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/healthz", nil)
			if err != nil {
				errs[i] = err
				return
			}
			resp, err := c.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return fmt.Errorf("storm: cannot reach %s: %w", base, err)
		}
	}
	return nil
}

// httpRequestOf builds the method, path and body of s's request for the HTTP API.
func httpRequestOf(s Spec) (string, string, []byte, error) {
	esc := url.PathEscape
	var method, path string
	var body any
	switch s.Op {
	case OpPatch:
		in := s.Patch
		method, path = http.MethodPatch, "/v1/modules/"+esc(in.Module)+"/records/"+esc(in.RecordID)
		body = httpapi.PatchBody{ExpectRevision: in.ExpectRevision, Title: in.Title, Summary: in.Summary, Payload: in.Payload}
	case OpAction:
		in := s.Action
		method, path = http.MethodPost, "/v1/modules/"+esc(in.Module)+"/records/"+esc(in.RecordID)+"/features/"+esc(in.FeatureID)
		body = httpapi.FeatureBody{Input: in.Input}
	default:
		in := s.Create
		method, path = http.MethodPost, "/v1/modules/"+esc(in.Module)+"/records"
		body = httpapi.CreateBody{Title: in.Title, Summary: in.Summary, Payload: in.Payload}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return "", "", nil, usage("the request body is not valid JSON: %v", err)
	}
	return method, path, b, nil
}

// httpDoer sends s's request to the API: request i to server i mod len(t.urls).
func httpDoer(c *http.Client, t httpTarget, s Spec) (doer, error) {
	method, path, body, err := httpRequestOf(s)
	if err != nil {
		return nil, err
	}
	targets := make([]string, len(t.urls))
	for i, u := range t.urls {
		targets[i] = strings.TrimSuffix(u, "/") + path
	}
	key := s.Key()
	return func(ctx context.Context, i int) Event {
		server := i % len(targets)
		ev := httpDo(ctx, c, method, targets[server], body, t.token, key, s.Share)
		ev.Server = server + 1
		return ev
	}, nil
}

func httpDo(ctx context.Context, c *http.Client, method, target string, body []byte, token, key string, share bool) Event {
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return Event{Outcome: string(CodeHTTPError), Err: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(httpapi.HeaderIdempotencyKey, key)
	if !share {
		req.Header.Set(httpapi.HeaderShare, "off")
	}
	resp, err := c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return Event{Outcome: string(CodeCancelled), Err: errCutShort, Status: 499}
		}
		return Event{Outcome: string(CodeHTTPError), Err: oneLine(err.Error())}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		if ctx.Err() != nil {
			return Event{Outcome: string(CodeCancelled), Err: errCutShort, Status: 499}
		}
		return Event{Outcome: string(CodeHTTPError), Err: oneLine(err.Error()), Status: resp.StatusCode}
	}
	ev := eventOfHTTP(resp.StatusCode, raw)
	if resp.Header.Get(httpapi.HeaderWaited) == "true" {
		ev.Waited = true // a rejection after a wait says so in the header, as a replay does
	}
	return ev
}

// checkTokenOwner asks every server whose owner the token acts as (GET /v1/whoami) and refuses
// a token of another owner than the storm's, before anything is fired: its writes would land
// with that owner and the verdict, read for the storm's owner, could only disagree.
func checkTokenOwner(ctx context.Context, c *http.Client, t httpTarget, owner string) error {
	for _, base := range t.urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/v1/whoami", nil)
		if err != nil {
			return usage("--url %q: %v", base, err)
		}
		req.Header.Set("Authorization", "Bearer "+t.token)
		resp, err := c.Do(req)
		if err != nil {
			return fmt.Errorf("storm: cannot reach %s: %w", base, err)
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		if err != nil {
			return fmt.Errorf("storm: read %s/v1/whoami: %w", base, err)
		}
		switch resp.StatusCode {
		case http.StatusOK:
			var who httpapi.WhoAmI
			if err := json.Unmarshal(raw, &who); err != nil || who.Owner == "" {
				return fmt.Errorf("storm: %s/v1/whoami answered %s", base, oneLine(string(raw)))
			}
			if who.Owner != owner {
				return usage("the token acts as owner %s at %s, not as --owner %s: the storm's writes would be %s's; use a token mapped to %s (--token, IDEMWORK_TOKEN or config [http.tokens])",
					who.Owner, base, owner, who.Owner, owner)
			}
		case http.StatusNotFound:
			// A server without /v1/whoami (an older idemwork): the owner cannot be asked.
		default:
			ev := eventOfHTTP(resp.StatusCode, raw)
			return usage("%s refuses the token (%s: %s); use a token mapped to owner %s (--token, IDEMWORK_TOKEN or config [http.tokens])", base, ev.Outcome, ev.Err, owner)
		}
	}
	return nil
}

// eventOfHTTP reads a response body of SPEC §10.2: a write result or a coded error.
func eventOfHTTP(status int, raw []byte) Event {
	if status >= 200 && status < 300 {
		var res kernel.WriteResult
		if err := json.Unmarshal(raw, &res); err != nil || res.Outcome == "" {
			return Event{Outcome: fmt.Sprintf("HTTP_%d", status), Err: "the response is not a write result", Status: status}
		}
		ev := eventOf(res, nil)
		ev.Status = status
		return ev
	}
	var eb httpapi.ErrorBody
	if err := json.Unmarshal(raw, &eb); err != nil || eb.Error.Code == "" {
		return Event{Outcome: fmt.Sprintf("HTTP_%d", status), Err: oneLine(string(raw)), Status: status}
	}
	return Event{Outcome: string(eb.Error.Code), Err: eb.Error.Message, Status: status}
}
