package bench

import "fmt"

// Target is one goal of issue 6, checked against what this run measured.
type Target struct {
	Goal     string  `json:"goal"`
	Measured float64 `json:"measured"`
	Met      bool    `json:"met"`
}

// targets checks the goals that this run has cells for.
func targets(r Report) []Target {
	out := []Target{}
	first := r.Setup.Rows[0]
	ratio := func(name string, clients int) (float64, bool) {
		for _, c := range r.Workloads {
			if c.Name == name && c.Clients == clients && c.Rows == first {
				return c.Ratio, true
			}
		}
		return 0, false
	}
	for _, g := range []struct {
		name    string
		clients int
		min     float64
	}{
		{FreshKey, 1, 1.2}, {FreshKey, 16, 1.0},
		{FeatureRun, 1, 1.2}, {FeatureRun, 16, 1.0},
		{ReplayHit, 1, 1.5}, {ReplayHit, 16, 1.0},
	} {
		if v, ok := ratio(g.name, g.clients); ok {
			out = append(out, Target{Goal: fmt.Sprintf("%s at %d client(s): runner ≥ %.1f× raw", g.name, g.clients, g.min),
				Measured: v, Met: v >= g.min})
		}
	}
	if st := r.Storm; st != nil {
		for _, run := range st.Runs {
			switch run.Name {
			case "inproc-share":
				out = append(out, Target{Goal: "1,000 in-process same-key requests with sharing: resolved within 3× one lone request",
					Measured: run.VsLone, Met: run.VsLone <= 3})
			case fmt.Sprintf("%d-processes", StormProcesses):
				out = append(out, Target{Goal: "4 processes × 100 same-key requests: resolved within 150 ms",
					Measured: run.WallMs, Met: run.WallMs <= 150})
			}
		}
	}
	if len(r.Setup.Rows) > 1 {
		last := r.Setup.Rows[len(r.Setup.Rows)-1]
		for _, name := range []string{FreshKey, ReplayHit} {
			worst, seen := 0.0, false
			for _, g := range r.Growth {
				if g.Name == name && g.Rows == last && (!seen || g.RunnerVsFirst < worst) {
					worst, seen = g.RunnerVsFirst, true
				}
			}
			if seen {
				out = append(out, Target{Goal: fmt.Sprintf("%s from %s to %s rows: runner throughput falls < 25%% (worst client count)",
					name, rowsLabel(first), rowsLabel(last)), Measured: worst, Met: worst > 0.75})
			}
		}
	}
	return out
}
