package cli

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/idemwork/idemwork/storm"
	"github.com/idemwork/idemwork/storm/stormtypes"
)

// serviceStormFlags are the request of a service storm (storm with --method, no subcommand).
type serviceStormFlags struct {
	method, body, key, owner, countSQL string
	headers                            []string
}

func (f *serviceStormFlags) bind(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.method, "method", "", "a service storm: the request's HTTP method (POST, PUT…)")
	fl.StringVar(&f.body, "body", "", "a service storm: the request's body (JSON)")
	fl.StringVar(&f.key, "key", "", "a service storm: the Idempotency-Key (default: a generated storm-… key)")
	fl.StringVar(&f.owner, "owner", "", "a service storm: the owner whose key the service stores (for the verdict; the service learns it from --header)")
	fl.StringArrayVar(&f.headers, "header", nil, "a service storm: a request header 'Name: value' (repeat it), e.g. 'X-Owner-Id: alice' or 'Authorization: Bearer …'")
	fl.StringVar(&f.countSQL, "count-sql", "", "a service storm: counts the service's rows of the key ($1 the key, $2 the owner): one row = executed once")
}

// asked reports whether the command line is a service storm.
func (f *serviceStormFlags) asked(cmd *cobra.Command) bool {
	for _, name := range []string{"method", "body", "header", "count-sql", "owner", "key"} {
		if cmd.Flags().Changed(name) {
			return true
		}
	}
	return false
}

// runServiceStorm fires a service storm and prints its summary; the exit code follows the
// verdict as for any storm.
func (a *app) runServiceStorm(cmd *cobra.Command, sf *stormFlags, f *serviceStormFlags) error {
	if !cmd.Flags().Changed("n") {
		return usagef("storm needs --n, the number of requests")
	}
	if sf.processes != 1 || sf.servers != 0 || sf.failFirst || sf.hold != 0 || sf.noShare || (sf.via != "" && sf.via != stormtypes.ViaInproc) {
		return usagef("a service storm fires from this process at --url: --processes, --servers, --fail-first, --hold, --no-share and --via are for idemwork's own storms")
	}
	if f.method == "" {
		return usagef("a service storm needs --method (and --url, --owner)")
	}
	header := http.Header{}
	for _, h := range f.headers {
		name, value, ok := strings.Cut(h, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return usagef("--header %q: want 'Name: value'", h)
		}
		header.Add(name, value)
	}
	spec, err := storm.ServiceSpec{N: sf.n, Concurrency: sf.concurrency, URLs: sf.urls, Method: f.method, Body: []byte(f.body),
		Header: header, Key: f.key, Owner: f.owner, CountSQL: f.countSQL}.Normalized()
	if err != nil {
		return stormUsage(err)
	}
	ctx := cmd.Context()
	db, err := a.openDB(ctx, true)
	if err != nil {
		return err
	}
	sum, runErr := storm.RunService(ctx, db, spec, nil)
	return a.reportStorm(sum, runErr, printServiceStorm)
}

// printServiceStorm writes a service storm's summary.
func printServiceStorm(w io.Writer, s stormtypes.Summary) {
	st := s.Storm
	fmt.Fprintf(w, "storm %s %s  key %s  owner %s\n", st.Method, strings.Join(st.URLs, " "), safe(st.Key), safe(st.Owner))
	fmt.Fprintf(w, "%d requests  %d workers  %d instance(s)\n\n", s.Requests, st.Concurrency, len(st.URLs))
	fmt.Fprintf(w, "  %-28s %8s  %s\n", "OUTCOME", "COUNT", "SAMPLE (one request's message)")
	for _, c := range stormtypes.OrderedOutcomes(s.Outcomes) {
		fmt.Fprintf(w, "  %-28s %8d", safe(c), s.Outcomes[c])
		if e, ok := s.Errors[c]; ok {
			fmt.Fprintf(w, "  %q", e.Sample)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  %-28s %8d\n\n", "(waited on the unique index)", s.Waited)
	l := s.LatencyMs
	fmt.Fprintf(w, "  latency ms   p50 %.2f  p95 %.2f  p99 %.2f  max %.2f   wall %.1f ms\n", l.P50, l.P95, l.P99, l.Max, s.WallMs)
	fmt.Fprintf(w, "  bodies       %d distinct among the successful answers\n", s.Distinct.Bodies)
	for _, sv := range s.ByServer {
		fmt.Fprintf(w, "  instance %-30s %5d requests  %s\n", sv.URL, sv.Requests, countsText(sv.Outcomes))
	}
	if v := s.Verified; v.ServiceRows != nil {
		before := "-"
		if v.ServiceRowsBefore != nil {
			before = fmt.Sprint(*v.ServiceRowsBefore)
		}
		fmt.Fprintf(w, "  rows         %d of the service's rows carry the key (--count-sql; %s before)\n", *v.ServiceRows, before)
	}
	fmt.Fprintln(w)
	vd := s.Verdict
	fmt.Fprintf(w, "  answers   %s %s\n", mark(vd.Answers.OK), vd.Answers.Text)
	fmt.Fprintf(w, "  database  %s %s\n", mark(vd.Database.OK), vd.Database.Text)
	fmt.Fprintf(w, "  verdict   %s %s\n", mark(vd.Verdict == stormtypes.VerdictAgrees), vd.Text)
}
