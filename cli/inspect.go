package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/idemwork/idemwork/libinspect"
	"github.com/idemwork/idemwork/model"
)

// printKeyView writes `idemwork key` for a person: the state and what the next request meets,
// the stored envelope beside the restore's outcome, the drift to the latest record, and the
// key's rows life by life. Every stored string is terminal-safe.
func printKeyView(w io.Writer, v model.KeyView) {
	// The verdict first: what the key's rows say happened, and what a retry gets.
	fmt.Fprintln(w, safe(v.Verdict))
	fmt.Fprintf(w, "key %s  %s  %s\n", safe(v.Key), v.State, safe(v.Operation))
	fmt.Fprintf(w, "fingerprint %s\n", safe(v.Fingerprint))
	expiry := "expires " + v.ExpiresAt.Format(timeJSON)
	if v.Expired {
		expiry = "EXPIRED at " + v.ExpiresAt.Format(timeJSON)
	}
	fmt.Fprintf(w, "created %s · %s\n", v.CreatedAt.Format(timeJSON), expiry)
	fmt.Fprintln(w, "next request: "+safe(v.Next))
	for _, p := range v.Problems {
		fmt.Fprintln(w, "wrong: "+safe(p))
	}
	if v.Envelope == nil {
		fmt.Fprintln(w, "envelope NULL (a PROCESSING row holds no result)")
	} else {
		fmt.Fprintf(w, "envelope %s\n", safe(compactJSON(v.Envelope)))
	}
	if v.RestoreError != nil {
		fmt.Fprintf(w, "a replay fails closed: %d %s: %s\n", v.RestoreError.Status, v.RestoreError.Code, safe(v.RestoreError.Message))
	}
	if r := v.Restored.Record; r != nil {
		fmt.Fprintf(w, "a replay returns revision %d", r.Revision)
		if l := v.Latest.Record; l != nil {
			fmt.Fprintf(w, "; the latest is revision %d", l.Revision)
			if d := l.Revision - r.Revision; d > 0 {
				fmt.Fprintf(w, " (drift of %d)", d)
			}
		}
		fmt.Fprintln(w)
	} else if l := v.Latest.Record; l != nil {
		fmt.Fprintf(w, "the record it names is at revision %d\n", l.Revision)
	}
	if r := v.Restored; r.Via == libinspect.ViaPolicy {
		fmt.Fprintf(w, "a replay returns (restored by the service's policy %s): %s\n", safe(r.Policy), safe(compactJSON(r.Result)))
	} else if r.Via == libinspect.ViaReference {
		fmt.Fprintf(w, "the stored reference (policy %s, not registered with this workbench): %s\n", safe(r.Policy), safe(compactJSON(r.Result)))
	}
	printReplay(w, v)
	for _, life := range v.Lives {
		fmt.Fprintf(w, "%s:\n", life.Label)
		for _, e := range life.Events {
			fmt.Fprintf(w, "  %s  %-9s %s\n", e.At.Format("2006-01-02 15:04:05.000"), e.Kind, safe(e.Summary()))
		}
	}
}

// printReplay writes what a client gets back for a retry of the key: the response as served
// over HTTP, and the CLI's exit code with the same body.
func printReplay(w io.Writer, v model.KeyView) {
	r := v.Replay
	switch {
	case r == nil && v.Expired:
		fmt.Fprintln(w, "what a client gets back: no replay — the key expired, so the next request with it executes anew")
		return
	case r == nil:
		fmt.Fprintln(w, "what a client gets back: the service's own answer, rendered from the restored result (idemwork does not know the service's responses)")
		return
	}
	fmt.Fprintf(w, "what a client gets back for a retry (the CLI exits %d with this body, indented):\n", r.ExitCode)
	fmt.Fprintf(w, "  %s\n", r.StatusLine())
	for _, name := range r.HeaderNames() {
		fmt.Fprintf(w, "  %s: %s\n", name, safe(r.Headers[name]))
	}
	fmt.Fprintf(w, "  %s\n", safe(strings.TrimSuffix(r.Body, "\n")))
}

// compactJSON prints stored JSON on one line (as stored, if it is not JSON).
func compactJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
