package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/apperr"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/verify"
)

func newVerifyCmd(a *app) *cobra.Command {
	var owner, since, progress string
	var all bool
	var batch int
	cmd := &cobra.Command{Use: "verify", Short: "Check the invariants of the stored rows (exit 4 on violations)",
		Long: "verify reads every idempotency row, record, revision, execution, outbox message and audit event (of one\n" +
			"owner with --owner, of all with --all) in keyset pages inside one read-only snapshot and checks the\n" +
			"invariants of SPEC §4, §6 and §7: envelopes restore exactly and only rows their own key wrote, revisions\n" +
			"are dense and their digest chain unbroken, executions match their digest, every revision and execution\n" +
			"is audited once, each key ran once per life, the outbox agrees with its executions and was settled once,\n" +
			"and nothing idemwork itself writes (envelopes, audit details, outbox references) holds a token, a\n" +
			"connection string or MEM-001 content. Each invariant reports a count and up to 10 examples. It never\n" +
			"writes, so it runs against a read-only session too, and it has no deadline of its own: it shows its\n" +
			"progress on stderr (rows checked of an estimate; --progress=off to silence it) and stops on ctrl+c.\n" +
			"--since TIME (RFC 3339, or a duration such as 2h meaning that long ago) checks only what was written\n" +
			"since then. Exit 0 clean, 4 with violations.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (owner == "") == !all {
				return usagef("verify needs --owner O or --all")
			}
			if batch < 1 || batch > 10_000 {
				return usagef("--batch: want 1-10000 rows per page, got %d", batch)
			}
			from, err := parseSince(since, time.Now())
			if err != nil {
				return err
			}
			show, err := showProgress(progress, a.stderr)
			if err != nil {
				return err
			}
			k, err := a.kernel(cmd.Context())
			if err != nil {
				return err
			}
			svc, err := a.service(cmd.Context())
			if err != nil {
				return err
			}
			check := func(ctx context.Context, opts model.VerifyOptions) (model.InvariantReport, error) {
				return verify.Invariants(ctx, k, opts)
			}
			if svc != nil {
				check = svc.VerifyInvariants // a service's database: the runner's invariants over its keys
			}
			opts := model.VerifyOptions{Owner: owner, Batch: batch, Since: from, Secrets: slices.Collect(maps.Keys(a.cfg.HTTP.Tokens))}
			var last model.VerifyProgress
			line := &progressLine{w: a.stderr, tty: isTerminal(a.stderr), every: time.Second}
			opts.Progress = func(p model.VerifyProgress) {
				last = p
				if show {
					line.update(p)
				}
			}
			rep, err := check(cmd.Context(), opts)
			line.done()
			if errors.Is(err, context.Canceled) {
				return apperr.New(verify.CodeVerifyCancelled, "verify was interrupted after %s rows (reading %s): no verdict; run it again, or narrow it with --owner or --since",
					thousands(last.Checked), last.Table)
			}
			if err != nil {
				return err
			}
			var verdict error
			if !rep.OK {
				verdict = apperr.New(verify.CodeInvariantViolations, "%d violation(s) of %d invariant(s)", rep.Violations, len(rep.Failed()))
			}
			if a.flags.json {
				writeJSON(a.stdout, rep)
				if verdict != nil {
					return &reportedError{verdict}
				}
				return nil
			}
			scope := "every owner"
			if owner != "" {
				scope = "owner " + owner
			}
			if rep.Since != nil {
				scope += " since " + rep.Since.Format(time.RFC3339)
			}
			if svc != nil {
				fmt.Fprintf(a.stdout, "verify %s of a service's keys (schema %s): %d keys in %d pages (%.0f ms)\n",
					scope, k.DB().Connection().Schema, rep.Checked["keys"], rep.Batches, rep.TookMs)
			} else {
				fmt.Fprintf(a.stdout, "verify %s: %d keys, %d records, %d revisions, %d executions, %d outbox messages, %d audit events, %d keys' lives in %d pages (%.0f ms)\n",
					scope, rep.Checked["keys"], rep.Checked["records"], rep.Checked["revisions"], rep.Checked["executions"],
					rep.Checked["outboxMessages"], rep.Checked["auditEvents"], rep.Checked["keyLives"], rep.Batches, rep.TookMs)
			}
			for _, inv := range rep.Invariants {
				mark := "✓"
				if inv.Count > 0 {
					mark = "✗"
				}
				fmt.Fprintf(a.stdout, "%s %-26s %6d  %s\n", mark, inv.Name, inv.Count, inv.Description)
				for _, ex := range inv.Examples {
					fmt.Fprintf(a.stdout, "    %s\n", safe(ex.String()))
				}
			}
			if n := rep.Checked["unrestored"]; n > 0 {
				var policies []string
				for name, c := range rep.Checked {
					if p, ok := strings.CutPrefix(name, "unrestored:"); ok {
						policies = append(policies, fmt.Sprintf("%s (%d)", safe(p), c))
					}
				}
				sort.Strings(policies)
				fmt.Fprintf(a.stdout, "not checked: %d key(s)' results were not restored — their policies are not registered with this workbench: %s; "+
					"envelope_restores checked only that each is a reference the runner writes (build a workbench with the service's policies as plugins, cli.Options.Plugins, to restore them)\n",
					n, strings.Join(policies, ", "))
			}
			if n := unattributed(rep.Unattributed); n != "" {
				fmt.Fprintf(a.stdout, "unattributed (not violations): %s written before migration 0004 record no transaction; they are judged by their key alone\n", n)
			}
			return verdict
		}}
	f := cmd.Flags()
	f.StringVar(&owner, "owner", "", "check one owner's rows")
	f.BoolVar(&all, "all", false, "check every owner's rows")
	f.IntVar(&batch, "batch", verify.DefaultVerifyBatch, "rows per keyset page")
	f.StringVar(&since, "since", "", "check only what was written since TIME (RFC 3339, or a duration ago such as 2h)")
	f.StringVar(&progress, "progress", "auto", "progress on stderr: auto (when stderr is a terminal), on, off")
	return cmd
}

