package wire_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/wire"
)

// A write's answer carries its outcome in headers and its body as exact bytes; serving it
// writes exactly those.
func TestAWritesResponseIsServedAsBuilt(t *testing.T) {
	t.Parallel()
	r := wire.Write(http.StatusCreated, idemtype.Replayed, true, map[string]string{"title": "<&>"})
	require.Equal(t, "{\"title\":\"<&>\"}\n", r.Body, "HTML characters unescaped, one newline")
	require.Equal(t, []string{idemtype.HeaderOutcome, idemtype.HeaderReplayed, idemtype.HeaderWaited, "Cache-Control", "Content-Type", "X-Content-Type-Options"}, r.HeaderNames())
	require.Equal(t, "REPLAYED", r.Headers[idemtype.HeaderOutcome])
	require.Equal(t, 0, r.ExitCode)
	rec := httptest.NewRecorder()
	r.Serve(rec)
	require.Equal(t, http.StatusCreated, rec.Code)
	require.Equal(t, r.Body, rec.Body.String())
	for k, v := range r.Headers {
		require.Equal(t, v, rec.Header().Get(k))
	}
	require.Equal(t, "HTTP 201 Created\nIdempotency-Outcome: REPLAYED\nIdempotent-Replayed: true\nIdempotency-Waited: true\n"+
		"Cache-Control: no-store\nContent-Type: application/json; charset=utf-8\nX-Content-Type-Options: nosniff\n\n{\"title\":\"<&>\"}\n", r.Text())
	require.NotContains(t, wire.Write(http.StatusOK, idemtype.Executed, false, nil).Headers, idemtype.HeaderReplayed)
}

// An error's answer: its status and body from the code, the headers the code calls for, and the
// CLI's exit code; an uncoded error never shows its text.
func TestAnErrorsResponseCarriesWhatItsCodeCallsFor(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err    error
		status int
		exit   int
		header string
		value  string
	}{
		{apperr.New(apperr.CommitUnknown, "lost"), 503, 4, idemtype.HeaderOutcome, idemtype.OutcomeUnknown},
		{apperr.New(apperr.DatabaseUnavailable, "gone"), 503, 4, model.HeaderRetryAfter, "1"},
		{apperr.New(apperr.Overloaded, "busy"), 503, 4, model.HeaderRetryAfter, "1"},
		{apperr.New(apperr.ReplicationUnsafe, "no sync standby"), 503, 3, model.HeaderRetryAfter, "5"},
		{apperr.New(apperr.InProgress, "held"), 409, 3, "", ""},
		{apperr.New(apperr.Usage, "flag"), 400, 2, "", ""},
		{apperr.New(apperr.PayloadTooLarge, "big"), 413, 3, "Connection", "close"},
	} {
		r := wire.Error(c.err)
		require.Equal(t, c.status, r.Status, "%v", c.err)
		require.Equal(t, c.exit, r.ExitCode, "%v", c.err)
		require.Equal(t, fmt.Sprintf("{\"error\":{\"code\":\"%s\",\"status\":%d,\"message\":\"%s\"}}\n", apperr.CodeOf(c.err), c.status, apperr.As(c.err).Message), r.Body)
		if c.header != "" {
			require.Equal(t, c.value, r.Headers[c.header], "%v", c.err)
		}
	}
	r := wire.Error(fmt.Errorf("read key: %w", fmt.Errorf("secret dsn postgres://u:pw@h")))
	require.Equal(t, 500, r.Status)
	require.NotContains(t, r.Body, "pw@h")
}
