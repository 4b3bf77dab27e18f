package storm

import (
	"fmt"
	"sort"
	"strings"

	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/kernel"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

type answerKind int

const (
	answerSucceeded answerKind = iota
	answerRejected             // a coded 4xx answer: SPEC's own refusal of the request
	answerExpected             // the storm's one injected fault (--fail-first)
	answerFailed               // no SPEC answer: INTERNAL, 5xx, no response, transport error
	answerCancelled            // the storm was stopped
)

func kindOf(code string, status int, s stormtypes.Summary) answerKind {
	switch code {
	case string(idemtype.Executed), string(idemtype.Replayed), string(idemtype.Joined):
		return answerSucceeded
	case string(stormtypes.CodeCancelled):
		return answerCancelled
	case string(stormtypes.CodeInjectedFault):
		if s.Storm.FailFirst && s.Outcomes[code] == 1 {
			return answerExpected
		}
		return answerFailed
	case string(stormtypes.CodeNoResponse), string(stormtypes.CodeHTTPError):
		return answerFailed
	}
	if status >= 400 && status < 500 {
		return answerRejected
	}
	return answerFailed
}

// codeCount is one outcome or code with its count.
type codeCount struct {
	code string
	n    int
}

// byKind groups the summary's outcomes by kind, most frequent first.
func byKind(s stormtypes.Summary) map[answerKind][]codeCount {
	out := map[answerKind][]codeCount{}
	for code, n := range s.Outcomes {
		k := kindOf(code, s.Errors[code].Status, s)
		out[k] = append(out[k], codeCount{code, n})
	}
	rank := map[string]int{string(idemtype.Executed): 0, string(idemtype.Replayed): 1, string(idemtype.Joined): 2}
	for _, list := range out {
		sort.Slice(list, func(i, j int) bool {
			ri, oki := rank[list[i].code]
			rj, okj := rank[list[j].code]
			if oki && okj {
				return ri < rj
			}
			if list[i].n != list[j].n {
				return list[i].n > list[j].n
			}
			return list[i].code < list[j].code
		})
	}
	return out
}

func total(list []codeCount) int {
	n := 0
	for _, c := range list {
		n += c.n
	}
	return n
}

// times writes "CODE × n, CODE × m".
func times(list []codeCount) string {
	parts := make([]string, len(list))
	for i, c := range list {
		parts[i] = fmt.Sprintf("%s × %d", c.code, c.n)
	}
	return strings.Join(parts, ", ")
}

// withSample is "CODE × n" and the first code's sample message.
func withSample(list []codeCount, s stormtypes.Summary) string {
	out := times(list)
	if e := s.Errors[list[0].code]; e.Sample != "" {
		out += fmt.Sprintf(" (%s: %q)", list[0].code, e.Sample)
	}
	return out
}

// judge words the verdict of s.
func judge(s stormtypes.Summary, spec stormtypes.Spec, stopped bool) stormtypes.Verdict {
	k := byKind(s)
	ok, rejected, expected, failed, cancelled := k[answerSucceeded], k[answerRejected], k[answerExpected], k[answerFailed], k[answerCancelled]
	nOK, nFailed, nCancelled := total(ok), total(failed), total(cancelled)
	var v stormtypes.Verdict

	// Answers. An execution that is not a plain success (BLOCKED, PENDING) is said with them:
	// "EXECUTED 1" alone would read as the real action done.
	blocked := executionNote(s.Verified, spec)
	var parts []string
	if nOK > 0 {
		succ := make([]string, len(ok))
		for i, c := range ok {
			succ[i] = fmt.Sprintf("%s %d", c.code, c.n)
		}
		text := strings.Join(succ, ", ")
		if blocked != "" {
			text += " — every answer carries the execution " + blocked
		}
		parts = append(parts, text)
	}
	if len(expected) > 0 {
		parts = append(parts, "injected: "+times(expected))
	}
	if len(rejected) > 0 {
		parts = append(parts, "rejected: "+withSample(rejected, s))
	}
	if len(failed) > 0 {
		parts = append(parts, "failed: "+withSample(failed, s))
	}
	if len(cancelled) > 0 {
		parts = append(parts, "cancelled: "+times(cancelled))
	}
	head := fmt.Sprintf("%d requests", s.Requests)
	if stopped {
		head = fmt.Sprintf("stopped: %d answered, %d cancelled", s.Requests-nCancelled, nCancelled)
	}
	v.Answers = stormtypes.Part{OK: nFailed == 0 && nCancelled == 0, Text: head + ": " + strings.Join(parts, "; ")}

	// Database.
	d := s.Verified
	v.Database.OK = d.Agrees
	switch {
	case d.Unread != nil:
		v.Database.Text = "not verified: the database could not be read: " + d.Unread.Code + ": " + d.Unread.Message
	case !d.Agrees:
		v.Database.Text = fmt.Sprintf("key %s: %s", d.KeyStatus, strings.Join(d.Problems, "; "))
	case nOK == 0 && d.KeyStatus == "ABSENT":
		v.Database.Text = "nothing written: the key was ABSENT before the storm and still is"
	case nOK == 0:
		v.Database.Text = fmt.Sprintf("nothing written: the key is %s, as before the storm", d.KeyStatus)
	default:
		v.Database.Text = databaseText(d, spec)
	}

	// Verdict.
	switch {
	case stopped:
		v.Verdict, v.Code = stormtypes.VerdictStopped, string(stormtypes.CodeCancelled)
		v.Text = fmt.Sprintf("stopped: %d answered, %d cancelled", s.Requests-nCancelled, nCancelled)
		switch {
		case d.Unread != nil:
			v.Text += "; not verified: the database could not be read (" + d.Unread.Code + ")"
		case !d.Agrees:
			v.Text += "; the database disagrees with the answers"
		}
	case d.Unread != nil:
		// Not read is not contradicted: the storm is unverified, which is a failure of the storm,
		// never a success and never a disagreement the database did not express.
		v.Verdict, v.Code = stormtypes.VerdictFailed, d.Unread.Code
		v.Text = "not verified: the database could not be read to check the answers: " + d.Unread.Code + ": " + d.Unread.Message
		if nFailed > 0 {
			v.Text += fmt.Sprintf("; and %d of %d requests failed: %s", nFailed, s.Requests, times(failed))
		}
	case !d.Agrees:
		v.Verdict, v.Code = stormtypes.VerdictDisagrees, string(stormtypes.CodeDisagrees)
		v.Text = "the database disagrees with the answers: " + strings.Join(d.Problems, "; ")
		if nFailed > 0 {
			v.Text += fmt.Sprintf("; and %d of %d requests failed: %s", nFailed, s.Requests, times(failed))
		}
	case nFailed > 0:
		v.Verdict, v.Code = stormtypes.VerdictFailed, failed[0].code
		v.Text = fmt.Sprintf("%d of %d requests failed: %s", nFailed, s.Requests, withSample(failed, s))
	case nOK == 0:
		v.Verdict = stormtypes.VerdictRejected
		if len(rejected) > 0 {
			v.Code = rejected[0].code
		} else {
			v.Code = expected[0].code
		}
		v.Text = "no request succeeded: " + times(append(rejected, expected...))
	default:
		v.Verdict = stormtypes.VerdictAgrees
		switch ex := s.Outcomes[string(idemtype.Executed)]; {
		case ex == 1 && blocked != "":
			v.Text = "agrees: exactly one request executed, and its execution is " + blocked + "; the database holds what every answer says"
		case ex == 1:
			v.Text = "agrees: exactly one request executed, and the database holds what every answer says"
		default:
			v.Text = "agrees: every answer replays the key's stored result, as the database holds it"
		}
	}
	return v
}

// databaseText describes an agreeing key: its rows and what the envelope points at.
func databaseText(d stormtypes.Verified, spec stormtypes.Spec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "key %s: %s, %s", d.KeyStatus, plural(d.Revisions, "revision"), plural(d.AuditEvents, "audit event"))
	if d.Envelope != nil {
		fmt.Fprintf(&b, "; the envelope points at %s@%d", d.Envelope.RecordID, d.Envelope.Revision)
	}
	if spec.Op == stormtypes.OpAction && d.ExecutionStatus != "" {
		fmt.Fprintf(&b, "; execution %s", d.ExecutionStatus)
		switch {
		case d.ExecutionMode == "blocked_external":
			b.WriteString(" (the feature calls a provider directly: it failed closed, nothing was sent)")
		case d.ExecutionMode == string(kernel.ModeOutbox):
			b.WriteString(" (an outbox message waits for the delivery worker)")
		}
	}
	return b.String()
}

// executionNote is "BLOCKED (failed closed: nothing was sent)" or "PENDING (queued for the
// outbox worker)" for an action storm whose execution is not a plain success, "" otherwise.
func executionNote(d stormtypes.Verified, spec stormtypes.Spec) string {
	if spec.Op != stormtypes.OpAction || !d.Agrees {
		return ""
	}
	switch d.ExecutionStatus {
	case "BLOCKED":
		return "BLOCKED (failed closed: nothing was sent)"
	case "PENDING":
		return "PENDING (queued for the outbox worker)"
	}
	return ""
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
