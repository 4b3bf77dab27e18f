package libinspect

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/idemwork/idemwork/idem/idemtype"
	"github.com/idemwork/idemwork/model"
	"github.com/idemwork/idemwork/store/verifyrows"
)

// The runner's invariants over a service's keys (the names are the kernel's, for the same
// facts; a service's own rows are the service's to check).
const (
	InvEnvelopeRestores     = "envelope_restores"
	InvProcessingPastExpiry = "processing_past_expiry"
	InvNoSecrets            = "no_secrets"
	MaxExamples             = 10
	DefaultVerifyBatch      = 500
)

var invariants = []struct{ name, text string }{
	{InvEnvelopeRestores, "every SUCCEEDED envelope parses (schemaVersion 1, policy, result), its result is a reference the runner writes (ids and integers only), and — where the service's policy is registered with this workbench — it restores"},
	{InvProcessingPastExpiry, "no committed PROCESSING row is past its expiry (a request that never finished; the reaper removes them)"},
	{InvNoSecrets, "no envelope holds a bearer token, a password setting or a connection string"},
}

// secretPatterns are what must never be stored in an envelope: a bearer credential and
// connection strings.
var secretPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}`),
	regexp.MustCompile(`(?i)\bpostgres(?:ql)?://\S`),
	regexp.MustCompile(`(?i)\b(?:password|passfile|sslpassword)\s*=`),
}

// VerifyInvariants checks the runner's invariants over every key of one owner or of all, in
// keyset pages inside one read-only snapshot. It never writes.
func (in *Inspector) VerifyInvariants(ctx context.Context, opts model.VerifyOptions) (model.InvariantReport, error) {
	start := time.Now()
	if opts.Owner != "" {
		if err := idemtype.ValidateOwner(opts.Owner); err != nil {
			return model.InvariantReport{}, err
		}
	}
	if opts.Batch <= 0 {
		opts.Batch = DefaultVerifyBatch
	}
	if opts.Now.IsZero() {
		opts.Now = in.clock.Now()
	}
	rep := model.InvariantReport{Owner: opts.Owner, Checked: map[string]int64{}}
	byName := map[string]*model.Invariant{}
	for _, d := range invariants {
		rep.Invariants = append(rep.Invariants, model.Invariant{Name: d.name, Description: d.text, Examples: []model.Violation{}})
	}
	for i := range rep.Invariants {
		byName[rep.Invariants[i].Name] = &rep.Invariants[i]
	}
	violate := func(name string, ex model.Violation) {
		inv := byName[name]
		inv.Count++
		if len(inv.Examples) < MaxExamples {
			inv.Examples = append(inv.Examples, ex)
		}
	}
	// unchecked counts the results whose policy is not registered with this workbench: the
	// report says how many were not restored, per policy (Checked["unrestored:<policy>"]).
	unchecked := func(policy string) {
		rep.Checked["unrestored"]++
		rep.Checked["unrestored:"+policy]++
	}
	err := in.db.ReadSnapshot(ctx, func(ctx context.Context) error {
		p := verifyrows.Page{Owner: opts.Owner, Limit: opts.Batch}
		for {
			rows, err := verifyrows.ServiceKeys(ctx, in.db, p)
			if err != nil {
				return err
			}
			rep.Batches++
			rep.Checked["keys"] += int64(len(rows))
			for _, r := range rows {
				in.checkKey(ctx, r, opts, violate, unchecked)
			}
			if len(rows) < p.Limit {
				return nil
			}
			p.After = rows[len(rows)-1].Cursor()
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return model.InvariantReport{}, err
	}
	for _, inv := range rep.Invariants {
		rep.Violations += inv.Count
	}
	rep.OK = rep.Violations == 0
	rep.TookMs = float64(time.Since(start).Microseconds()) / 1000
	return rep, nil
}

func (in *Inspector) checkKey(ctx context.Context, r verifyrows.KeyRow, opts model.VerifyOptions, violate func(string, model.Violation), unchecked func(policy string)) {
	ex := model.Violation{Owner: r.OwnerID, Key: r.Key}
	if r.Status == "PROCESSING" {
		if !r.ExpiresAt.After(opts.Now) {
			ex.Detail = fmt.Sprintf("a committed PROCESSING row (a request that never finished) expired at %s and is still stored", r.ExpiresAt.UTC().Format(time.RFC3339))
			violate(InvProcessingPastExpiry, ex)
		}
		return
	}
	if s := secretIn(string(r.Response), opts.Secrets); s != "" {
		ex.Detail = "the envelope " + s
		violate(InvNoSecrets, ex)
	}
	var v model.KeyView
	in.restore(ctx, r.OwnerID, r.Response, &v)
	if v.RestoreError == nil && v.Restored.Via == ViaReference {
		// Parsed and a reference the runner writes, but not restored: the policy that reads
		// the rows it references is not registered here. Counted apart, never passed as checked.
		unchecked(v.Restored.Policy)
	}
	if v.RestoreError != nil && !v.Legacy {
		ex.Detail = fmt.Sprintf("a replay fails closed: %s: %s", v.RestoreError.Code, v.RestoreError.Message)
		violate(InvEnvelopeRestores, ex)
	}
}

// secretIn names the first secret text holds ("" when none).
func secretIn(text string, secrets []string) string {
	for _, re := range secretPatterns {
		if loc := re.FindStringIndex(text); loc != nil {
			return "holds what looks like a secret: " + redact(text[loc[0]:loc[1]])
		}
	}
	for _, s := range secrets {
		if len(s) >= 8 && strings.Contains(text, s) {
			return "holds a configured bearer token: " + redact(s)
		}
	}
	return ""
}

// redact shows enough of a secret to find it, never the whole of it.
func redact(s string) string {
	if len(s) <= 10 {
		return s[:min(len(s), 3)] + "…"
	}
	return s[:10] + "…"
}
