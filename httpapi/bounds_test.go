package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/httpapi"
	"github.com/idemwork/idemwork/wire"
)

// scrape returns the text of /metrics.
func (b *testBundle) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(b.url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(text)
}

var requestSeries = regexp.MustCompile(`(?m)^idemwork_http_requests_total\{(.*)\} `)

// Issue 28: a label takes its values from a fixed set, never from the request. 300 requests with
// random 2,000-character methods add at most a few series to /metrics, and every method label is
// one of httpapi.Methods, each listed in docs/http.md.
func TestThreeHundredRandomMethodsAddAtMostAFewSeries(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	b.send(t, "GET", "/healthz", "")
	before := b.scrape(t)
	rng := rand.New(rand.NewPCG(28, 28))
	for range 300 {
		m := make([]byte, 2000)
		for i := range m {
			m[i] = byte('A' + rng.IntN(26))
		}
		status, _, _ := b.send(t, string(m), "/v1/modules/NOTE/records", "")
		require.GreaterOrEqual(t, status, 400)
	}
	after := b.scrape(t)
	grew := len(requestSeries.FindAllString(after, -1)) - len(requestSeries.FindAllString(before, -1))
	require.LessOrEqual(t, grew, 3, "300 random methods added %d series", grew)
	require.Less(t, len(after), len(before)+4<<10, "/metrics grew from %d to %d bytes", len(before), len(after))

	method := regexp.MustCompile(`method="([^"]*)"`)
	for _, m := range requestSeries.FindAllStringSubmatch(after, -1) {
		got := method.FindStringSubmatch(m[1])
		require.NotNil(t, got, m[0])
		require.Contains(t, httpapi.Methods, got[1])
	}
	require.Contains(t, after, `method="OTHER"`)

	doc, err := os.ReadFile("../docs/http.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(doc), "| label | values |")
	require.True(t, ok, "docs/http.md has its table of label values")
	table, _, _ = strings.Cut(table, "\n\n")
	for _, m := range httpapi.Methods {
		require.True(t, strings.Contains(table, "`"+m+"`"), "docs/http.md lists the method label's value %s", m)
	}
	for _, l := range []string{"route", "method", "status", "outcome"} {
		require.True(t, strings.Contains(table, "| `"+l+"` |"), "docs/http.md lists the values of label %s", l)
	}
}

// rawExchange writes raw bytes on a new connection and reads one response.
func rawExchange(t *testing.T, b *testBundle, raw string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(b.url, "http://"))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte(raw))
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err, "%.80q", raw)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

// Issue 28 and SPEC §9: every refusal serve makes — net/http's own (400, 417, 431, 501, 505),
// the router's (404, 405) and the handlers' — carries a code of the catalog (apperr, which
// docs/errors.md lists with the same status).
func TestEveryRefusalServeMakesIsACataloguedCode(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	catalogued := func(what string, status int, body []byte) {
		t.Helper()
		var e wire.ErrorBody
		require.NoError(t, json.Unmarshal(body, &e), "%s: %s", what, body)
		require.Equal(t, status, e.Error.Status, "%s: %s", what, body)
		require.Contains(t, apperr.Codes(), apperr.Code(e.Error.Code), "%s: %s is not in the catalog", what, e.Error.Code)
		require.Equal(t, status, apperr.Code(e.Error.Code).Status(), "%s: %s is catalogued with another status", what, e.Error.Code)
	}
	huge := "X-Big: " + strings.Repeat("a", 70<<10) + "\r\n"
	for _, c := range []struct {
		what, raw string
		status    int
	}{
		{"a control character in a header", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n", 400},
		{"no Host", "GET /healthz HTTP/1.1\r\n\r\n", 400},
		{"Expect: 200-ok", "POST /v1/modules/NOTE/records HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\n{}", 417},
		{"Transfer-Encoding: gzip", "POST /v1/modules/NOTE/records HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		{"headers over the limit", "GET /healthz HTTP/1.1\r\nHost: x\r\n" + huge + "\r\n", 431},
		{"HTTP/3.0", "GET /healthz HTTP/3.0\r\nHost: x\r\n\r\n", 505},
		{"no route", "GET /v2/nothing HTTP/1.1\r\nHost: x\r\n\r\n", 404},
		{"another method", "DELETE /v1/modules/NOTE/records/x HTTP/1.1\r\nHost: x\r\n\r\n", 405},
		{"a 2,000-character method", strings.Repeat("Q", 2000) + " /v1/modules/NOTE/records HTTP/1.1\r\nHost: x\r\n\r\n", 405},
		{"no token", "GET /v1/whoami HTTP/1.1\r\nHost: x\r\n\r\n", 401},
		{"a bad key header", "POST /v1/modules/NOTE/records HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + aliceToken + "\r\nIdempotency-Key: a b\r\nContent-Length: 2\r\n\r\n{}", 400},
		{"a body too large", "POST /v1/modules/NOTE/records HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + aliceToken + "\r\nContent-Length: " + strconv.Itoa(maxBody+1) + "\r\n\r\n" + strings.Repeat(" ", maxBody+1), 413},
		{"a bad title", "POST /v1/modules/NOTE/records HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + aliceToken + "\r\nContent-Length: 12\r\n\r\n{\"title\":\"\"}", 422},
		{"a page limit of 0", "GET /v1/modules/NOTE/records/01J0000000000000000000000A/revisions?limit=0 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + aliceToken + "\r\n\r\n", 400},
	} {
		resp, body := rawExchange(t, b, c.raw)
		require.Equal(t, c.status, resp.StatusCode, "%s: %s", c.what, body)
		require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"), "%s: %s", c.what, body)
		catalogued(c.what, resp.StatusCode, body)
	}
}
