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
	"math"
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
// other work of a shared machine: a measurement that disagrees beside
// other work that kept more than trace.DisturbedCPUs busy on the
// workload's CPUs (trace.Summary.Disturbed), or one that disagrees where
// other work held its operations up, where nothing of the limit could,
// and agrees without that (setAside, heldUp), is not judged. One that
// agrees is judged, disturbed or not: the model has no other work, which
// can only part the two (in the qemu guest on 2026-12-03,
// aggressive-cfs's sleep100-quota agreed in four measurements in a row
// beside 0.06 to 0.08 CPUs of other work, and was measured again after
// each, 233 s of the test). A scenario is judged on up to two
// measurements (the simulation is deterministic): it agrees when one of
// them does. One with no judged measurement is not judged; when more
// than half of a suite's are not, the machine was too busy for the
// judgement, and the test is inconclusive (verdict).
//
// Under emulation (the qemu guest: test/vm/run.sh sets
// CFSPROBE_EMULATED=1) the same judgement holds, on up to four
// measurements of a suite (emulatedAttempts), as the guest's costs and
// its timers move from run to run. The lab's own reader
// costs some ten times this host's there (0.06 to 0.08 of a CPU at its
// 10 ms interval), which is not other work
// (trace.Summary.SelfBusyCPUs): the model wakes it.
type agreement struct {
	t         *testing.T
	suite     string
	scenarios map[string]*scenarioJudgement
}

// scenarioJudgement is what the judged measurements of one scenario
// said.
type scenarioJudgement struct {
	clean  int            // measurements judged
	agreed bool           // one of them agreed
	last   []suite.Figure // the last one's figures
}

// settled: another measurement could not change the judgement. Under
// emulation one that disagrees is measured as often as the test
// measures (suiteAttempts).
func (j *scenarioJudgement) settled() bool {
	if emulated() {
		return j.agreed
	}
	return j.agreed || j.clean >= 2
}

// emulatedAttempts is suiteAttempts under emulation.
const emulatedAttempts = 4

// suiteAttempts is how many times the suites' tests measure a suite at
// most (runCompared): attempts, and under emulation emulatedAttempts, as
// burst's no-burst, the guest's kernel throttling 2 to 6 points more of
// its periods than the model (bench/RESULTS.md, "The cgroup v2 guest"),
// was within the 5 points in 7 of 9 measurements on 2026-12-01.
func suiteAttempts() int {
	if emulated() {
		return emulatedAttempts
	}
	return attempts
}

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
		// The model has no other work, so other work can only part the
		// two: a disturbed run that agrees all the same is judged.
		if m.Summary.OthersBusyCPUs == nil || m.Summary.Disturbed() && !suite.Agrees(figs) {
			a.t.Logf("%s/%s: disturbed (other work: %s), not judged: %s", a.suite, name, report.OthersBusy(m.Summary), figureLine(figs))
			continue
		}
		if why := setAside(m, s, figs); why != "" {
			a.t.Logf("%s/%s: disturbed (%s), not judged: %s", a.suite, name, why, figureLine(figs))
			continue
		}
		j.clean++
		j.last = figs
		j.agreed = suite.Agrees(figs)
		self := "-"
		if c := m.Summary.SelfBusyCPUs; c != nil {
			self = fmt.Sprintf("%.2f", *c)
		}
		a.t.Logf("%s/%s (other work %s, cfsprobe's own %s; kernel era %s, %d CPUs): %s", a.suite, name, report.OthersBusy(m.Summary), self, s.Host.Kernel, s.Host.CPUs, figureLine(figs))
	}
}

