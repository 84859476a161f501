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

	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

// Analyze judges traces with DefaultThresholds. host is the machine the
// verdict is about (the traces' own host facts are not compared). It is a
// pure function of its arguments.
func Analyze(traces []*trace.Trace, host trace.Host) Result {
	th := DefaultThresholds()
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

// analyzeRun computes the evidence of one trace.
func analyzeRun(t *trace.Trace, th Thresholds) Run {
	// The built-in workload the trace ran, from its spec; nil for a
	// command or a spec without its parameters.
	w, err := workload.FromSpec(t.Spec)
	if err != nil {
		w = nil
	}
	run := Run{
		Name: RunName(t), Description: describe(t, w), Workload: t.Spec.Workload, Threads: threadsOf(t, w),
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
	run.Op = opName(t, w)
	run.ExpectedOpNs = expectedOp(t, w, ops)
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
			if p.ThrottledUnderQuota(time.Duration(quotaNs)) {
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

// opName is what the trace calls an operation, else what its workload
// does.
func opName(t *trace.Trace, w workload.Workload) string {
	switch {
	case t.Latency != nil && t.Latency.Op != "":
		return t.Latency.Op
	case w != nil:
		return w.Op()
	}
	return "operation"
}

// expectedOp is what one operation should take: what the workload sets
// (a burn's or a burst's time), else the median of what was measured.
func expectedOp(t *trace.Trace, w workload.Workload, ops []op) int64 {
	if w != nil && w.ExpectedOp() > 0 {
		return int64(w.ExpectedOp())
	}
	if len(ops) > 0 {
		walls := make([]int64, len(ops))
		for i, o := range ops {
			walls[i] = o.WallNs
		}
		sort.Slice(walls, func(i, j int) bool { return walls[i] < walls[j] })
		return trace.Quantile(walls, 0.5)
	}
	if s := t.Summary.LatencyNs; s != nil {
		return s.P50
	}
	return 0
}

// threadsOf is how many threads the workload ran, else how many timed
// operations.
func threadsOf(t *trace.Trace, w workload.Workload) int {
	if w != nil {
		return w.Workers()
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

// describe says in a few words what a trace's workload did.
func describe(t *trace.Trace, w workload.Workload) string {
	switch {
	case w != nil:
		return w.Describe()
	case t.Spec.Workload == "command":
		return strings.Join(t.Spec.Args, " ")
	}
	return t.Spec.Workload
}
