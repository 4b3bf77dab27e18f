package model

import (
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/idemwork/idemwork/idem/idemtype"
)

// HeaderRetryAfter is set on a 503 that a retry may cure (OVERLOADED, DATABASE_UNAVAILABLE). The
// outcome headers of a write's response are idemtype's (SPEC §10.3).
const HeaderRetryAfter = "Retry-After"

// Response is one answer as a client receives it: the status, the headers the answer itself
// sets (the transport adds Date, Content-Length and X-Request-Id) and the exact body bytes.
type Response struct {
	Status int `json:"status"`
	// Headers holds one value per header name.
	Headers map[string]string `json:"headers"`
	// Body is the body's bytes as sent (JSON followed by a newline).
	Body string `json:"body"`
	// ExitCode is the exit code of the CLI command that prints this answer (SPEC §10.2).
	ExitCode int `json:"exitCode"`
}

// Serve writes the response.
func (r Response) Serve(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.Headers {
		h.Set(k, v)
	}
	w.WriteHeader(r.Status)
	// WriteString: a ResponseWriter takes a string as it is, where []byte(r.Body) would copy a
	// body of any size once more per answer.
	_, _ = io.WriteString(w, r.Body)
}

// Text is the response as a person reads it off the wire: the status line, the headers
// (HeaderNames' order), a blank line and the body.
func (r Response) Text() string {
	var b strings.Builder
	b.WriteString(r.StatusLine())
	b.WriteByte('\n')
	for _, name := range r.HeaderNames() {
		b.WriteString(name + ": " + r.Headers[name] + "\n")
	}
	b.WriteByte('\n')
	b.WriteString(r.Body)
	return b.String()
}

// StatusLine is "HTTP 201 Created".
func (r Response) StatusLine() string {
	return "HTTP " + strconv.Itoa(r.Status) + " " + http.StatusText(r.Status)
}

// headerRank orders what a reader of a write's answer looks for first: the outcome headers,
// Location and Retry-After; every other header ranks last.
func headerRank(name string) int {
	switch name {
	case idemtype.HeaderOutcome:
		return 0
	case idemtype.HeaderReplayed:
		return 1
	case idemtype.HeaderWaited:
		return 2
	case "Location":
		return 3
	case HeaderRetryAfter:
		return 4
	}
	return 5
}

// HeaderNames are the response's header names: the outcome headers, Location and Retry-After
// first, then the rest in name order.
func (r Response) HeaderNames() []string {
	names := make([]string, 0, len(r.Headers))
	for k := range r.Headers {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if ri, rj := headerRank(names[i]), headerRank(names[j]); ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	return names
}
