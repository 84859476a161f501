package suite

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// WriteTable prints the comparison table the write-ups show: one row per
// run with its limit, the CPU it got, how often and how long it was
// throttled, its latency, and the verdict; then every failed expectation.
// A suite measured and simulated has the table of its simulated runs
// next, and the two side by side (WriteComparison). Last comes the
// suite's conclusion.
func (r *Result) WriteTable(w io.Writer) error {
	if err := writeRuns(w, r.Traces); err != nil {
		return err
	}
	if len(r.Simulated) > 0 {
		fmt.Fprintf(w, "\nsimulated:\n")
		if err := writeRuns(w, r.Simulated); err != nil {
			return err
		}
		fmt.Fprintln(w)
		if err := r.WriteComparison(w); err != nil {
			return err
		}
	}
	if p := r.Profile(); p != "" {
		fmt.Fprintf(w, "\n%s", p)
	}
	fmt.Fprintf(w, "\n%s\n", r.Conclusion())
	return nil
}

// writeRuns prints the table of runs and their failed expectations.
func writeRuns(w io.Writer, traces []*trace.Trace) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tlimit\tCPU used\tthrottled\tthrottled time\tof wall\tp50\tp99\tp99.9\tmax\tverdict")
	for _, t := range traces {
		s := t.Summary
		limit := "unlimited"
		if !t.Limits.Unlimited() {
			limit = report.CPUs(*t.Limits.CPUs)
			if t.Limits.BurstUs > 0 {
				limit += fmt.Sprintf(" +%s burst", report.Dur(t.Limits.BurstUs*1000))
			}
		}
		throttled := fmt.Sprintf("%d/%d (%.0f%%)", s.NrThrottled, s.NrPeriods, 100*s.ThrottledRatio)
		share := "-"
		if s.WallNs > 0 {
			share = fmt.Sprintf("%.0f%%", 100*float64(s.ThrottledNs)/float64(s.WallNs))
		}
		p50, p99, p999, pmax := "-", "-", "-", "-"
		if p := s.LatencyNs; p != nil {
			p50, p99, p999, pmax = report.Dur(p.P50), report.Dur(p.P99), report.Dur(p.P999), report.Dur(p.Max)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f%%\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Scenario.Name, limit, 100*s.CPURatio,
			throttled, report.Dur(s.ThrottledNs), share, p50, p99, p999, pmax, verdictWord(t.Scenario.Verdict))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var failed []string
	for _, t := range traces {
		got := "measured"
		if t.Spec.Simulated != nil {
			got = "simulated"
		}
		for _, e := range t.Scenario.Expectations {
			if !e.OK {
				failed = append(failed, fmt.Sprintf("  %s: expected %s, %s %s", t.Scenario.Name, e.Text, got, measured(e)))
			}
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "\nexpectations not met:\n%s\n", strings.Join(failed, "\n"))
	}
	return nil
}

func measured(e trace.Expectation) string {
	if e.Relative != "" {
		return fmt.Sprintf("%.3g", e.Value)
	}
	return FormatValue(e.Metric, e.Value)
}

func verdictWord(v string) string {
	switch v {
	case "pass":
		return "ok"
	case "fail":
		return "FAIL"
	}
	return "-"
}

// Profile prints the in-period profile of every run that has one: ops/ms
// in consecutive 20 ms slots of the period.
func (r *Result) Profile() string {
	var b strings.Builder
	for _, t := range r.Traces {
		p := t.InPeriodProfile(int64(report.ProfileSlot))
		if len(p) == 0 || t.Limits.Unlimited() {
			continue
		}
		if b.Len() == 0 {
			fmt.Fprintf(&b, "in-period profile (operations per ms in each %s slot of the period):\n", report.Dur(int64(report.ProfileSlot)))
		}
		fmt.Fprintf(&b, "  %-22s", t.Scenario.Name)
		for _, s := range p {
			fmt.Fprintf(&b, " %3dms:%6.2f", s.OffsetNs/1e6, s.OpsPerMs)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Conclusion is the suite's verdict in words.
func (r *Result) Conclusion() string {
	prefix := ""
	if r.Interrupted {
		prefix = "interrupted: only the runs above finished. "
	}
	switch r.Verdict() {
	case "pass":
		msg := r.Suite.Verdict.Pass
		if msg == "" {
			msg = "every expectation was met"
		}
		return prefix + "verdict: " + msg
	case "fail":
		msg := r.Suite.Verdict.Fail
		if msg == "" {
			msg = "some expectations were not met"
		}
		return prefix + "verdict: " + msg
	}
	return prefix + "verdict: none (the suite sets no expectations)"
}
