// Package check answers one question: does this kernel throttle groups
// that stay under their CPU quota? It runs the "Overly aggressive CFS"
// pattern (seed 000) and a low-usage pattern spread over every CPU in
// transient groups (Prepare, Check.Run), and decides from their traces
// alone (Analyze), so saved traces from any machine can be judged again.
//
// The fixtures in testdata and the golden outputs are regenerated with
//
//	go test ./internal/check -run 'TestFixtures|TestAnalyzeFixtures' -update
//
//go:generate go test -run TestFixtures|TestAnalyzeFixtures -update
package check

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// Schema is the value of Result.Schema.
const Schema = "cfsprobe.check/v1"

// Verdicts.
const (
	Affected     = "affected"
	NotAffected  = "not affected"
	Inconclusive = "inconclusive"
)

// Thresholds are the analysis's parameters. DefaultThresholds are the
// ones cfsprobe check uses; docs/check.md explains them.
type Thresholds struct {
	// UnderQuota: a throttled period is "under quota" when the group used
	// less than this share of the quota in it.
	UnderQuota float64 `json:"under_quota"`
	// An operation is slow when it took at least SlowFactor times its
	// expected time and at least SlowMinNs.
	SlowFactor float64 `json:"slow_factor"`
	SlowMinNs  int64   `json:"slow_min_ns"`
	// MinPeriods is how many judged periods a verdict needs.
	MinPeriods int64 `json:"min_periods"`
	// Affected needs at least MinUnderQuota throttled periods under quota,
	// at least MinUnderQuotaShare of the judged periods, and, where
	// operations were timed, at least MinCorroborating slow operations in
	// those periods.
	MinUnderQuota      int64   `json:"min_under_quota"`
	MinUnderQuotaShare float64 `json:"min_under_quota_share"`
	MinCorroborating   int64   `json:"min_corroborating"`
	// MaxNoiseShare: when more than this share of the operations were slow
	// outside any throttled period, something else (another busy process)
	// slowed them, and the runs are too noisy to clear the kernel.
	MaxNoiseShare float64 `json:"max_noise_share"`
}

// DefaultThresholds returns the thresholds of cfsprobe check.
func DefaultThresholds() Thresholds {
	return Thresholds{
		UnderQuota: 0.5,
		SlowFactor: 2, SlowMinNs: int64(20 * time.Millisecond),
		MinPeriods:    30,
		MinUnderQuota: 3, MinUnderQuotaShare: 0.02, MinCorroborating: 2,
		MaxNoiseShare: 0.05,
	}
}

// Result is the check's answer with its evidence. It is JSON
// (cfsprobe check --json) and holds no trace: the traces it was computed
// from are kept beside it (Check.Run, --out).
type Result struct {
	Schema  string `json:"schema"`
	Verdict string `json:"verdict"`
	// Headline is the verdict in a sentence; Summary the numbers behind it.
	Headline string `json:"headline"`
	Summary  string `json:"summary"`
	// Reasons say how the verdict was reached.
	Reasons  []string   `json:"reasons"`
	Evidence Evidence   `json:"evidence"`
	Runs     []Run      `json:"runs"`
	Host     trace.Host `json:"host"`
	Kernel   Kernel     `json:"kernel"`
	// Advice says what to do.
	Advice []string `json:"advice"`
	// Notes are what a reader should also know (version against test,
	// runs left out).
	Notes      []string   `json:"notes,omitempty"`
	Thresholds Thresholds `json:"thresholds"`
	// WallNs is how long a live check took (0 when traces were re-read).
	WallNs int64 `json:"wall_ns,omitempty"`
}

// ExitCode is the exit status cfsprobe check gives the verdict: 0 not
// affected, 1 affected, 3 inconclusive (2 is left to errors).
func (r *Result) ExitCode() int {
	switch r.Verdict {
	case NotAffected:
		return 0
	case Affected:
		return 1
	default:
		return 3
	}
}

