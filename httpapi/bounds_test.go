package httpapi_test

import (
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/httpapi"
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
