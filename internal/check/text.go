package check

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/cfsprobe/cfsprobe/internal/report"
)

// WriteText writes the Result for people: the verdict first, then the
// evidence per run, the host, and what to do.
func WriteText(w io.Writer, r *Result) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n%s\n", r.Headline, r.Summary)

	fmt.Fprintf(&b, "\nevidence (a period is \"under quota\" when the group used less than %.0f%% of its quota in it)\n", 100*r.Thresholds.UnderQuota)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  run\tquota\tthreads\tperiods\tthrottled\tunder quota\tusage/quota\tops\tslow\tp99\tworst")
	for _, run := range r.Runs {
		quota := "none"
		if run.QuotaUs > 0 {
			quota = report.Dur(run.QuotaUs*1000) + "/" + report.Dur(run.PeriodUs*1000)
		}
		if !run.Judged {
			fmt.Fprintf(tw, "  %s\t%s\t%d\tnot judged (see notes)\n", run.Name, quota, run.Threads)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%d\t%.0f%%\t%s\t%s\t%s\t%s\n", run.Name, quota, run.Threads,
			run.PeriodsJudged, run.Throttled, run.ThrottledUnderQuota, 100*run.UsageOfQuota,
			count(run.Ops, run.Ops), count(run.SlowOps, run.Ops), opDur(run.P99OpNs, run.Ops), worst(run))
	}
	ev := r.Evidence
	if len(r.Runs) > 1 {
		fmt.Fprintf(tw, "  all runs\t\t\t%d\t%d\t%d\t%.0f%%\t%s\t%s\n", ev.PeriodsJudged, ev.Throttled, ev.ThrottledUnderQuota,
			100*ev.UsageOfQuota, count(ev.Ops, ev.Ops), count(ev.SlowOps, ev.Ops))
	}
	tw.Flush()
	if ev.ThrottledUnderQuota > 0 {
		fmt.Fprintf(&b, "  the throttled-under-quota periods used at most %.0f%% of the quota; %d slow operations fell in them\n",
			100*ev.MaxUsageOfQuotaThrottledUnder, ev.SlowOpsThrottledUnder)
	}

	fmt.Fprintf(&b, "\nwhy\n")
	for _, s := range r.Reasons {
		fmt.Fprintf(&b, "  - %s\n", s)
	}

	h, k := r.Host, r.Kernel
	fmt.Fprintf(&b, "\nhost\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	name := ""
	if h.Hostname != "" {
		name = h.Hostname + ": "
	}
	fmt.Fprintf(tw, "  kernel\t%sLinux %s (%s), %d CPUs\n", name, h.Kernel, h.Arch, h.CPUs)
	fmt.Fprintf(tw, "  cgroups\t%s, cpu controller v%d\n", h.CgroupMode, h.CPUController)
	slice := "unknown"
	if h.SliceUs > 0 {
		slice = report.Dur(h.SliceUs * 1000)
	}
	fmt.Fprintf(tw, "  slice\t%s of quota handed to a CPU at a time (kernel.sched_cfs_bandwidth_slice_us)\n", slice)
	burst := "not supported (Linux 5.14+ has cpu.cfs_burst_us / cpu.max.burst)"
	if h.BurstSupported {
		burst = "supported"
	}
	fmt.Fprintf(tw, "  burst\t%s\n", burst)
	fmt.Fprintf(tw, "  by version\t%s\n", k.Detail)
	fmt.Fprintf(tw, "  throttling\t%s\n", k.ThrottlingDetail)
	tw.Flush()

	fmt.Fprintf(&b, "\nwhat to do\n")
	for _, s := range r.Advice {
		fmt.Fprintf(&b, "  - %s\n", s)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintf(&b, "\nnotes\n")
		for _, s := range r.Notes {
			fmt.Fprintf(&b, "  - %s\n", s)
		}
	}
	if r.WallNs > 0 {
		fmt.Fprintf(&b, "\nchecked in %s\n", report.Dur(r.WallNs))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// count shows n, or "-" when nothing was timed.
func count(n, ops int64) string {
	if ops == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func opDur(ns, ops int64) string {
	if ops == 0 {
		return "-"
	}
	return report.Dur(ns)
}

func worst(run Run) string {
	if run.Ops == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (%s %s)", report.Dur(run.MaxOpNs), report.Dur(run.ExpectedOpNs), run.Op)
}
