package main

// The simulator is validated on this host (issue 10, must show 1): the
// suites' tests run every scenario of the four built-in suites (--quick)
// with --compare, measured on real cgroups and simulated on the model of
// this host's kernel era with its CPUs, and an agreement judges that the
// two agree on the throttled ratio, the CPU used, p99 and p99.9
// (suite.Agree).

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/report"
	"github.com/cfsprobe/cfsprobe/internal/suite"
	"github.com/cfsprobe/cfsprobe/internal/testenv"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// agreement judges the simulator against the kernel, not against the
// other work of a shared machine: a measurement beside other work that
// kept more than trace.DisturbedCPUs busy on the workload's CPUs
// (trace.Summary.Disturbed), or one that disagrees and held an
// operation up where nothing of the limit could (heldUp), is not judged. A scenario is judged on up to
// two undisturbed measurements (the simulation is deterministic): it
// agrees when one of them does. One with no undisturbed measurement is
// not judged; when more than half of a suite's are not, the machine was
// too busy for the judgement, which is then skipped (fails under
// CFSPROBE_REQUIRE_CGROUPS=1).
//
// Under emulation (the qemu guest: test/vm/run.sh sets
// CFSPROBE_EMULATED=1) the guest's own kernel work counts as other
// work and the model is not of emulated timers: the agreement is logged,
// not judged (bench/RESULTS.md, "The cgroup v2 guest").
type agreement struct {
	t         *testing.T
	suite     string
	scenarios map[string]*scenarioJudgement
}

// scenarioJudgement is what the undisturbed measurements of one scenario
// said.
type scenarioJudgement struct {
	clean  int            // undisturbed measurements judged
	agreed bool           // one of them agreed
	last   []suite.Figure // the last one's figures
}

// settled: another measurement could not change the judgement.
func (j *scenarioJudgement) settled() bool { return j.agreed || j.clean >= 2 }

func newAgreement(t *testing.T, suiteName string) *agreement {
	return &agreement{t: t, suite: suiteName, scenarios: map[string]*scenarioJudgement{}}
}

// add judges one run of the suite: its measured and simulated traces by
// scenario.
func (a *agreement) add(measured, simulated map[string]*trace.Trace) {
	a.t.Helper()
	for _, name := range slices.Sorted(maps.Keys(measured)) {
		m, s := measured[name], simulated[name]
		if s == nil {
			a.t.Fatalf("%s: no simulated run beside the measured one (suite --compare)", name)
		}
		j := a.scenarios[name]
		if j == nil {
			j = &scenarioJudgement{}
			a.scenarios[name] = j
		}
		if j.settled() {
			continue
		}
		if err := sameBoundaries(m, s); err != nil {
			a.t.Errorf("%s/%s: %v", a.suite, name, err)
		}
		if m.ReaderClass != trace.ReaderRealtime && m.ReaderClass != trace.ReaderApart {
			// The model's reader preempts at once, or wakes where the
			// group's threads are not (docs/design.md, "The lab's
			// reader"); CI's machine lets it (root, in the root cgroup),
			// a developer's session may not.
			msg := fmt.Sprintf("%s/%s: the lab's reader ran in the %q class, want %q or %q", a.suite, name, m.ReaderClass, trace.ReaderRealtime, trace.ReaderApart)
			if testenv.Required() {
				a.t.Error(msg)
			} else {
				a.t.Log(msg)
			}
		}
		figs := suite.Agree(m, s)
		if m.Summary.OthersBusyCPUs == nil || m.Summary.Disturbed() {
			a.t.Logf("%s/%s: disturbed (other work: %s), not judged: %s", a.suite, name, report.OthersBusy(m.Summary), figureLine(figs))
			continue
		}
		if d, bound := heldUp(m); d > bound && !suite.Agrees(figs) {
			a.t.Logf("%s/%s: disturbed (an operation that nothing of the limit held took %v beyond its CPU time, more than the %v its latency may differ by), not judged: %s",
				a.suite, name, d, bound, figureLine(figs))
			continue
		}
		j.clean++
		j.last = figs
		j.agreed = suite.Agrees(figs)
		a.t.Logf("%s/%s (other work %s; kernel era %s, %d CPUs): %s", a.suite, name, report.OthersBusy(m.Summary), s.Host.Kernel, s.Host.CPUs, figureLine(figs))
	}
}

