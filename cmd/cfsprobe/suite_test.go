package main

// The suites' "Must show" list (issue 3), on real cgroups.

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// runSuite runs `cfsprobe suite ARGS --out DIR` and loads every trace,
// measured and (with --compare) simulated, by scenario. wantCode -1
// accepts 0 and 1 (the caller judges the verdicts).
func runSuite(t *testing.T, wantCode int, args ...string) (r result, measured, simulated map[string]*trace.Trace) {
	t.Helper()
	dir := t.TempDir()
	full := append([]string{"suite", "--parent", testParent, "--out", dir}, args...)
	r = cfsprobe(t, full...)
	t.Logf("cfsprobe %s:\n%s", strings.Join(args, " "), r.stdout)
	if r.code != wantCode && !(wantCode == -1 && r.code <= 1) {
		t.Fatalf("exit %d, want %d\nstderr:\n%s", r.code, wantCode, r.stderr)
	}
	measured, simulated = map[string]*trace.Trace{}, map[string]*trace.Trace{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	for _, f := range files {
		tr, err := trace.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Spec.Simulated != nil {
			simulated[tr.Scenario.Name] = tr
		} else {
			measured[tr.Scenario.Name] = tr
		}
	}
	return r, measured, simulated
}

// compared is what runCompared measured.
type compared struct {
	// traces are each scenario's measured run: its latest that met its
	// expectations, of those the latest that nothing disturbed
	// (disturbedBy); else its latest that nothing disturbed, else its
	// latest.
	traces map[string]*trace.Trace
	// disturbed says, of each scenario that no attempt measured without
	// a disturbance, what disturbed its latest run.
	disturbed map[string]string
	// out is the output of the latest run whose scenarios, measured and
	// simulated, met every expectation, else of the last run; allMet says
	// which.
	out    result
	allMet bool
	// unjudged says why the simulator's agreement was not judged ("" when
	// it was: agreement.judge).
	unjudged string
	// finding: a run that nothing disturbed missed an expectation that
	// runCompared's final takes; traces are that run's (and, where it
	// ran a part of the suite, the other scenarios' as above).
	finding bool
}

// verdict is what the test's assertions on the traces report to: their
// failures are inconclusive where a scenario got no measurement that
// nothing disturbed in any attempt (but a finding's are failures), and
// the test is when the agreement was not judged.
func (c compared) verdict(t *testing.T) *verdict {
	v := &verdict{t: t, unjudged: c.unjudged}
	if c.finding {
		return v
	}
	for _, n := range slices.Sorted(maps.Keys(c.disturbed)) {
		v.disturbed = append(v.disturbed, n+": "+c.disturbed[n])
	}
	return v
}

// runCompared runs the suite with --compare until each scenario's
// measured run has met its expectations (but those accept takes) and the
// agreement with the simulator is settled, at most suiteAttempts times,
// each after the machine was quiet (awaitQuiet), and judges the
// agreement. The scenarios are runs of their own, one after another: a
// neighbour's burst that disturbs one attempt's A and the next one's C
// leaves each met once. After the first attempt, only the scenarios
// still to settle or to meet their expectations run again (suite
// --scenario). A missed expectation that final takes, in a run that
// nothing disturbed, is a finding, not noise: it is not measured again,
// and that run is what runCompared returns.
func runCompared(t *testing.T, accept, final func(trace.Expectation) bool, name string, args ...string) compared {
	t.Helper()
	ag := newAgreement(t, name)
	c := compared{traces: map[string]*trace.Trace{}, disturbed: map[string]string{}}
	// clean: the scenarios measured without a disturbance; kept: the
	// rank of each scenario's run in c.traces, which prefers a run that
	// met its expectations, then one that nothing disturbed.
	clean, kept := map[string]bool{}, map[string]int{}
	rank := func(x *trace.Trace, disturbed string) int {
		r := 0
		if len(unmet(x, accept)) == 0 {
			r += 2
		}
		if disturbed == "" {
			r++
		}
		return r
	}
	var again []string // the scenarios the next attempt runs (nil: all)
	for attempt := 1; ; attempt++ {
		awaitQuiet(t)
		flags := slices.Concat(args, []string{"--quick", "--compare"}, hostCosts.costs, hostCosts.events)
		if again != nil {
			flags = append(flags, "--scenario", strings.Join(again, ","))
		}
		r, cur, sim := runSuite(t, -1, flags...)
		hostCosts.learn(sim)
		ag.add(cur, sim)
		// The whole suite's output only: a part's verdict is the part's.
		if allMet := len(missedExpectations(cur, nil)) == 0 && len(missedExpectations(sim, nil)) == 0; again == nil && (allMet || !c.allMet) {
			c.out, c.allMet = r, allMet
		}
		why := map[string]string{} // what disturbed each run ("": nothing)
		undisturbed := map[string]*trace.Trace{}
		for n, x := range cur {
			if why[n] = disturbedBy(x); why[n] == "" {
				undisturbed[n] = x
			}
		}
		if final != nil && anyMissed(undisturbed, final) {
			// This run's traces, and for a part, the others' kept ones.
			traces := maps.Clone(c.traces)
			maps.Copy(traces, cur)
			c = compared{traces: traces, out: r, finding: true}
			break
		}
		for n, x := range cur {
			if rk := rank(x, why[n]); c.traces[n] == nil || rk >= kept[n] {
				c.traces[n], kept[n] = x, rk
			}
			if why[n] == "" {
				clean[n] = true
				delete(c.disturbed, n)
			} else if !clean[n] {
				c.disturbed[n] = why[n]
			}
		}
		missed := missedExpectations(c.traces, accept)
		unsettled := ag.unsettled()
		if len(missed) == 0 && len(unsettled) == 0 || attempt == suiteAttempts() {
			break
		}
		// A shared 2-CPU machine: a neighbour's burst shows as a slow
		// operation or a group short of the CPU it asks for. Measure
		// again, the host's costs too: what disturbed the run may have
		// disturbed their measurement, and its 22 s give a neighbour's
		// burst time to end.
		again = slices.Clone(unsettled)
		for n, x := range c.traces {
			if len(unmet(x, accept)) > 0 && !slices.Contains(again, n) {
				again = append(again, n)
			}
		}
		slices.Sort(again)
		t.Logf("%s, attempt %d: expectations never met %v, agreement unsettled for %v: measuring %v again", name, attempt, missed, unsettled, again)
		hostCosts = costFlags{}
	}
	c.unjudged = ag.judge()
	return c
}

// hostCosts gives each comparison the host's costs that the test
// process's first comparison measured (suite.MeasureCosts: 22 s of runs
// on this host) instead of measuring them again, as a user who compares
// one suite after another would give them (the flags of cfsprobe
// simulate); a comparison measured again measures them again too.
var hostCosts costFlags

// costFlags are the flags of cfsprobe simulate that give what the
// workloads cost beside their operations (costs) and how the parallel
// workload's events spread (events), as spec.simulated records them.
type costFlags struct{ costs, events []string }

// learn takes the costs of the simulated traces of a comparison, those
// not known yet.
func (c *costFlags) learn(sim map[string]*trace.Trace) {
	for _, tr := range sim {
		sm := tr.Spec.Simulated
		if c.costs == nil && sm.ThreadCPUNs > 0 && sm.WakeCPUNs > 0 && sm.WakeMidCPUNs > 0 && sm.WakeLongCPUNs > 0 && sm.SleepLateNs > 0 && sm.ResumeLateNs > 0 {
			c.costs = []string{"--thread-cpu", nsArg(sm.ThreadCPUNs), "--wake-cpu", nsArg(sm.WakeCPUNs),
				"--wake-cpu-mid", nsArg(sm.WakeMidCPUNs), "--wake-cpu-long", nsArg(sm.WakeLongCPUNs), "--sleep-late", nsArg(sm.SleepLateNs),
				"--resume-late", nsArg(sm.ResumeLateNs)}
		}
		if c.events == nil && len(sm.EventCPUQuantiles) > 0 {
			c.events = []string{"--event-cpu-quantiles", quantilesArg(sm.EventCPUQuantiles)}
		}
	}
}

// nsArg is a duration flag's value for ns nanoseconds, exactly.
func nsArg(ns int64) string { return strconv.FormatInt(ns, 10) + "ns" }

// quantilesArg is --event-cpu-quantiles's value for the spread that
// spec.simulated.event_cpu_quantiles records.
func quantilesArg(q []trace.QuantileNs) string {
	vs := make([]string, len(q))
	for i, v := range q {
		vs[i] = nsArg(v.Ns)
	}
	return strings.Join(vs, ",")
}

// missedExpectations lists the measured runs' expectations that were not
// met, but those accept takes (nil: none), each after its scenario's
// name.
func missedExpectations(tr map[string]*trace.Trace, accept func(trace.Expectation) bool) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(tr)) {
		for _, e := range unmet(tr[name], accept) {
			out = append(out, name+": "+e)
		}
	}
	return out
}