// Evidence sums the judged runs.
type Evidence struct {
	// Runs is how many runs were judged (limited, complete, consistent).
	Runs int `json:"runs"`
	// PeriodsObserved counts the enforcement periods of the judged runs;
	// PeriodsJudged leaves out each run's warm-up.
	PeriodsObserved int64 `json:"periods_observed"`
	PeriodsJudged   int64 `json:"periods_judged"`
	// Throttled counts judged periods the kernel throttled;
	// ThrottledUnderQuota those in which the group used less than
	// Thresholds.UnderQuota of its quota.
	Throttled           int64 `json:"throttled"`
	ThrottledUnderQuota int64 `json:"throttled_under_quota"`
	// UsageOfQuota is CPU used per judged period over the quota (mean).
	UsageOfQuota float64 `json:"usage_of_quota"`
	// MaxUsageOfQuotaThrottledUnder is the most any throttled-under-quota
	// period used, as a share of the quota (0 without such periods).
	MaxUsageOfQuotaThrottledUnder float64 `json:"max_usage_of_quota_throttled_under"`
	// Operations (burns, bursts, events) timed, without each thread's
	// first (warm-up).
	Ops int64 `json:"ops"`
	// SlowOps took at least SlowFactor x their expected time and
	// SlowMinNs; SlowOpsThrottledUnder overlap a throttled-under-quota
	// period; SlowOpsUnexplained overlap no throttled period at all.
	SlowOps               int64 `json:"slow_ops"`
	SlowOpsThrottledUnder int64 `json:"slow_ops_throttled_under"`
	SlowOpsUnexplained    int64 `json:"slow_ops_unexplained"`
	// Worst is the slowest operation, P99 the run with the highest p99
	// relative to its expected time.
	Worst *OpRef `json:"worst,omitempty"`
	P99   *OpRef `json:"p99,omitempty"`
}

// OpRef is one latency figure and where it comes from.
type OpRef struct {
	Run        string `json:"run"`
	Op         string `json:"op"`
	WallNs     int64  `json:"wall_ns"`
	ExpectedNs int64  `json:"expected_ns"`
}

// Run is the evidence of one trace.
type Run struct {
	// Name is the scenario's name, or the workload's.
	Name        string `json:"name"`
	Description string `json:"description"`
	// Source is the file the trace was read from, if any.
	Source   string `json:"source,omitempty"`
	Workload string `json:"workload"`
	Threads  int    `json:"threads"`
	PeriodUs int64  `json:"period_us"`
	QuotaUs  int64  `json:"quota_us"` // 0 when unlimited
	WallNs   int64  `json:"wall_ns"`
	// Judged is false when the run could not be judged; Skipped says why.
	Judged  bool   `json:"judged"`
	Skipped string `json:"skipped,omitempty"`
	// WarmupNs: periods that start before this time, and each thread's
	// first operation, are not judged.
	WarmupNs            int64   `json:"warmup_ns"`
	Periods             int64   `json:"periods"`
	PeriodsJudged       int64   `json:"periods_judged"`
	Throttled           int64   `json:"throttled"`
	ThrottledUnderQuota int64   `json:"throttled_under_quota"`
	UsageNs             int64   `json:"usage_ns"` // in judged periods
	UsageOfQuota        float64 `json:"usage_of_quota"`
	// Op names an operation; ExpectedOpNs is its expected wall time.
	Op                    string `json:"op,omitempty"`
	ExpectedOpNs          int64  `json:"expected_op_ns,omitempty"`
	Ops                   int64  `json:"ops"`
	SlowOps               int64  `json:"slow_ops"`
	SlowOpsThrottledUnder int64  `json:"slow_ops_throttled_under"`
	SlowOpsUnexplained    int64  `json:"slow_ops_unexplained"`
	P50OpNs               int64  `json:"p50_op_ns,omitempty"`
	P99OpNs               int64  `json:"p99_op_ns,omitempty"`
	MaxOpNs               int64  `json:"max_op_ns,omitempty"`
	// MaxUsageOfQuotaThrottledUnder is the most any throttled-under-quota
	// period of the run used, as a share of the quota (over all of them,
	// not only the Incidents listed).
	MaxUsageOfQuotaThrottledUnder float64 `json:"max_usage_of_quota_throttled_under,omitempty"`
	// Incidents are the throttled-under-quota periods (the first
	// MaxIncidents of them).
	Incidents []Incident `json:"incidents,omitempty"`
}

// MaxIncidents is how many incidents a Run lists.
const MaxIncidents = 20

// Incident is a period the kernel throttled although the group used less
// than Thresholds.UnderQuota of its quota in it.
type Incident struct {
	StartNs     int64 `json:"start_ns"`
	EndNs       int64 `json:"end_ns"`
	UsageNs     int64 `json:"usage_ns"`
	ThrottledNs int64 `json:"throttled_ns"`
	// SlowOps overlapping the period, and the slowest of them.
	SlowOps   int64 `json:"slow_ops"`
	WorstOpNs int64 `json:"worst_op_ns,omitempty"`
}

// Analyze judges traces with the default thresholds. host is the machine
// the verdict is about (the traces' own host facts are not compared).
func Analyze(traces []*trace.Trace, host trace.Host) Result {
	return AnalyzeWith(traces, host, DefaultThresholds())
}