// heldUp is how much longer than its own CPU time the slowest
// operation of a measured run took where nothing of the limit can have
// held it up (the run had no throttled period, each of the workload's
// threads had a CPU of its own, and an operation is an amount of CPU
// time: bursty --on-cpu, periodic --burn-cpu, parallel's events), with
// the most its latency may differ from the model's (suite.Agree's bound
// on its p99); 0 when that cannot be told (a throttled run, more threads
// than CPUs, operations of wall time, which other work shortens of CPU
// rather than lengthens, no per-operation CPU times). Such a wait is
// other work on the workload's CPU, which the model does not have, and
// which an average of other work (trace.Summary.Disturbed) hides when it
// comes at once: on 2026-11-30 a kernel worker (kworker/1:2, virtio) ran
// 4 and then 3.4 ms on the pinned workload's CPU in the middle of a
// burst (perf sched timehist), and burst-20ms's 30 ms bursts took 38 ms
// in both measurements of a CI run, beside 0.00 CPUs of other work on
// average. The agreement sets aside a measurement held up so only when
// it disagrees: one that agrees all the same is judged.
func heldUp(m *trace.Trace) (held, bound time.Duration) {
	if m.Summary.LatencyNs != nil {
		bound = suite.LatencyBound(time.Duration(m.Summary.LatencyNs.P99))
	}
	p := m.Spec.Params
	if m.Summary.NrThrottled > 0 || m.Latency == nil || p == nil {
		return 0, bound
	}
	ofWallTime := p.Bursty != nil && p.Bursty.On > 0 || p.Periodic != nil && p.Periodic.Burn > 0
	if n := p.Threads(); ofWallTime || n < 1 || n > m.Host.CPUs {
		return 0, bound
	}
	for _, op := range m.Latency.Samples {
		if op.CPUNs > 0 {
			held = max(held, time.Duration(op.WallNs-op.CPUNs))
		}
	}
	return held, bound
}

// settled says whether another run could change the judgement: every
// scenario agreed or disagreed twice undisturbed. Under emulation, where
// nothing is judged, it is settled at once.
func (a *agreement) settled() bool {
	if emulated() {
		return true
	}
	for _, j := range a.scenarios {
		if !j.settled() {
			return false
		}
	}
	return true
}

// judge fails the test for each scenario whose undisturbed measurements
// all disagree with the simulation.
func (a *agreement) judge() {
	a.t.Helper()
	if emulated() {
		a.t.Logf("%s: under emulation the simulator's agreement is logged, not judged", a.suite)
		return
	}
	judged, unjudged := 0, 0
	var errs []string
	for _, name := range slices.Sorted(maps.Keys(a.scenarios)) {
		switch j := a.scenarios[name]; {
		case j.clean == 0:
			unjudged++
			a.t.Logf("%s/%s: not judged: every measurement was disturbed", a.suite, name)
		case !j.agreed:
			judged++
			errs = append(errs, fmt.Sprintf("%s/%s: the simulation disagrees with %d undisturbed measurements; the last: %s", a.suite, name, j.clean, figureLine(j.last)))
		default:
			judged++
		}
	}
	a.t.Logf("%s: %d scenarios judged against the simulator, %d not (disturbed)", a.suite, judged, unjudged)
	if unjudged > judged {
		msg := fmt.Sprintf("%s: the machine was too busy to judge the simulator: %d of %d scenarios got no undisturbed measurement", a.suite, unjudged, judged+unjudged)
		if testenv.Required() {
			a.t.Error(msg)
		} else {
			a.t.Log(msg)
		}
		return
	}
	for _, e := range errs {
		a.t.Error(e)
	}
}

