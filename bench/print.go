package bench

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// Print writes the report as aligned tables.
func Print(w io.Writer, r Report) {
	s := r.Setup
	fmt.Fprintf(w, "idemwork bench — %s\n%s; fsync=%s synchronous_commit=%s; %d CPUs; %s\n", s.Database, s.Server, s.Fsync,
		s.SynchronousCommit, s.CPUs, s.Go)
	if s.Proxy != nil {
		fmt.Fprintf(w, "every connection through a %gms round-trip proxy (%s → %s); ", s.RTTMs, s.Proxy.Listen, s.Proxy.Upstream)
	} else {
		fmt.Fprint(w, "no proxy (the server's own endpoint); ")
	}
	fmt.Fprintf(w, "one round trip (SELECT 1) %.3f ms\n", s.RoundTripMs)
	fmt.Fprintf(w, "each cell: %.1fs measured, runner, raw and limit alternating in %.0fms slices;\n"+
		"ratio = runner ops/s ÷ raw ops/s, efficiency = runner ops/s ÷ limit ops/s\n\n", s.CellMs/1000, s.SliceMs)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tclients\trows\t|\trunner ops/s\tp50 ms\tp99 ms\tallocs/op\tRT/op\t|\traw ops/s\tp50 ms\tp99 ms\tallocs/op\tRT/op\t|"+
		"\tlimit ops/s\tp50 ms\tp99 ms\tRT/op\t|\tratio\tefficiency\t")
	for _, c := range r.Workloads {
		fmt.Fprintf(tw, "%s\t%d\t%s\t|\t%.0f\t%.2f\t%.2f\t%.0f\t%.0f\t|\t%.0f\t%.2f\t%.2f\t%.0f\t%.0f\t|\t%.0f\t%.2f\t%.2f\t%.0f\t|\t%.2f\t%.2f\t\n",
			c.Name, c.Clients, rowsLabel(c.Rows),
			c.Runner.OpsPerSec, c.Runner.P50Ms, c.Runner.P99Ms, c.Runner.AllocsPerOp, c.Runner.RoundTripsPerOp,
			c.Raw.OpsPerSec, c.Raw.P50Ms, c.Raw.P99Ms, c.Raw.AllocsPerOp, c.Raw.RoundTripsPerOp,
			c.Limit.OpsPerSec, c.Limit.P50Ms, c.Limit.P99Ms, c.Limit.RoundTripsPerOp, c.Ratio, c.Efficiency)
	}
	_ = tw.Flush()

	if len(r.Growth) > 0 {
		fmt.Fprintln(w, "\ngrowth (ops/s relative to the first level; measured at different times, so drift shows here)")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "workload\tclients\trows\trunner\traw\tlimit\tratio\tefficiency\t")
		for _, g := range r.Growth {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%.2f×\t%.2f×\t%.2f×\t%.2f\t%.2f\t\n", g.Name, g.Clients, rowsLabel(g.Rows), g.RunnerVsFirst,
				g.RawVsFirst, g.LimitVsFirst, g.Ratio, g.Efficiency)
		}
		_ = tw.Flush()
	}

	if st := r.Storm; st != nil {
		fmt.Fprintf(w, "\nstorms (one key; median of %d; lone request p50 %.2f ms, p99 %.2f ms over %d)\n",
			len(firstWalls(st)), st.Lone.P50Ms, st.Lone.P99Ms, st.Lone.Samples)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "storm\trequests\tprocs×conc\tshare\twall ms\t× lone\treq p50/p99 ms\toutcomes\tverified")
		for _, run := range st.Runs {
			verdict := "yes"
			if !run.Verified {
				verdict = "NO: " + strings.Join(run.Problems, "; ")
			}
			fmt.Fprintf(tw, "%s\t%d\t%d×%d\t%v\t%.1f %s\t%.1f\t%.1f/%.1f\t%s\t%s\n", run.Name, run.Requests, run.Processes,
				run.Concurrency, run.Share, run.WallMs, wallsLabel(run.WallsMs), run.VsLone, run.P50Ms, run.P99Ms,
				outcomesLabel(run.Outcomes, run.Waited), verdict)
		}
		_ = tw.Flush()
	}

	if f := r.Fairness; f != nil {
		fmt.Fprintf(w, "\nfairness (issue 28): one owner's GETs of a %d-revision record (%d KB per answer), another owner's GETs one after\n"+
			"another meanwhile (the flood's client in %s; the other owner's in %s); pool %d, owner share %d, read slots %d;\n"+
			"alone p50 %.2f p99 %.2f ms (each flood's ratio divides by the other owner's p99 alone just before it)\n",
			f.Revisions, f.FloodBytes>>10, floodLabel(f.FloodProcess, f.FloodNice, f.FloodPolicy), processLabel(f.ProbeProcess), f.PoolConns, f.OwnerShare, f.OwnerReadSlots, f.AloneP50Ms, f.AloneP99Ms)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "flood of\tGETs\tin flight\tflood ms\tanswers\tother alone p99\tother p50 ms\tother p99 ms\tmax ms\tsamples\tp99 ÷ alone\t")
		row := func(fl FairnessFloodReport, verdict string) {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%.2f%s\t\n", fl.Path, fl.Requests, fl.InFlight, fl.FloodMs, statusesLabel(fl.Statuses),
				fl.AloneP99Ms, fl.LoadedP50Ms, fl.LoadedP99Ms, fl.LoadedMaxMs, fl.Samples, fl.Ratio, verdict)
		}
		for _, fl := range f.Floods {
			verdict := fmt.Sprintf(" (want ≤ %.0f: met)", f.Target)
			if !fl.Met {
				verdict = fmt.Sprintf(" (want ≤ %.0f: missed)", f.Target)
			}
			row(fl, verdict)
		}
		if f.Floor != nil {
			row(*f.Floor, " (the floor: the burst of connections alone)")
		}
		_ = tw.Flush()
	}

	if len(r.RoundTrips) > 0 {
		fmt.Fprintln(w, "\nround trips of one op (one client, traced pool, warm statement cache; ms = mean time per statement,")
		fmt.Fprintln(w, "client = the op's time outside its statements)")
		for _, rt := range r.RoundTrips {
			for _, side := range []struct {
				name string
				t    RoundTripTrace
			}{{"runner", rt.Runner}, {"raw", rt.Raw}, {"limit", rt.Limit}} {
				fmt.Fprintf(w, "  %-12s %-6s %4.1f RT, op %.3f ms, client %.3f ms: %s\n", rt.Workload, side.name, side.t.PerOp,
					side.t.OpMs, side.t.ClientMs, strings.Join(stepsLabel(side.t), " → "))
			}
		}
	}
	if v := r.Verify; v != nil {
		fmt.Fprintf(w, "\nverify --owner %s: %d audit events, %d keys, %d records, %d revisions, %d executions (%d keys' lives) in %.1f s, %.0f rows/s, ok %v (loaded in %.0f s)\n",
			v.Owner, v.AuditEvents, v.Checked["keys"], v.Checked["records"], v.Checked["revisions"], v.Checked["executions"], v.Checked["keyLives"],
			v.Seconds, v.RowsPerSecond, v.OK, v.LoadSeconds)
	}
	if len(r.Targets) > 0 {
		issues := "issue 16"
		if r.Verify != nil {
			issues = "issues 16, 22"
		}
		fmt.Fprintf(w, "\ntargets (%s)\n", issues)
		for _, t := range r.Targets {
			verdict := "missed"
			if t.Met {
				verdict = "met"
			}
			fmt.Fprintf(w, "  %s: %.2f, %s\n", t.Goal, t.Measured, verdict)
			if t.Note != "" {
				fmt.Fprintf(w, "      %s\n", t.Note)
			}
		}
	}
	fmt.Fprintf(w, "\ntook %.0fs\n", s.ElapsedSeconds)
}