// AnalyzeWith judges traces with the given thresholds. It is a pure
// function of its arguments.
func AnalyzeWith(traces []*trace.Trace, host trace.Host, th Thresholds) Result {
	r := Result{Schema: Schema, Host: host, Kernel: AssessKernel(host.Kernel), Thresholds: th, Runs: []Run{}}
	var ev Evidence
	var usage, quotaTime float64
	var untimedUnder int64 // throttled-under-quota periods of runs without timed operations
	for _, t := range traces {
		run := analyzeRun(t, th)
		r.Runs = append(r.Runs, run)
		if !run.Judged {
			r.Notes = append(r.Notes, fmt.Sprintf("run %s was not judged: %s", run.Name, run.Skipped))
			continue
		}
		ev.Runs++
		ev.PeriodsObserved += run.Periods
		ev.PeriodsJudged += run.PeriodsJudged
		ev.Throttled += run.Throttled
		ev.ThrottledUnderQuota += run.ThrottledUnderQuota
		usage += float64(run.UsageNs)
		quotaTime += float64(run.PeriodsJudged) * float64(run.QuotaUs*1000)
		ev.MaxUsageOfQuotaThrottledUnder = math.Max(ev.MaxUsageOfQuotaThrottledUnder, run.MaxUsageOfQuotaThrottledUnder)
		ev.Ops += run.Ops
		ev.SlowOps += run.SlowOps
		ev.SlowOpsThrottledUnder += run.SlowOpsThrottledUnder
		ev.SlowOpsUnexplained += run.SlowOpsUnexplained
		if !hasSamples(t) {
			untimedUnder += run.ThrottledUnderQuota
		}
		if run.Ops > 0 && run.MaxOpNs > 0 && (ev.Worst == nil || ratio(run.MaxOpNs, run.ExpectedOpNs) > ratio(ev.Worst.WallNs, ev.Worst.ExpectedNs)) {
			ev.Worst = &OpRef{Run: run.Name, Op: run.Op, WallNs: run.MaxOpNs, ExpectedNs: run.ExpectedOpNs}
		}
		if run.Ops > 0 && run.P99OpNs > 0 && (ev.P99 == nil || ratio(run.P99OpNs, run.ExpectedOpNs) > ratio(ev.P99.WallNs, ev.P99.ExpectedNs)) {
			ev.P99 = &OpRef{Run: run.Name, Op: run.Op, WallNs: run.P99OpNs, ExpectedNs: run.ExpectedOpNs}
		}
	}
	if quotaTime > 0 {
		ev.UsageOfQuota = usage / quotaTime
	}
	r.Evidence = ev
	r.Verdict, r.Reasons = decide(ev, th, untimedUnder)
	r.Headline, r.Summary = headline(r.Verdict, ev, th)
	r.Notes = append(r.Notes, versionNotes(r.Verdict, r.Kernel, host)...)
	r.Advice = advice(r.Verdict, r.Kernel)
	return r
}

func ratio(a, b int64) float64 {
	if b <= 0 {
		return float64(a)
	}
	return float64(a) / float64(b)
}

// hasSamples tells whether every operation of the trace was kept, with its
// time, so that it can be placed against the timeline.
func hasSamples(t *trace.Trace) bool {
	return t.Latency != nil && len(t.Latency.Samples) > 0 && int64(len(t.Latency.Samples)) == t.Latency.Count
}

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
			"Nothing to fix in the kernel. Throttling you still see comes from workloads that need more CPU than their limit in some periods: measure them with cfsprobe run and size the limit from what they use.",
		}
	default:
		a := []string{"Run cfsprobe check again on a quiet machine (nothing else busy); the reason above says what was missing."}
		if k.Expectation == ExpectAffected {
			a = append(a, "Meanwhile plan for the kernel fix: Linux 5.4 or newer, or a stable or distribution kernel that carries de53fd7aedb1.")
		}
		return a
	}
}

