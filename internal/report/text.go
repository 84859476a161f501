// Package report renders traces for people and scripts: the terminal
// summary and table (Text), GitHub markdown (Markdown), per-run summaries
// as JSON (JSON), and one self-contained HTML page with charts (HTML).
// Every renderer is pure: traces in, bytes out.
package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Summary writes the human summary of one run.
func Summary(w io.Writer, t *trace.Trace) {
	s := t.Summary
	fmt.Fprintf(w, "run        %s %s\n", t.Spec.Workload, strings.Join(t.Spec.Args, " "))
	fmt.Fprintf(w, "limits     %s\n", LimitsLine(t.Limits))
	if sim, ok := SimulatedHost(t); ok {
		fmt.Fprintf(w, "host       %s, slice %s\n", sim, Dur(t.Host.SliceUs*1000))
	} else {
		fmt.Fprintf(w, "host       Linux %s, cgroup %s (cpu controller v%d), %d CPUs, slice %s\n",
			t.Host.Kernel, t.Host.CgroupMode, t.Host.CPUController, t.Host.CPUs, Dur(t.Host.SliceUs*1000))
	}
	quotaShare := ""
	if !t.Limits.Unlimited() && s.WallNs > 0 && cpus(t.Limits) > 0 {
		quotaShare = fmt.Sprintf(", %.0f%% of the quota", 100*s.CPURatio/cpus(t.Limits))
	}
	fmt.Fprintf(w, "time       wall %s, CPU used %s (%.2f CPUs%s)\n", Dur(s.WallNs), Dur(s.UsageNs), s.CPURatio, quotaShare)
	if o := s.OthersBusyCPUs; o != nil {
		note := ""
		if s.Disturbed() {
			note = fmt.Sprintf(": a disturbed measurement (over %.2f), latency and CPU used may not be a quiet machine's", trace.DisturbedCPUs)
		}
		stolen := ""
		if st := Stolen(s); st != "" {
			stolen = " (" + st + ")"
		}
		fmt.Fprintf(w, "others     %.2f CPUs of other work on the CPUs the run could use%s%s\n", *o, stolen, note)
	}
	if c := s.SelfBusyCPUs; c != nil {
		fmt.Fprintf(w, "cfsprobe   %.3f CPUs of its own (reading the counters, mostly)\n", *c)
	}
	if t.ReaderClass == trace.ReaderFair {
		fmt.Fprintln(w, "reader     in the fair class, not SCHED_FIFO (refused: it needs CAP_SYS_NICE, and real-time runtime in cfsprobe's cgroup where the kernel has CONFIG_RT_GROUP_SCHED): its wake-ups may have moved the group's threads between CPUs")
	}
	if t.Limits.Unlimited() {
		fmt.Fprintf(w, "periods    none enforced (no quota): %d windows of %s in the timeline\n", len(t.Periods), Dur(t.Limits.PeriodUs*1000))
	} else {
		share := ""
		if s.WallNs > 0 {
			share = fmt.Sprintf(" (%.0f%% of wall time)", 100*float64(s.ThrottledNs)/float64(s.WallNs))
		}
		fmt.Fprintf(w, "throttled  %d of %d periods (%.1f%%), throttled time %s%s\n",
			s.NrThrottled, s.NrPeriods, 100*s.ThrottledRatio, Dur(s.ThrottledNs), share)
		if t.Limits.BurstUs > 0 || s.NrBursts > 0 {
			fmt.Fprintf(w, "burst      %d periods used burst, %s borrowed\n", s.NrBursts, Dur(s.BurstNs))
		}
	}
	if p := s.LatencyNs; p != nil && t.Latency != nil {
		fmt.Fprintf(w, "%-10s %d ops  p50 %s  p90 %s  p99 %s  p99.9 %s  max %s\n", t.Latency.Op, s.Ops,
			Dur(p.P50), Dur(p.P90), Dur(p.P99), Dur(p.P999), Dur(p.Max))
	}
	if t.Process.ExitCode != 0 || t.Process.Signal != "" {
		fmt.Fprintf(w, "exit       status %d %s\n", t.Process.ExitCode, t.Process.Signal)
	}
	var checks []string
	for _, c := range t.Checks {
		mark := "ok"
		if !c.OK {
			mark = "FAILED"
		}
		checks = append(checks, fmt.Sprintf("%s: %s", mark, c.Detail))
	}
	if len(checks) > 0 {
		fmt.Fprintf(w, "checks     %s\n", strings.Join(checks, "\n           "))
	}
}

// OthersBusy says how many CPUs other work kept busy beside a lab run
// (trace.Summary.OthersBusyCPUs): "0.02 CPUs", "0.08 CPUs disturbed"
// above trace.DisturbedCPUs, "-" when it was not measured.
func OthersBusy(s trace.Summary) string {
	if s.OthersBusyCPUs == nil {
		return "-"
	}
	text := fmt.Sprintf("%.2f CPUs", *s.OthersBusyCPUs)
	if s.Disturbed() {
		text += " disturbed"
	}
	return text
}

// Stolen says how much of a lab run's other work was the hypervisor's
// steal time (trace.Summary.StolenCPUs): "0.15 of them the hypervisor's
// steal time", or "" below what two decimals show.
func Stolen(s trace.Summary) string {
	if s.StolenCPUs == nil || *s.StolenCPUs < 0.005 {
		return ""
	}
	return fmt.Sprintf("%.2f of them the hypervisor's steal time", *s.StolenCPUs)
}

// cpus is the limit in CPUs: quota / period (0 when unlimited or, in a
// hand-made trace, without a period).
func cpus(l trace.Limits) float64 { return l.Cgroup().CPUs() }

// LimitsLine describes limits in one line.
func LimitsLine(l trace.Limits) string {
	var b strings.Builder
	if l.Unlimited() {
		fmt.Fprintf(&b, "unlimited (period %s)", Dur(l.PeriodUs*1000))
	} else {
		fmt.Fprintf(&b, "%s (quota %s per period %s)", CPUs(cpus(l)), Dur(*l.QuotaUs*1000), Dur(l.PeriodUs*1000))
	}
	if l.BurstUs > 0 {
		fmt.Fprintf(&b, ", burst %s", Dur(l.BurstUs*1000))
	}
	if l.Cpuset != "" {
		fmt.Fprintf(&b, ", cpuset %s", l.Cpuset)
	}
	return b.String()
}

// CPUs formats a number of CPUs for people: 3 significant digits, "1 CPU"
// for one.
func CPUs(c float64) string {
	if c == 1 {
		return "1 CPU"
	}
	return fmt.Sprintf("%.3g CPUs", c)
}

// Dur formats nanoseconds for people: 3 significant digits, unit chosen
// by size.
func Dur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case ns == 0:
		return "0s"
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", ns)
	case d < time.Millisecond:
		return fmt.Sprintf("%.3gus", float64(ns)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.3gms", float64(ns)/1e6)
	default:
		return fmt.Sprintf("%.3gs", float64(ns)/1e9)
	}
}