// unmet lists a measured run's expectations that were not met, but
// those accept takes (nil: none).
func unmet(x *trace.Trace, accept func(trace.Expectation) bool) []string {
	var out []string
	for _, e := range x.Scenario.Expectations {
		if !e.OK && (accept == nil || !accept(e)) {
			out = append(out, e.Text)
		}
	}
	return out
}

// anyMissed says whether a measured run missed an expectation that f
// takes.
func anyMissed(tr map[string]*trace.Trace, f func(trace.Expectation) bool) bool {
	for _, x := range tr {
		if slices.ContainsFunc(x.Scenario.Expectations, func(e trace.Expectation) bool { return !e.OK && f(e) }) {
			return true
		}
	}
	return false
}

func need(t *testing.T, traces map[string]*trace.Trace, names ...string) {
	t.Helper()
	for _, n := range names {
		if traces[n] == nil {
			t.Fatalf("no trace for scenario %s", n)
		}
	}
}

// Item 1: --list names the four suites; --show prints YAML that -f runs
// unchanged. Item 2: bursty-limits --quick reproduces seed 003's table.
func TestSuiteBurstyLimits(t *testing.T) {
	needCgroups(t)
	l := cfsprobe(t, "suite", "--list")
	for _, s := range []string{"aggressive-cfs", "threads-vs-quota", "bursty-limits", "burst"} {
		if !strings.Contains(l.stdout, s+" ") {
			t.Errorf("suite --list does not name %s:\n%s", s, l.stdout)
		}
	}
	show := cfsprobe(t, "suite", "--show", "bursty-limits")
	if show.code != 0 || !strings.Contains(show.stdout, "suite: bursty-limits") {
		t.Fatalf("suite --show: exit %d\n%s%s", show.code, show.stdout, show.stderr)
	}
	file := filepath.Join(t.TempDir(), "bursty-limits.yaml")
	if err := os.WriteFile(file, []byte(show.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	// B's demand is its quota exactly: a neighbour's burst shows as a
	// group short of the CPU it asks for (runCompared measures again).
	c := runCompared(t, nil, nil, "bursty-limits", "-f", file)
	need(t, c.traces, "A-unlimited", "B-moderate", "C-aggressive", "D-control")
	v := c.verdict(t)
	assertBurstyLimits(v, c.traces)
	v.settle()
}

func assertBurstyLimits(t errorer, tr map[string]*trace.Trace) {
	t.Helper()
	cpu := func(n string, want float64) {
		if c := tr[n].Summary.CPURatio; c < want-0.02 || c > want+0.02 {
			t.Errorf("%s: CPU %.1f%%, want %.0f%% within 2 points", n, 100*c, 100*want)
		}
	}
	cpu("A-unlimited", 0.5)
	cpu("B-moderate", 0.5)
	cpu("C-aggressive", 0.1)
	cpu("D-control", 0.5)
	if r := tr["C-aggressive"].Summary.ThrottledRatio; r < 0.95 {
		t.Errorf("C: %.1f%% of periods throttled, want at least 95%%", 100*r)
	}
	for _, n := range []string{"A-unlimited", "D-control"} {
		if k := tr[n].Summary.NrThrottled; k != 0 {
			t.Errorf("%s: %d periods throttled, want none", n, k)
		}
	}
	if r := tr["B-moderate"].Summary.ThrottledRatio; r > 0.10 {
		t.Errorf("B: %.1f%% of periods throttled, want at most 10%%", 100*r)
	}
}

// Item 3: threads-vs-quota --quick.
func TestSuiteThreadsVsQuota(t *testing.T) {
	needCgroups(t)
	// Another process on the workers' CPU shows as a slow event or a
	// group short of its quota: runCompared measures again. The events
	// take 1 ms (--event) here and in the qemu guest, where the host
	// stops a vCPU now and then: threads-1x's p99.9 is not judged against
	// the suite's 5 ms there, and a stall is judged as the lab's test of
	// one thread under one CPU judges it (parallelAtQuotaMiss: over 5 ms
	// or 4 times the median).
	var slow func(trace.Expectation) bool
	if emulated() {
		slow = func(e trace.Expectation) bool { return e.Metric == "latency_p999" && e.Max != nil }
	}
	c := runCompared(t, slow, nil, "threads-vs-quota", "threads-vs-quota")
	tr := c.traces
	need(t, tr, "threads-1x", "threads-2x", "threads-4x")
	v := c.verdict(t)
	defer v.settle()
	stall := max(5*ms, 4*tr["threads-1x"].Summary.LatencyNs.P50)
	if missed := missedExpectations(tr, slow); len(missed) > 0 {
		v.Errorf("threads-vs-quota missed expectations, want every one met: %v", missed)
	}
	for _, n := range []string{"threads-1x", "threads-2x", "threads-4x"} {
		needEngine(t, tr[n])
	}
	// One thread under a one-CPU quota needs exactly its quota: with the
	// workers in the C engine (nothing else in the group) no more than
	// 5 % of periods are throttled and nothing shows in latency.
	one := tr["threads-1x"].Summary
	t.Logf("threads-1x: %d of %d periods throttled, %s in all, p99.9 %s", one.NrThrottled, one.NrPeriods, report.Dur(one.ThrottledNs), report.Dur(one.LatencyNs.P999))
	if r := one.ThrottledRatio; r > 0.05 {
		v.Errorf("1x: %.1f%% of periods throttled, want at most 5%%", 100*r)
	}
	if p := one.LatencyNs.P999; p >= stall {
		v.Errorf("1x: p99.9 %.2fms, want under %.2fms", float64(p)/1e6, float64(stall)/1e6)
	}
	for _, n := range []string{"threads-2x", "threads-4x"} {
		s := tr[n].Summary
		if s.ThrottledRatio < 0.90 {
			v.Errorf("%s: %.1f%% of periods throttled, want at least 90%%", n, 100*s.ThrottledRatio)
		}
		if p := s.LatencyNs.P999; p < 20*ms {
			v.Errorf("%s: p99.9 %.2fms, want at least 20ms", n, float64(p)/1e6)
		}
	}
	prof := tr["threads-2x"].InPeriodProfile(20 * ms)
	if len(prof) != 5 {
		t.Fatalf("2x: in-period profile has %d slots, want 5", len(prof))
	}
	first, last := prof[0].OpsPerMs, prof[len(prof)-1].OpsPerMs
	t.Logf("2x in-period profile: %+v", prof)
	if !(last < first/4) {
		v.Errorf("2x: last slot %.2f ops/ms is not under a quarter of the first %.2f", last, first)
	}
}

// Item 4: aggressive-cfs --quick on this kernel: no unnecessary throttling.
func TestSuiteAggressiveCFS(t *testing.T) {
	needCgroups(t)
	// The quick form has 3 to 20 burns per scenario, so each p99 is the
	// slowest burn: one burn delayed by the machine (not throttled) fails
	// it, and runCompared measures again; a period throttled is what the
	// suite looks for, and is not measured again.
	//
	// In the qemu guest the lab's reader, in the real-time class, costs
	// about a millisecond a reading (agreement): where it wakes on the
	// burning thread's CPU it holds a burn up by that much:
	// sleep1000-unlimited's slowest burn took 7 ms or more in 2 of 5
	// measurements (2026-12-01). The p99 is not judged there; whether a
	// period was throttled is.
	throttled := func(e trace.Expectation) bool { return e.Metric == "nr_throttled" }
	var slow func(trace.Expectation) bool
	if emulated() {
		slow = func(e trace.Expectation) bool { return e.Metric == "latency_p99" }
	}
	c := runCompared(t, slow, throttled, "aggressive-cfs", "aggressive-cfs")
	tr := c.traces
	v := c.verdict(t)
	defer v.settle()
	if missed := missedExpectations(tr, slow); len(missed) > 0 {
		v.Errorf("aggressive-cfs missed expectations, want every one met: %v", missed)
	}
	if len(tr) != 6 {
		t.Fatalf("%d traces, want 6", len(tr))
	}
	for n, x := range tr {
		if p := x.Summary.LatencyNs.P99; p >= 7*ms && !emulated() {
			v.Errorf("%s: p99 burn %.2fms, want under 7ms", n, float64(p)/1e6)
		}
	}
	// The verdict is the run's: it passes when the run, measured and
	// simulated, met every expectation.
	verdict := "verdict: unnecessary throttling, or a noisy machine"
	if c.allMet {
		verdict = "verdict: no unnecessary throttling"
	}
	if !strings.Contains(c.out.stdout, verdict) {
		t.Errorf("no line %q:\n%s", verdict, c.out.stdout)
	}
}

// Item 6: burst equal to the quota halves throttled periods and cuts the
// worst burst by a third.
func TestSuiteBurst(t *testing.T) {
	needCgroups(t)
	// The worst burst is one burst: when a single one of ~50 is throttled
	// with burst (the Go runtime's threads take a slice now and then), it
	// decides latency_max's ratio. The suite keeps the expectation and
	// reports it; the test asserts it only when no burst was throttled
	// with burst.
	worst := func(e trace.Expectation) bool { return e.Metric == "latency_max" }
	c := runCompared(t, worst, nil, "burst", "burst")
	tr := c.traces
	need(t, tr, "no-burst", "burst-20ms")
	v := c.verdict(t)
	defer v.settle()
	a, b := tr["no-burst"].Summary, tr["burst-20ms"].Summary
	if a.NrThrottled == 0 || float64(b.NrThrottled) > 0.5*float64(a.NrThrottled) {
		v.Errorf("throttled periods %d with burst vs %d without: want at most half", b.NrThrottled, a.NrThrottled)
	}
	ratio := float64(b.LatencyNs.Max) / float64(a.LatencyNs.Max)
	v.Logf("worst burst %.1fms with burst vs %.1fms without (ratio %.2f); throttled %d vs %d",
		float64(b.LatencyNs.Max)/1e6, float64(a.LatencyNs.Max)/1e6, ratio, b.NrThrottled, a.NrThrottled)
	if b.NrThrottled == 0 && ratio > 2.0/3 {
		v.Errorf("worst burst not cut by a third although burst absorbed every burst")
	}
	if missed := missedExpectations(tr, worst); len(missed) > 0 {
		v.Errorf("burst missed expectations other than the worst burst's ratio: %v", missed)
	}
}

// Item 8: invalid scenario files: file:line errors, exit 2, nothing runs.
func TestSuiteInvalidFiles(t *testing.T) {
	files, _ := filepath.Glob("../../internal/suite/testdata/invalid/*.yaml")
	if len(files) < 5 {
		t.Fatalf("only %d invalid fixtures", len(files))
	}
	for _, f := range files {
		r := cfsprobe(t, "suite", "--parent", testParent, "-f", f)
		if r.code != 2 {
			t.Errorf("%s: exit %d, want 2\n%s", f, r.code, r.stderr)
		}
		if !strings.HasPrefix(r.stderr, "cfsprobe: "+f) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("%s: want one line naming the file, got %q", f, r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("%s: printed %q: nothing should run", f, r.stdout)
		}
	}
}