// heldUp is what other work took from a measured run's operations where
// nothing of the limit can have held them (the run had no throttled
// period, and each of the workload's threads had a CPU of its own), and
// the run as it would have been without it; nil when that cannot be told
// (a throttled run, more threads than CPUs, operations without their CPU
// times, or not every operation kept). Such a wait is other work on the
// workload's CPU, or the hypervisor's (steal time, which a kernel with
// CONFIG_PARAVIRT_TIME_ACCOUNTING, as this host's, charges to no thread:
// a periodic --burn 5ms run of 4 s lost 6 to 8 ms of its 200 ms of CPU
// beside 20 to 70 ms of steal), which the model does not have, and which
// an average of other work (trace.Summary.Disturbed) hides when it comes
// at once: on 2026-11-30 a kernel worker (kworker/1:2, virtio) ran 4 and
// then 3.4 ms on the pinned workload's CPU in the middle of a burst (perf
// sched timehist), and burst-20ms's 30 ms bursts took 38 ms in both
// measurements of a CI run, beside 0.00 CPUs of other work on average.
//
//   - An operation of CPU time (bursty --on-cpu, periodic --burn-cpu,
//     parallel's events) took longer than its CPU time by what held it;
//     without it, it takes its CPU time.
//   - An operation of wall time (bursty --on, periodic --burn) spins for
//     its time, so what held it is CPU time it did not get (its wall time
//     less its CPU time), and it took longer than its time only when the
//     hold came at its end (it read the clock after); without it, it
//     takes no longer than its time, and the run used that CPU time too.
//     aggressive-cfs's 5 ms burns once in 5 s used 0.1 % of a CPU against
//     the model's 0.2 % (13 % apart, where 5 % agree) in a run whose one
//     burn took 6.8 ms (2026-11-30); in four runs of the suite, 3 of its
//     24 measurements disagreed, each on the CPU used (the model's 9 to
//     26 % above it), and each agreed without what its burns lost (0.3 to
//     4.2 % from the model's).
func heldUp(m *trace.Trace) *hold {
	p := m.Spec.Params
	if m.Summary.NrThrottled > 0 || m.Latency == nil || p == nil || m.Summary.WallNs <= 0 ||
		len(m.Latency.Samples) == 0 || int64(len(m.Latency.Samples)) != m.Latency.Count {
		return nil
	}
	if n := p.Threads(); n < 1 || n > m.Host.CPUs {
		return nil
	}
	its := p.WallBurn() // an operation of wall time: how long it spins
	h := &hold{}
	samples := slices.Clone(m.Latency.Samples)
	for i, op := range samples {
		if op.CPUNs <= 0 {
			return nil
		}
		wait := max(op.WallNs-op.CPUNs, 0)
		held := wait
		if its > 0 {
			h.lost += time.Duration(wait)
			held = min(wait, max(op.WallNs-int64(its), 0))
		}
		h.longest = max(h.longest, time.Duration(held))
		samples[i].WallNs -= held
	}
	without := *m
	without.Latency = &trace.Latency{Op: m.Latency.Op, Count: m.Latency.Count, Samples: samples}
	pct, err := without.Latency.Percentiles()
	if err != nil {
		return nil
	}
	without.Summary.LatencyNs = pct
	without.Summary.CPURatio += float64(h.lost) / float64(m.Summary.WallNs)
	h.without = &without
	return h
}

// hold is what other work took from a measured run's operations
// (heldUp).
type hold struct {
	longest time.Duration // the most it lengthened one operation
	lost    time.Duration // the CPU time operations of wall time did not get
	without *trace.Trace  // the run without it
}

// setAside says why a measured run that disagrees with its simulation s
// is not judged: other work held its operations up where nothing of the
// limit could, and without that it agrees (heldUp); "" when it is
// judged. A run that agrees all the same is judged, and so is one whose
// disagreement other work does not account for.
func setAside(m, s *trace.Trace, figs []suite.Figure) string {
	if suite.Agrees(figs) {
		return ""
	}
	h := heldUp(m)
	if h == nil {
		return ""
	}
	without := suite.Agree(h.without, s)
	if !suite.Agrees(without) {
		return ""
	}
	return fmt.Sprintf("other work held its operations up where nothing of the limit could: one by %v, and %v of CPU time not given to those of wall time; without that it agrees: %s",
		h.longest, h.lost, figureLine(without))
}

// unsettled are the scenarios whose judgement another run could change
// (scenarioJudgement's settled), sorted.
func (a *agreement) unsettled() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(a.scenarios)) {
		if !a.scenarios[name].settled() {
			out = append(out, name)
		}
	}
	return out
}