// analyzeRun computes the evidence of one trace.
func analyzeRun(t *trace.Trace, th Thresholds) Run {
	run := Run{
		Name: RunName(t), Description: Describe(t), Workload: t.Spec.Workload, Threads: threadsOf(t),
		PeriodUs: t.Limits.PeriodUs, WallNs: t.Summary.WallNs,
	}
	if !t.Limits.Unlimited() {
		run.QuotaUs = *t.Limits.QuotaUs
	}
	for _, p := range t.Periods {
		if p.Kernel {
			run.Periods++
		}
	}
	switch {
	case t.Limits.Unlimited():
		run.Skipped = "it ran without a quota, so the kernel enforced no period"
	case run.QuotaUs <= 0 || run.PeriodUs <= 0:
		run.Skipped = "its limits are not valid"
	case t.Process.Signal != "" || t.Process.ExitCode != 0:
		run.Skipped = fmt.Sprintf("the workload did not end normally (exit %d %s)", t.Process.ExitCode, t.Process.Signal)
	case run.Periods == 0:
		run.Skipped = "its timeline has no enforcement period"
	}
	for _, c := range t.Checks {
		if !c.OK && run.Skipped == "" {
			run.Skipped = fmt.Sprintf("consistency check %s failed (%s)", c.Name, c.Detail)
		}
	}

	ops := opsOf(t)
	run.Op = opName(t)
	run.ExpectedOpNs = expectedOp(t, ops)
	run.WarmupNs = warmup(ops)
	slow := func(wall int64) bool {
		return float64(wall) >= th.SlowFactor*float64(run.ExpectedOpNs) && wall >= th.SlowMinNs
	}
	quotaNs := run.QuotaUs * 1000
	var throttled []trace.Period
	for _, p := range t.Periods {
		if p.Kernel && p.Throttled {
			throttled = append(throttled, p)
		}
	}
	var incidents []Incident
	if run.Skipped == "" {
		for _, p := range t.Periods {
			if !p.Kernel || p.StartNs < run.WarmupNs {
				continue
			}
			run.PeriodsJudged++
			run.UsageNs += p.UsageNs
			if !p.Throttled {
				continue
			}
			run.Throttled++
			if float64(p.UsageNs) < th.UnderQuota*float64(quotaNs) {
				run.ThrottledUnderQuota++
				incidents = append(incidents, Incident{StartNs: p.StartNs, EndNs: p.EndNs, UsageNs: p.UsageNs, ThrottledNs: p.ThrottledNs})
			}
		}
		run.Judged = true
		if run.PeriodsJudged > 0 {
			run.UsageOfQuota = float64(run.UsageNs) / (float64(run.PeriodsJudged) * float64(quotaNs))
		}
	}

	// Operations: sampled ones are placed against the timeline; without
	// samples only the histogram's counts are known.
	var walls []int64
	if ops != nil {
		for _, o := range ops {
			if o.first {
				continue
			}
			walls = append(walls, o.WallNs)
			if !slow(o.WallNs) {
				continue
			}
			run.SlowOps++
			end := o.StartNs + o.WallNs
			inThrottled := false
			for _, p := range throttled {
				if o.StartNs < p.EndNs && end > p.StartNs {
					inThrottled = true
					break
				}
			}
			if !inThrottled {
				run.SlowOpsUnexplained++
			}
			counted := false
			for i := range incidents {
				in := &incidents[i]
				if o.StartNs < in.EndNs && end > in.StartNs {
					in.SlowOps++
					in.WorstOpNs = max(in.WorstOpNs, o.WallNs)
					if !counted {
						run.SlowOpsThrottledUnder++
						counted = true
					}
				}
			}
		}
		sort.Slice(walls, func(i, j int) bool { return walls[i] < walls[j] })
		run.Ops = int64(len(walls))
		if len(walls) > 0 {
			run.P50OpNs = trace.Quantile(walls, 0.5)
			run.P99OpNs = trace.Quantile(walls, 0.99)
			run.MaxOpNs = walls[len(walls)-1]
		}
	} else if t.Latency != nil && t.Latency.Count > 0 {
		run.Ops = t.Latency.Count
		for _, b := range t.Latency.Buckets {
			if slow(b[0]) {
				run.SlowOps += b[2]
			}
		}
		// Without times nothing can be placed: count them as unexplained
		// only when no period was throttled at all.
		if len(throttled) == 0 {
			run.SlowOpsUnexplained = run.SlowOps
		}
		if p := t.Summary.LatencyNs; p != nil {
			run.P50OpNs, run.P99OpNs, run.MaxOpNs = p.P50, p.P99, p.Max
		}
	}
	if !run.Judged {
		run.Ops, run.SlowOps, run.SlowOpsThrottledUnder, run.SlowOpsUnexplained = 0, 0, 0, 0
	}
	for _, in := range incidents {
		run.MaxUsageOfQuotaThrottledUnder = math.Max(run.MaxUsageOfQuotaThrottledUnder, float64(in.UsageNs)/float64(run.QuotaUs*1000))
	}
	if len(incidents) > MaxIncidents {
		incidents = incidents[:MaxIncidents]
	}
	run.Incidents = incidents
	return run
}

