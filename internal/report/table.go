package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Named is a trace with the label it is shown under.
type Named struct {
	Name  string
	Trace *trace.Trace
}

// Table writes one row per run: limits, CPU used, throttling and latency,
// so that runs can be compared side by side.
func Table(w io.Writer, runs []Named) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tlimit\tCPU used\tthrottled\tperiods\tthrottled time\tp50\tp99\tp99.9\tmax\t")
	for _, r := range runs {
		t, s := r.Trace, r.Trace.Summary
		limit := "none"
		if !t.Limits.Unlimited() {
			limit = CPUs(cpus(t.Limits))
		}
		throttled := "-"
		if !t.Limits.Unlimited() {
			throttled = fmt.Sprintf("%.0f%%", 100*s.ThrottledRatio)
		}
		p50, p99, p999, pmax := "-", "-", "-", "-"
		if p := s.LatencyNs; p != nil {
			p50, p99, p999, pmax = Dur(p.P50), Dur(p.P99), Dur(p.P999), Dur(p.Max)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f CPUs\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\t\n",
			shownName(r.Name, t), limit, s.CPURatio, throttled, s.NrThrottled, s.NrPeriods, Dur(s.ThrottledNs), p50, p99, p999, pmax)
	}
	return tw.Flush()
}

// Label names a trace by its workload and arguments.
func Label(t *trace.Trace) string {
	s := t.Spec.Workload
	if len(t.Spec.Args) > 0 {
		s += " " + strings.Join(t.Spec.Args, " ")
	}
	if len(s) > 48 {
		s = s[:45] + "..."
	}
	return s
}