// parseSince reads --since: an RFC 3339 time, or a duration meaning that long before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usagef("--since: %q is neither an RFC 3339 time (2026-01-02T15:04:05Z) nor a positive duration (2h, 90m)", s)
}

// showProgress reads --progress.
func showProgress(s string, stderr io.Writer) (bool, error) {
	switch s {
	case "auto":
		return isTerminal(stderr), nil
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, usagef("--progress: want auto, on or off, got %q", s)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(f.Fd())
}

// progressLine writes a verify's progress: rewritten in place on a terminal, a line at most every
// second elsewhere.
type progressLine struct {
	w     io.Writer
	tty   bool
	every time.Duration
	last  time.Time
	shown bool
}

func (p *progressLine) update(pr model.VerifyProgress) {
	now := time.Now()
	if p.shown && now.Sub(p.last) < p.every {
		return
	}
	p.last, p.shown = now, true
	text := fmt.Sprintf("verify: %s rows checked", thousands(pr.Checked))
	if pct := pr.Percent(); pct >= 0 {
		text = fmt.Sprintf("verify: %s of ~%s rows checked (%d%%)", thousands(pr.Checked), thousands(pr.Estimate), pct)
	}
	text += " · reading " + pr.Table
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s", text)
		return
	}
	fmt.Fprintln(p.w, text)
}

func (p *progressLine) done() {
	if p.tty && p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// thousands writes n with thin separators: 1,234,567.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && c != '-' && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// unattributed says which rows do not record their transaction ("" when none).
func unattributed(m map[string]int64) string {
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(m)) {
		if m[t] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[t], t))
		}
	}
	return strings.Join(parts, ", ")
}