// sameBoundaries checks that a simulation has its measured run's period
// boundaries and ticks against the workload's clock: the simulated run
// counts from its process's start, the charged start's CPU time before
// the workload's clock, the measured one from its process's start
// returning, the workload's clock released_ns after it, and the kernel's
// ticks are at multiples of the tick on its monotonic clock.
func sameBoundaries(measured, simulated *trace.Trace) error {
	if measured.Limits.QuotaUs == nil || len(measured.Periods) == 0 || len(simulated.Periods) == 0 {
		return nil
	}
	sm := simulated.Spec.Simulated
	if sm.StartCPUNs != measured.Process.StartCPUNs || sm.ExitCPUNs != measured.Process.ExitCPUNs {
		return fmt.Errorf("the simulated run charged a start of %v and an exit of %v, want the measured run's %v and %v",
			time.Duration(sm.StartCPUNs), time.Duration(sm.ExitCPUNs), time.Duration(measured.Process.StartCPUNs), time.Duration(measured.Process.ExitCPUNs))
	}
	// On the kernel's clock: a simulated time, and a measured one.
	at := func(simNs int64) int64 {
		return simNs - sm.StartCPUNs + measured.Process.ReleasedNs + measured.StartedMonoNs
	}
	measuredAt := func(ns int64) int64 { return ns + measured.StartedMonoNs }
	period := measured.Limits.PeriodUs * 1000
	if off := mod(at(simulated.Periods[0].EndNs)-measuredAt(measured.Periods[0].EndNs), period); off != 0 {
		return fmt.Errorf("the simulated run's periods end %v after the measured run's (modulo the period), want them where the measured run's did", time.Duration(off))
	}
	if off := mod(at(sm.TickOffsetNs), sm.TickNs); off != 0 {
		return fmt.Errorf("the simulated run's ticks are %v past multiples of the tick on the kernel's clock, want them on them", time.Duration(off))
	}
	return nil
}

func mod(a, m int64) int64 { return (a%m + m) % m }

// emulated says whether the tests run under emulation (the qemu guest).
func emulated() bool { return os.Getenv("CFSPROBE_EMULATED") != "" }

func figureLine(figs []suite.Figure) string {
	var parts []string
	for _, f := range figs {
		mark := ""
		if !f.OK {
			mark = " (outside)"
		}
		parts = append(parts, fmt.Sprintf("%s %s%s", f.Name, f, mark))
	}
	return strings.Join(parts, ", ")
}

// heldUp tells other work from the limit only where the limit cannot
// have held an operation: the CI run's burst-20ms (30 ms bursts, none
// throttled, one 38 ms) is held 8 ms, beyond its 7.6 ms; throttled, with
// more threads than CPUs, or bursts of wall time, nothing is told.
func TestHeldUp(t *testing.T) {
	ms := int64(time.Millisecond)
	run := func(threads, cpus int, throttled int64, walls ...int64) *trace.Trace {
		tr := &trace.Trace{Host: trace.Host{CPUs: cpus}, Spec: trace.Spec{Params: &trace.Params{Bursty: &trace.BurstyParams{Threads: threads, OnCPU: 30 * time.Millisecond}}},
			Latency: &trace.Latency{}}
		for _, w := range walls {
			tr.Latency.Samples = append(tr.Latency.Samples, trace.Sample{WallNs: w * ms / 10, CPUNs: 30 * ms})
		}
		tr.Summary.NrThrottled = throttled
		tr.Summary.LatencyNs = &trace.Percentiles{P99: slices.Max(walls) * ms / 10}
		return tr
	}
	for _, tc := range []struct {
		name        string
		tr          *trace.Trace
		held, bound time.Duration
	}{
		{"the CI run", run(1, 2, 0, 300, 305, 380), 8 * time.Millisecond, 7600 * time.Microsecond},
		{"a quiet run", run(1, 2, 0, 300, 312, 321), 2100 * time.Microsecond, 6420 * time.Microsecond},
		{"throttled", run(1, 2, 3, 300, 1100), 0, 22 * time.Millisecond},
		{"more threads than CPUs", run(4, 2, 0, 300, 600), 0, 12 * time.Millisecond},
		{"bursts of wall time", func() *trace.Trace {
			tr := run(1, 2, 0, 300, 380)
			tr.Spec.Params.Bursty.On, tr.Spec.Params.Bursty.OnCPU = 30*time.Millisecond, 0
			return tr
		}(), 0, 7600 * time.Microsecond},
	} {
		held, bound := heldUp(tc.tr)
		if held != tc.held || bound != tc.bound {
			t.Errorf("%s: held up %v (bound %v), want %v (%v)", tc.name, held, bound, tc.held, tc.bound)
		}
	}
}
