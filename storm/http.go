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

	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// The storm is a client of the HTTP API's public contract (SPEC §10.3): the header names and
// bodies below are the server's (package httpapi), pinned equal by TestTheHTTPTargetSpeaksTheAPIsContract.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerWaited         = "Idempotency-Waited"
	headerShare          = "X-Idemwork-Share"
)

// The request bodies the storm sends.
type (
	createBody struct {
		Title   string          `json:"title"`
		Summary *string         `json:"summary,omitempty"`
		Payload json.RawMessage `json:"payload,omitempty"`
	}
	patchBody struct {
		ExpectRevision int             `json:"expectRevision"`
		Title          *string         `json:"title,omitempty"`
		Summary        *string         `json:"summary,omitempty"`
		Payload        json.RawMessage `json:"payload,omitempty"`
	}
	featureBody struct {
		Input json.RawMessage `json:"input,omitempty"`
	}
)

// whoAmI is the body of GET /v1/whoami; errorBody the body of every error.
type (
	whoAmI struct {
		Owner string `json:"owner"`
	}
	errorBody struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
)

// NewHTTPTarget sends s's request to the servers at urls (request i to server i mod
// len(urls)) with the bearer token, keeping up to conns connections open; a request may take the
// storm's hold on top of its two minutes.
func NewHTTPTarget(urls []string, token string, s stormtypes.Spec, conns int) (Target, error) {
	if len(urls) == 0 {
		return nil, errors.New("storm: an HTTP target needs at least one server")
	}
	sv := servers{urls: urls, token: token}
	c := newHTTPClient(conns, s.Hold)
	method, path, body, err := httpRequestOf(s)
	if err != nil {
		return nil, err
	}
	targets := make([]string, len(urls))
	for i, u := range urls {
		targets[i] = strings.TrimSuffix(u, "/") + path
	}
	return &httpTarget{sv: sv, c: c, method: method, targets: targets, body: body, key: s.Key(), share: s.Share}, nil
}

type httpTarget struct {
	sv      servers
	c       *http.Client
	method  string
	targets []string
	body    []byte
	key     string
	share   bool
}

func (t *httpTarget) Warm(ctx context.Context, n int) error { return warmServers(ctx, t.c, t.sv, n) }
func (t *httpTarget) Close()                                { t.c.CloseIdleConnections() }

func (t *httpTarget) Do(ctx context.Context, i int) stormtypes.Event {
	server := i % len(t.targets)
	ev := httpDo(ctx, t.c, t.method, t.targets[server], t.body, t.sv.token, t.key, t.share)
	ev.Server = server + 1
	return ev
}

// servers are the HTTP servers a storm sends to (round-robin) and the bearer token for them.
type servers struct {
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

// warmServers opens keep-alive connections to every server (conns in all, spread evenly)
// before the barrier.
func warmServers(ctx context.Context, c *http.Client, t servers, conns int) error {
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
func httpRequestOf(s stormtypes.Spec) (string, string, []byte, error) {
	esc := url.PathEscape
	var method, path string
	var body any
	switch s.Op {
	case stormtypes.OpPatch:
		in := s.Patch
		method, path = http.MethodPatch, "/v1/modules/"+esc(in.Module)+"/records/"+esc(in.RecordID)
		body = patchBody{ExpectRevision: in.ExpectRevision, Title: in.Title, Summary: in.Summary, Payload: in.Payload}
	case stormtypes.OpAction:
		in := s.Action
		method, path = http.MethodPost, "/v1/modules/"+esc(in.Module)+"/records/"+esc(in.RecordID)+"/features/"+esc(in.FeatureID)
		body = featureBody{Input: in.Input}
	default:
		in := s.Create
		method, path = http.MethodPost, "/v1/modules/"+esc(in.Module)+"/records"
		body = createBody{Title: in.Title, Summary: in.Summary, Payload: in.Payload}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return "", "", nil, usage("the request body is not valid JSON: %v", err)
	}
	return method, path, b, nil
}

func httpDo(ctx context.Context, c *http.Client, method, target string, body []byte, token, key string, share bool) stormtypes.Event {
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return stormtypes.Event{Outcome: string(stormtypes.CodeHTTPError), Err: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(headerIdempotencyKey, key)
	if !share {
		req.Header.Set(headerShare, "off")
	}
	resp, err := c.Do(req)
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
	ev := eventOfHTTP(resp.StatusCode, raw)
	if resp.Header.Get(headerWaited) == "true" {
		ev.Waited = true // a rejection after a wait says so in the header, as a replay does
	}
	return ev
}

// checkTokenOwner asks every server whose owner the token acts as (GET /v1/whoami) and refuses
// a token of another owner than the storm's, before anything is fired: its writes would land
// with that owner and the verdict, read for the storm's owner, could only disagree.
func checkTokenOwner(ctx context.Context, c *http.Client, t servers, owner string) error {
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
			var who whoAmI
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
func eventOfHTTP(status int, raw []byte) stormtypes.Event {
	if status >= 200 && status < 300 {
		var res model.WriteResult
		if err := json.Unmarshal(raw, &res); err != nil || res.Outcome == "" {
			return stormtypes.Event{Outcome: fmt.Sprintf("HTTP_%d", status), Err: "the response is not a write result", Status: status}
		}
		ev := eventOf(res, nil)
		ev.Status = status
		return ev
	}
	var eb errorBody
	if err := json.Unmarshal(raw, &eb); err != nil || eb.Error.Code == "" {
		return stormtypes.Event{Outcome: fmt.Sprintf("HTTP_%d", status), Err: oneLine(string(raw)), Status: status}
	}
	return stormtypes.Event{Outcome: eb.Error.Code, Err: eb.Error.Message, Status: status}
}