func firstWalls(st *StormReport) []float64 {
	if len(st.Runs) == 0 {
		return nil
	}
	return st.Runs[0].WallsMs
}

func rowsLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

func wallsLabel(walls []float64) string {
	parts := make([]string, len(walls))
	for i, w := range walls {
		parts[i] = fmt.Sprintf("%.0f", w)
	}
	return "(" + strings.Join(parts, ",") + ")"
}

func outcomesLabel(o map[string]int, waited int) string {
	var parts []string
	for _, k := range []string{"EXECUTED", "JOINED", "REPLAYED"} {
		if o[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", strings.ToLower(k[:4]), o[k]))
		}
	}
	for k, n := range o {
		if k != "EXECUTED" && k != "JOINED" && k != "REPLAYED" {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	if waited > 0 {
		parts = append(parts, fmt.Sprintf("waited %d", waited))
	}
	return strings.Join(parts, ", ")
}

// stepsLabel names each statement by verb and table, with its mean time.
func stepsLabel(t RoundTripTrace) []string {
	out := make([]string, len(t.Statements))
	for i, s := range t.Statements {
		out[i] = abbreviateOne(s)
		if i < len(t.StatementMs) {
			out[i] += fmt.Sprintf(" %.3f", t.StatementMs[i])
		}
	}
	return out
}

func abbreviateOne(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return s
	}
	verb := strings.ToUpper(f[0])
	switch verb {
	case "BEGIN", "COMMIT", "ROLLBACK", "(PREPARE)":
		return strings.ToLower(verb)
	}
	if strings.HasPrefix(verb, "BATCH[") {
		return "batch"
	}
	table := ""
	for i, w := range f {
		u := strings.ToUpper(w)
		if (u == "INTO" || u == "FROM" || u == "UPDATE") && i+1 < len(f) {
			table = f[i+1]
			break
		}
	}
	if verb == "WITH" {
		for i, w := range f {
			if strings.ToUpper(w) == "INSERT" && i+2 < len(f) {
				return "INSERT…RETURNING " + f[i+2]
			}
		}
	}
	if table == "" {
		return verb
	}
	out := verb + " " + strings.TrimSuffix(table, ",")
	if strings.Contains(s, " JOIN ") {
		out += "+join"
	}
	if strings.Contains(s, "FOR NO KEY UPDATE") || strings.Contains(s, "FOR UPDATE") {
		out += " (lock)"
	}
	return out
}

func statusesLabel(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// floodLabel is processLabel for the flood, with the nice value and policy its child ran at.
func floodLabel(p string, nice int, policy string) string {
	if p == "child" && policy != "" {
		return fmt.Sprintf("a process of its own at nice %d and SCHED_%s, standing in for another machine", nice, strings.ToUpper(policy))
	}
	if p == "child" && nice != 0 {
		return fmt.Sprintf("a process of its own at nice %d, standing in for another machine", nice)
	}
	return processLabel(p)
}

// processLabel says where a fairness client ran.
func processLabel(p string) string {
	if p == "child" {
		return "a process of its own"
	}
	return "the server's process"
}
