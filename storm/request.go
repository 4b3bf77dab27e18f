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

	"idemwork/apperr"
	"idemwork/httpapi"
	"idemwork/kernel"
)

// doer performs one request and describes its result; the caller stamps index, pid and latency.
type doer func(ctx context.Context) Event

// kernelDoer calls the kernel directly: the in-process path.
func kernelDoer(k *kernel.Kernel, s Spec) doer {
	share := s.Share
	switch s.Op {
	case OpPatch:
		in := s.Patch
		in.ShareInFlight = &share
		return func(ctx context.Context) Event { return eventOf(k.Patch(ctx, in)) }
	case OpAction:
		in := s.Action
		in.ShareInFlight = &share
		return func(ctx context.Context) Event { return eventOf(k.RunFeature(ctx, in)) }
	default:
		in := s.Create
		in.ShareInFlight = &share
		return func(ctx context.Context) Event { return eventOf(k.Create(ctx, in)) }
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
		ev.ExecutionID = res.Execution.ID
	}
	return ev
}

func errorEvent(err error) Event {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Event{Outcome: string(CodeCancelled), Err: err.Error(), Status: 499}
	}
	ae := apperr.As(err)
	msg := ae.Message
	if ae.Code == apperr.Internal {
		// A storm is a developer's tool: the cause of an internal error is what they need.
		msg = oneLine(err.Error())
	}
	return Event{Outcome: string(ae.Code), Err: msg, Status: ae.Status()}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// httpTarget is a server and the bearer token to use against it.
type httpTarget struct {
	url   string
	token string
}

// newHTTPClient returns a client keeping up to conns idle connections to one host and never
// going through an environment proxy (the target is normally loopback).
func newHTTPClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 2 * time.Minute,
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
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

// httpDoer sends s's request to the API.
func httpDoer(c *http.Client, t httpTarget, s Spec) (doer, error) {
	method, path, body, err := httpRequestOf(s)
	if err != nil {
		return nil, err
	}
	target := strings.TrimSuffix(t.url, "/") + path
	key := s.Key()
	return func(ctx context.Context) Event {
		req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
		if err != nil {
			return Event{Outcome: string(CodeHTTPError), Err: err.Error()}
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+t.token)
		req.Header.Set(httpapi.HeaderIdempotencyKey, key)
		if !s.Share {
			req.Header.Set(httpapi.HeaderShare, "off")
		}
		resp, err := c.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return Event{Outcome: string(CodeCancelled), Err: ctx.Err().Error(), Status: 499}
			}
			return Event{Outcome: string(CodeHTTPError), Err: oneLine(err.Error())}
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		if err != nil {
			return Event{Outcome: string(CodeHTTPError), Err: oneLine(err.Error()), Status: resp.StatusCode}
		}
		return eventOfHTTP(resp.StatusCode, raw)
	}, nil
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
