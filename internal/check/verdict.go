package check

import (
	"fmt"

	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// decide turns the evidence into a verdict and its reasons. Slow
// operations must confirm the kernel's counters, except for the
// throttled-under-quota periods of runs that timed no operation one by one
// (untimedUnder: external commands, histogram-only traces).
func decide(ev Evidence, th Thresholds, untimedUnder int64) (string, []string) {
	var reasons []string
	if ev.Runs == 0 {
		return Inconclusive, []string{"no run could be judged: a judged run has a quota, ended normally and passed its consistency checks"}
	}
	u, n := ev.ThrottledUnderQuota, ev.PeriodsJudged
	share := 0.0
	if n > 0 {
		share = float64(u) / float64(n)
	}
	enough := u >= th.MinUnderQuota && share >= th.MinUnderQuotaShare
	timed := untimedUnder < th.MinUnderQuota
	confirmed := !timed || ev.SlowOpsThrottledUnder >= th.MinCorroborating
	pct := func(x float64) string { return fmt.Sprintf("%.0f%%", 100*x) }
	if enough && confirmed {
		reasons = append(reasons, fmt.Sprintf("%d of %d judged periods (%s) were throttled although the group used under %s of its quota in them (threshold: %d and %s)",
			u, n, pct(share), pct(th.UnderQuota), th.MinUnderQuota, pct(th.MinUnderQuotaShare)))
		if timed {
			reasons = append(reasons, fmt.Sprintf("%d operations that overlap those periods took at least %gx their expected time and %s (threshold: %d)",
				ev.SlowOpsThrottledUnder, th.SlowFactor, report.Dur(th.SlowMinNs), th.MinCorroborating))
		} else {
			reasons = append(reasons, "the runs with those periods timed no operations (external commands): the kernel's counters alone decide")
		}
		return Affected, reasons
	}
	if n < th.MinPeriods {
		return Inconclusive, []string{fmt.Sprintf("only %d periods could be judged, %d are needed: the runs were too short or the group was idle (run the full check, or give more traces)", n, th.MinPeriods)}
	}
	if enough {
		return Inconclusive, []string{fmt.Sprintf("%d of %d periods were throttled under %s of the quota, but only %d operations in them were slow (%d needed to confirm): the counters and the latencies disagree",
			u, n, pct(th.UnderQuota), ev.SlowOpsThrottledUnder, th.MinCorroborating)}
	}
	if u >= th.MinUnderQuota {
		return Inconclusive, []string{fmt.Sprintf("%d of %d periods (%s) were throttled under %s of the quota: too few to call the kernel affected (%s needed), too many to clear it; heavy load from other processes can do this (rerun on a quieter machine)",
			u, n, pct(share), pct(th.UnderQuota), pct(th.MinUnderQuotaShare))}
	}
	if ev.Ops > 0 && float64(ev.SlowOpsUnexplained) > th.MaxNoiseShare*float64(ev.Ops) {
		return Inconclusive, []string{fmt.Sprintf("%d of %d operations were slow without any throttling (more than %s): something else competed for the CPUs, so a clean result cannot be trusted (rerun on a quieter machine)",
			ev.SlowOpsUnexplained, ev.Ops, pct(th.MaxNoiseShare))}
	}
	reasons = append(reasons, fmt.Sprintf("%d periods judged, %d throttled under %s of the quota (not affected needs fewer than %d; affected needs %d and %s, confirmed by slow operations)",
		n, u, pct(th.UnderQuota), th.MinUnderQuota, th.MinUnderQuota, pct(th.MinUnderQuotaShare)))
	switch {
	case ev.Ops > 0 && ev.SlowOps == 0:
		reasons = append(reasons, fmt.Sprintf("none of %d operations was slow (%gx its expected time and %s)", ev.Ops, th.SlowFactor, report.Dur(th.SlowMinNs)))
	case ev.Ops > 0:
		reasons = append(reasons, fmt.Sprintf("%d of %d operations were slow, %d of them in a throttled-under-quota period and %d in no throttled period at all (other processes delaying them; a run is too noisy above %s)",
			ev.SlowOps, ev.Ops, ev.SlowOpsThrottledUnder, ev.SlowOpsUnexplained, pct(th.MaxNoiseShare)))
	}
	if at := ev.Throttled - ev.ThrottledUnderQuota; at > 0 {
		reasons = append(reasons, fmt.Sprintf("%d periods were throttled with the group at or near its quota: the workload needed more CPU than its limit there, which is what a quota is for", at))
	}
	return NotAffected, reasons
}

func headline(verdict string, ev Evidence, th Thresholds) (string, string) {
	under := fmt.Sprintf("%.0f%%", 100*th.UnderQuota)
	var h string
	switch verdict {
	case Affected:
		h = "AFFECTED: this kernel throttles groups that stay under their CPU quota."
	case NotAffected:
		h = "NOT AFFECTED: this kernel did not throttle groups that stayed under their CPU quota."
	default:
		h = "INCONCLUSIVE: these runs cannot tell whether this kernel throttles groups under their CPU quota."
	}
	s := fmt.Sprintf("%d of %d periods were throttled while the group used under %s of its quota (it used %.0f%% on average)",
		ev.ThrottledUnderQuota, ev.PeriodsJudged, under, 100*ev.UsageOfQuota)
	if w := ev.Worst; w != nil {
		s += fmt.Sprintf("; the worst %s took %s where %s was expected", w.Op, report.Dur(w.WallNs), report.Dur(w.ExpectedNs))
	}
	return h, s + "."
}

// versionNotes compare the verdict with what the version says.
func versionNotes(verdict string, k Kernel, host trace.Host) []string {
	var n []string
	switch {
	case verdict == NotAffected && k.Expectation == ExpectAffected && k.Defect == DefectStrandedSlices:
		n = append(n, fmt.Sprintf("Linux %s is in the stranded-slice range, yet nothing showed: the fix may be backported, or this host has too few CPUs for the defect to show (it strands at most 1ms per CPU per period: %dms of each period here). A bigger node with the same kernel can be affected.", k.Version, host.CPUs))
	case verdict == NotAffected && k.Expectation == ExpectAffected:
		n = append(n, fmt.Sprintf("Linux %s is in the range of the %s defect, yet nothing showed: the fix is probably backported into this kernel.", k.Version, k.Defect))
	case verdict == Affected && k.Expectation == ExpectFixed:
		n = append(n, fmt.Sprintf("Linux %s carries the known fixes: this throttling has another cause. Look at the incidents (--json) and rerun on a quiet machine.", k.Version))
	case verdict == Inconclusive && k.Expectation == ExpectAffected:
		n = append(n, fmt.Sprintf("By its version this kernel is in the range of the %s defect: treat it as affected until a clean check says otherwise.", k.Defect))
	}
	return n
}

func advice(verdict string, k Kernel) []string {
	switch verdict {
	case Affected:
		return []string{
			"Upgrade the kernel: Linux 5.4 or newer, a stable kernel with the fix (4.14.154+, 4.19.84+), or a distribution kernel that carries de53fd7aedb1 (and 512ac999d275).",
			"Until then, raise the CPU limit (quota) of latency-sensitive containers well above what they use, or remove the limit and keep the request; in Kubernetes the kubelet's --cpu-cfs-quota=false turns quotas off for the whole node.",
			"Check every node: cfsprobe check on each (a DaemonSet), then cfsprobe check --from-traces on the traces it saved with --out.",
		}
	case NotAffected:
		return []string{
			"Nothing to fix in the kernel. Throttling you still see comes from workloads that need more CPU than their limit in some periods: cfsprobe recommend sizes their limit, burst or thread cap from their per-period demand (a trace of cfsprobe run, a live group with --cgroup PATH --duration 2m, or a fleet with --prometheus URL).",
		}
	default:
		a := []string{"Run cfsprobe check again on a quiet machine (nothing else busy); the reason above says what was missing."}
		if k.Expectation == ExpectAffected {
			a = append(a, "Meanwhile plan for the kernel fix: Linux 5.4 or newer, or a stable or distribution kernel that carries de53fd7aedb1.")
		}
		return a
	}
}