// op is one timed operation; first marks each thread's first.
type op struct {
	trace.Sample
	first bool
}

// opsOf returns the trace's raw operations in time order, or nil when it
// has none (external command, or only a histogram).
func opsOf(t *trace.Trace) []op {
	if !hasSamples(t) {
		return nil
	}
	out := make([]op, len(t.Latency.Samples))
	for i, s := range t.Latency.Samples {
		out[i] = op{Sample: s}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartNs < out[j].StartNs })
	seen := map[int]bool{}
	for i := range out {
		if !seen[out[i].Thread] {
			seen[out[i].Thread] = true
			out[i].first = true
		}
	}
	return out
}

// warmup is when every thread's first operation has ended: until then Go's
// runtime starts its threads and all workers start at the same instant,
// which a quota below (threads x slice) may throttle on any kernel.
func warmup(ops []op) int64 {
	var w int64
	for _, o := range ops {
		if o.first {
			w = max(w, o.StartNs+o.WallNs)
		}
	}
	return w
}

func opName(t *trace.Trace) string {
	if t.Latency != nil && t.Latency.Op != "" {
		return t.Latency.Op
	}
	return "operation"
}

// expectedOp is what one operation should take: the workload's burn or
// burst time, else the median of what was measured.
func expectedOp(t *trace.Trace, ops []op) int64 {
	p := t.Spec.Params
	switch t.Spec.Workload {
	case "periodic":
		if v := paramNs(p, "burn_ns"); v > 0 {
			return v
		}
		return paramNs(p, "burn_cpu_ns")
	case "bursty":
		if v := paramNs(p, "on_ns"); v > 0 {
			return v
		}
		return paramNs(p, "on_cpu_ns")
	}
	if len(ops) > 0 {
		w := make([]int64, len(ops))
		for i, o := range ops {
			w[i] = o.WallNs
		}
		sort.Slice(w, func(i, j int) bool { return w[i] < w[j] })
		return trace.Quantile(w, 0.5)
	}
	if s := t.Summary.LatencyNs; s != nil {
		return s.P50
	}
	return 0
}

// paramNs reads an integer parameter: int64 from a run just made, float64
// from JSON.
func paramNs(p map[string]any, key string) int64 {
	switch v := p[key].(type) {
	case int64:
		return v
	case int:
		return int64(v)
	case float64:
		return int64(v)
	case time.Duration:
		return int64(v)
	}
	return 0
}

func threadsOf(t *trace.Trace) int {
	if n := paramNs(t.Spec.Params, "threads"); n > 0 {
		return int(n)
	}
	if t.Latency != nil && len(t.Latency.Samples) > 0 {
		seen := map[int]bool{}
		for _, s := range t.Latency.Samples {
			seen[s.Thread] = true
		}
		return len(seen)
	}
	return 0
}

// RunName names a trace: its scenario, or its workload.
func RunName(t *trace.Trace) string {
	if t.Scenario != nil && t.Scenario.Name != "" {
		return t.Scenario.Name
	}
	if t.Spec.Workload == "" {
		return "run"
	}
	return t.Spec.Workload
}

// Describe says in a few words what a trace's workload did.
func Describe(t *trace.Trace) string {
	p := t.Spec.Params
	threads := threadsOf(t)
	th := "1 thread"
	if threads != 1 {
		th = fmt.Sprintf("%d threads", threads)
	}
	switch t.Spec.Workload {
	case "periodic":
		burn := paramNs(p, "burn_ns")
		what := "burns"
		if burn == 0 {
			burn, what = paramNs(p, "burn_cpu_ns"), "CPU burns"
		}
		return fmt.Sprintf("%s: %s %s, sleep %s, %d times", th, report.Dur(burn), what, report.Dur(paramNs(p, "sleep_ns")), paramNs(p, "iterations"))
	case "bursty":
		on := paramNs(p, "on_ns")
		what := "bursts"
		if on == 0 {
			on, what = paramNs(p, "on_cpu_ns"), "CPU bursts"
		}
		idle := report.Dur(paramNs(p, "off_ns"))
		if j := paramNs(p, "jitter_ns"); j > 0 {
			idle += "±" + report.Dur(j)
		}
		return fmt.Sprintf("%s: %s %s, idle %s, for %s", th, report.Dur(on), what, idle, report.Dur(paramNs(p, "duration_ns")))
	case "parallel":
		return fmt.Sprintf("%s: CPU events for %s", th, report.Dur(paramNs(p, "duration_ns")))
	case "command":
		return strings.Join(t.Spec.Args, " ")
	}
	return t.Spec.Workload
}