// judge fails the test for each scenario whose undisturbed measurements
// all disagree with the simulation, and says why it judged nothing when
// the machine was too busy ("" when it judged).
func (a *agreement) judge() (unjudged string) {
	a.t.Helper()
	judged, notJudged := 0, 0
	var errs []string
	for _, name := range slices.Sorted(maps.Keys(a.scenarios)) {
		switch j := a.scenarios[name]; {
		case j.clean == 0:
			notJudged++
			a.t.Logf("%s/%s: not judged: every measurement was disturbed", a.suite, name)
		case !j.agreed:
			judged++
			errs = append(errs, fmt.Sprintf("%s/%s: the simulation disagrees with %d undisturbed measurements; the last: %s", a.suite, name, j.clean, figureLine(j.last)))
		default:
			judged++
		}
	}
	a.t.Logf("%s: %d scenarios judged against the simulator, %d not (disturbed)", a.suite, judged, notJudged)
	if notJudged > judged {
		return fmt.Sprintf("%s: the machine was too busy to judge the simulator: %d of %d scenarios got no undisturbed measurement", a.suite, notJudged, judged+notJudged)
	}
	for _, e := range errs {
		a.t.Error(e)
	}
	return ""
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

// setAside sets aside a run that disagrees only where other work held
// its operations up where nothing of the limit could, and the run agrees
// without that: the CI run's burst-20ms (30 ms bursts of CPU time, none
// throttled, one 38 ms, where the model had 30), and aggressive-cfs's 5
// ms burns of wall time, one of which took 6.8 ms, in a run whose model
// used 13 % more CPU. A hold that does not account for the disagreement,
// a throttled run, more threads than CPUs, or operations not all kept:
// judged.
func TestSetAside(t *testing.T) {
	ms := time.Millisecond
	// run: the measured trace, one operation per wall time (wall less
	// CPU: the wait), as bursts of 30 ms of CPU (--on-cpu; the workload
	// records --on's default of 50 ms beside it, as the CI run of
	// 2026-12-03 did, whose 47.9 ms burst was judged as one of wall time
	// that nothing held).
	run := func(threads, cpus int, throttled int64, walls ...time.Duration) *trace.Trace {
		tr := &trace.Trace{Host: trace.Host{CPUs: cpus}, Spec: trace.Spec{Params: &trace.Params{Bursty: &trace.BurstyParams{Threads: threads, On: 50 * ms, OnCPU: 30 * ms}}},
			Latency: &trace.Latency{Count: int64(len(walls))}}
		for _, w := range walls {
			tr.Latency.Samples = append(tr.Latency.Samples, trace.Sample{WallNs: int64(w), CPUNs: int64(30 * ms)})
		}
		tr.Summary.NrThrottled = throttled
		tr.Summary.WallNs = int64(10 * time.Second)
		tr.Summary.CPURatio = 0.05
		var err error
		if tr.Summary.LatencyNs, err = tr.Latency.Percentiles(); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	// sim: the simulation, every operation p99 long.
	sim := func(cpu float64, p99 time.Duration) *trace.Trace {
		return &trace.Trace{Summary: trace.Summary{CPURatio: cpu, LatencyNs: &trace.Percentiles{P99: int64(p99), P999: int64(p99)}}}
	}
	// burns: aggressive-cfs's sleep5000-quota, three 5 ms burns of wall
	// time in 15 s, one held 1.83 ms at its end.
	burns := func() *trace.Trace {
		tr := run(1, 2, 0, 5*ms, 6830*time.Microsecond, 5*ms)
		tr.Spec.Params = &trace.Params{Periodic: &trace.PeriodicParams{Threads: 1, Burn: 5 * ms, Iterations: 3}}
		for i := range tr.Latency.Samples {
			tr.Latency.Samples[i].CPUNs = int64(5 * ms)
		}
		tr.Summary.WallNs = int64(15 * time.Second)
		tr.Summary.CPURatio = 0.001
		return tr
	}
	for _, tc := range []struct {
		name     string
		m, s     *trace.Trace
		setAside bool
	}{
		{"the CI run", run(1, 2, 0, 30*ms, 30500*time.Microsecond, 38*ms), sim(0.05, 30*ms), true},
		{"held, yet the model is off", run(1, 2, 0, 30*ms, 31200*time.Microsecond, 38*ms), sim(0.05, 20*ms), false},
		{"held, agreeing", run(1, 2, 0, 30*ms, 36*ms), sim(0.05, 31*ms), false},
		{"held, the CPU off", run(1, 2, 0, 30*ms, 38*ms), sim(0.06, 30*ms), false},
		{"throttled", run(1, 2, 3, 30*ms, 38*ms), sim(0.05, 30*ms), false},
		{"more threads than CPUs", run(4, 2, 0, 30*ms, 38*ms), sim(0.05, 30*ms), false},
		{"not every operation kept", func() *trace.Trace {
			tr := run(1, 2, 0, 30*ms, 38*ms)
			tr.Latency.Count = 500
			return tr
		}(), sim(0.05, 30*ms), false},
		{"burns of wall time", burns(), sim(0.00112, 5*ms), true},
		{"burns of wall time, the CPU further off", burns(), sim(0.0013, 5*ms), false},
	} {
		figs := suite.Agree(tc.m, tc.s)
		why := setAside(tc.m, tc.s, figs)
		if (why != "") != tc.setAside {
			t.Errorf("%s (%s): set aside %q, want set aside %v", tc.name, figureLine(figs), why, tc.setAside)
		}
	}
	// What the hold took: the CI run's one burst 8 ms; the burns' one
	// 1.83 ms at its end, 1.83 ms of CPU.
	if h := heldUp(run(1, 2, 0, 30*ms, 30500*time.Microsecond, 38*ms)); h == nil || h.longest != 8*ms || h.lost != 0 || h.without.Summary.LatencyNs.P99 != int64(30*ms) {
		t.Errorf("the CI run: held %+v, want 8ms, nothing lost, p99 30ms without it", h)
	}
	if h := heldUp(burns()); h == nil || h.longest != 1830*time.Microsecond || h.lost != 1830*time.Microsecond ||
		h.without.Summary.LatencyNs.P99 != int64(5*ms) || math.Abs(h.without.Summary.CPURatio-0.001122) > 1e-9 {
		t.Errorf("burns: held %+v, want 1.83ms, 1.83ms lost, p99 5ms and 0.001122 CPUs without it", h)
	}
}

// A measurement beside other work is judged when it agrees, and not
// when it disagrees: a scenario that agreed beside other work is settled,
// one that only disagreed beside it is measured again, and a suite whose
// scenarios only disagreed beside other work is not judged.
func TestAgreementBesideOtherWork(t *testing.T) {
	ms := time.Millisecond
	run := func(others, cpu float64, p99 time.Duration) *trace.Trace {
		tr := &trace.Trace{ReaderClass: trace.ReaderRealtime,
			Summary: trace.Summary{CPURatio: cpu, LatencyNs: &trace.Percentiles{P99: int64(p99), P999: int64(p99)}}}
		tr.Summary.OthersBusyCPUs = &others
		return tr
	}
	model := run(0, 0.05, 30*ms)
	a := newAgreement(t, "test")
	a.add(map[string]*trace.Trace{
		"agrees":    run(0.08, 0.05, 31*ms),
		"disagrees": run(0.08, 0.05, 60*ms),
	}, map[string]*trace.Trace{"agrees": model, "disagrees": model})
	if got := a.unsettled(); !slices.Equal(got, []string{"disagrees"}) {
		t.Errorf("unsettled %v, want [disagrees]: agreeing beside 0.08 CPUs of other work settles a scenario, disagreeing does not", got)
	}
	if j := a.scenarios["agrees"]; j.clean != 1 || !j.agreed {
		t.Errorf("agrees: %+v, want judged once, agreed", j)
	}
	if j := a.scenarios["disagrees"]; j.clean != 0 {
		t.Errorf("disagrees: judged %d times beside other work, want not judged", j.clean)
	}
	// One judged (agreed), one not: the suite is judged.
	if why := a.judge(); why != "" {
		t.Errorf("judge: %q, want judged", why)
	}
	b := newAgreement(t, "test")
	b.add(map[string]*trace.Trace{"disagrees": run(0.08, 0.05, 60*ms)}, map[string]*trace.Trace{"disagrees": model})
	if why := b.judge(); why == "" {
		t.Error("judge: judged a suite whose one measurement disagreed beside other work, want not judged")
	}
}
