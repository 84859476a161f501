package sim

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

const ms = time.Millisecond

// periodsOf makes a timeline of 100 ms periods from (usage, stall,
// stopped CPUs) triples; a stall > 0 marks the period throttled.
func periodsOf(rows ...[3]int64) []trace.Period {
	out := make([]trace.Period, len(rows))
	for i, r := range rows {
		start := int64(i) * int64(100*ms)
		p := trace.Period{StartNs: start, EndNs: start + int64(100*ms), UsageNs: r[0] * int64(ms), Kernel: true}
		if r[1] > 0 {
			p.Throttled, p.StallNs, p.StoppedCPUs = true, r[1]*int64(ms), int(r[2])
			p.ThrottledNs = p.StallNs * r[2]
		}
		out[i] = p
	}
	return out
}

func limitedTrace(quota time.Duration, spec trace.Spec, ps []trace.Period) *trace.Trace {
	return &trace.Trace{Schema: trace.Schema, Spec: spec, Host: trace.Host{CPUs: 2},
		Limits: trace.LimitsOf(cgroup.Limits{Period: 100 * ms, Quota: quota}), Periods: ps}
}

func recorded() trace.Spec { return trace.Spec{Workload: "recorded"} }

type wantBurst struct {
	at, work time.Duration
	par      float64
}

func checkBursts(t *testing.T, got []burst, want []wantBurst) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d bursts, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if d := g.at - w.at; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("burst %d at %v, want %v", i, g.at, w.at)
		}
		if d := g.work - w.work; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("burst %d work %v, want %v", i, g.work, w.work)
		}
		if math.Abs(g.par-w.par) > 1e-6 {
			t.Errorf("burst %d parallelism %v, want %v", i, g.par, w.par)
		}
	}
}

// Two busy threads under half a CPU (the parallel workload for a
// duration): each period they run 25 ms on both CPUs and stand still
// 75 ms. Timed: they would have run through the stall, 2 CPUs all period.
func TestReplayTimedFillsTheStall(t *testing.T) {
	tr := limitedTrace(50*ms, recorded(), periodsOf([3]int64{50, 75, 2}, [3]int64{50, 75, 2}, [3]int64{20, 0, 0}))
	d, rec, err := reconstruct(tr, ReplayOptions{Demand: DemandTimed})
	if err != nil {
		t.Fatal(err)
	}
	checkBursts(t, d.bursts, []wantBurst{{0, 200 * ms, 2}, {100 * ms, 200 * ms, 2}, {200 * ms, 20 * ms, 2}})
	if d.bursts[0].wall != 100*ms || d.bursts[2].wall != 10*ms {
		t.Errorf("walls %v, %v: want the whole throttled period, and the unthrottled work at 2 CPUs", d.bursts[0].wall, d.bursts[2].wall)
	}
	if rec.DemandNs != int64(420*ms) || rec.UsageNs != int64(120*ms) || rec.SpanNs != int64(300*ms) || rec.Parallelism != 2 || rec.ParallelismFrom != "stopped_cpus" || rec.DemandFrom != "given" {
		t.Errorf("record %+v", rec)
	}
}

// One thread burning CPU time (bursty --on-cpu) under 30 ms: every
// period runs 30 ms and stands still 70; one holds a 50 ms pause (it ran
// 10, slept 50, ran 20, then stood still 20); one ran 0.8 CPUs while not
// stopped (24 ms in 30), which is the throttling's loss, not a pause.
// Closed: the stalls are cut out, the work keeps its order and the pause
// stays.
func TestReplayClosedCutsTheStalls(t *testing.T) {
	tr := limitedTrace(30*ms, recorded(), periodsOf([3]int64{30, 70, 1}, [3]int64{30, 20, 1}, [3]int64{24, 70, 1}, [3]int64{10, 0, 0}))
	d, rec, err := reconstruct(tr, ReplayOptions{Demand: DemandClosed})
	if err != nil {
		t.Fatal(err)
	}
	// The timeline is 400 ms less the 70 + 20 + 76 ms cut out, so the
	// demand's average is its 94 ms over 234 ms, not over 400.
	if rec.SpanNs != int64(234*ms) || rec.DemandNs != int64(94*ms) {
		t.Errorf("span %v, demand %v: want 234ms and 94ms", time.Duration(rec.SpanNs), time.Duration(rec.DemandNs))
	}
	// Period 1 ran 80 ms for its 30 ms: 30 ms of work at one CPU, then
	// a 50 ms pause before period 2's work, which runs on into period 3.
	checkBursts(t, d.bursts, []wantBurst{{0, 30 * ms, 1}, {30 * ms, 30 * ms, 1}, {110 * ms, 24 * ms, 1}, {134 * ms, 10 * ms, 1}})
	th := d.threads()
	if len(th) != 1 {
		t.Fatalf("%d threads, want 1", len(th))
	}
	// The lane's pauses are relative to the end of its work: a run that
	// was late by 40 ms sleeps just as long.
	want := []Step{{Kind: Burn, CPU: 30 * ms}, {Kind: Burn, CPU: 30 * ms}, {Kind: Sleep, Until: 150*ms + 50*ms}, {Kind: Burn, CPU: 24 * ms}, {Kind: Burn, CPU: 10 * ms}, {Kind: Exit}}
	nows := []time.Duration{0, 30 * ms, 150 * ms, 200 * ms, 224 * ms, 234 * ms}
	for i, w := range want {
		if got := th[0].Behavior.Next(nows[i], nil); got != w {
			t.Errorf("step %d at %v: %+v, want %+v", i, nows[i], got, w)
		}
	}
}

// One thread that burns 60 ms of CPU every 500 ms (bursty --on-cpu
// --every) under 20 ms: each burst runs 20 ms in three periods, standing
// still 80 ms in the first two, and the next comes on its schedule, 200
// ms after the last one ended. Scheduled: as closed within a burst, the
// stalls cut out, but a burst after an idle pause comes at its time, not
// 160 ms earlier, so the demand is its usage over the whole timeline
// (closed would make it the usage over the timeline less the stalls:
// more than twice as much).
func TestReplayScheduledKeepsTheSchedule(t *testing.T) {
	burst := [][3]int64{{20, 80, 1}, {20, 80, 1}, {20, 0, 0}, {0, 0, 0}, {0, 0, 0}}
	var rows [][3]int64
	for range 2 {
		rows = append(rows, burst...)
	}
	tr := limitedTrace(20*ms, recorded(), periodsOf(rows...))
	for _, tc := range []struct {
		method Demand
		span   time.Duration
		second time.Duration // when the second burst comes, unlimited
	}{
		{DemandScheduled, 1000 * ms, 500 * ms},
		{DemandClosed, 680 * ms, 340 * ms},
	} {
		d, rec, err := reconstruct(tr, ReplayOptions{Demand: tc.method})
		if err != nil {
			t.Fatal(err)
		}
		if rec.SpanNs != int64(tc.span) || rec.DemandNs != int64(120*ms) {
			t.Errorf("%s: span %v, demand %v: want %v and 120ms", tc.method, time.Duration(rec.SpanNs), time.Duration(rec.DemandNs), tc.span)
		}
		// Within a burst the work is one piece, with the stalls cut out.
		checkBursts(t, d.bursts, []wantBurst{{0, 20 * ms, 1}, {20 * ms, 20 * ms, 1}, {40 * ms, 20 * ms, 1},
			{340 * ms, 20 * ms, 1}, {360 * ms, 20 * ms, 1}, {380 * ms, 20 * ms, 1}})
		// Unlimited, the first burst is done at 60 ms; the lane then
		// sleeps until the second burst: at its time when scheduled,
		// 280 ms after the first ended (its pause, the stalls cut out)
		// when closed.
		th := d.threads()
		var now, wake time.Duration
		for range 4 {
			switch st := th[0].Behavior.Next(now, nil); st.Kind {
			case Burn:
				now += st.CPU
			case Sleep:
				wake, now = st.Until, st.Until
			}
		}
		if wake != tc.second {
			t.Errorf("%s: the second burst comes at %v, want %v", tc.method, wake, tc.second)
		}
	}
	// Late: when the first burst still runs at the second's time, the
	// second begins as soon as it is done.
	d, _, err := reconstruct(tr, ReplayOptions{Demand: DemandScheduled})
	if err != nil {
		t.Fatal(err)
	}
	th := d.threads()
	for range 3 {
		th[0].Behavior.Next(0, nil) // the first burst's work
	}
	if st := th[0].Behavior.Next(600*ms, nil); st.Kind != Burn || st.CPU != 20*ms {
		t.Errorf("at 600 ms, after the second burst's time: %+v, want its work at once", st)
	}
}

// One thread that burns 30 ms of CPU and sleeps (bursty --on-cpu) under
// 20 ms: a burst that a period's end cut into 12 and 18 ms (period 0 busy
// at its end), then one that began 40 ms into period 2, ran its 20 ms,
// stood still 40 ms, and ran its last 10 ms after the refill. Closed
// keeps each burst in one piece: period 0's work ends at its end, period
// 2's begins where it did, and what ran after the stall follows it.
func TestReplayClosedKeepsBurstsWhole(t *testing.T) {
	ps := periodsOf([3]int64{12, 0, 0}, [3]int64{18, 0, 0}, [3]int64{20, 40, 1}, [3]int64{10, 0, 0}, [3]int64{0, 0, 0})
	ps[0].EndBusy = true
	tr := limitedTrace(20*ms, recorded(), ps)
	d, rec, err := reconstruct(tr, ReplayOptions{Demand: DemandClosed})
	if err != nil {
		t.Fatal(err)
	}
	checkBursts(t, d.bursts, []wantBurst{{88 * ms, 12 * ms, 1}, {100 * ms, 18 * ms, 1}, {240 * ms, 20 * ms, 1}, {260 * ms, 10 * ms, 1}})
	if rec.SpanNs != int64(460*ms) {
		t.Errorf("span %v, want 500 ms less the 40 ms stall", time.Duration(rec.SpanNs))
	}
	// Not busy at its end, period 0's work is taken to have run from its
	// start, as before the trace had the field.
	ps[0].EndBusy = false
	d, _, _ = reconstruct(tr, ReplayOptions{Demand: DemandClosed})
	if d.bursts[0].at != 0 {
		t.Errorf("period 0's work at %v, want its start", d.bursts[0].at)
	}
}

// A service whose requests queue while it stands still: the work missed
// in a stall (running CPUs × stall) is demand of that period, and what
// the next periods did first was serving it.
func TestReplayOpenCarriesTheBacklog(t *testing.T) {
	// One CPU of work while running: a period busy all along (40 ms
	// run, 60 ms stall), then one that paused (20 ms of usage in the
	// 60 ms it was not stopped, a 40 ms stall); then a period of 90 ms
	// that served the backlog left and 10 ms of its own, and one of
	// 20 ms when it had caught up.
	tr := limitedTrace(40*ms, recorded(), periodsOf([3]int64{40, 60, 1}, [3]int64{20, 40, 1}, [3]int64{90, 0, 0}, [3]int64{20, 0, 0}))
	d, rec, err := reconstruct(tr, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Period 0 missed the 60 ms it did not run. Period 1 ran 0.33 CPUs
	// while not stopped, less than busyShare (it paused): it missed its
	// stopped CPU's 40 ms of stall, and its usage served the first
	// period's backlog.
	p1 := 40 * ms
	checkBursts(t, d.bursts, []wantBurst{{0, 100 * ms, 1}, {100 * ms, p1, 1}, {200 * ms, 90*ms - (60*ms - 20*ms + p1), 1}, {300 * ms, 20 * ms, 1}})
	if rec.Demand != "open" || rec.DemandFrom != "default" || rec.ParallelismFrom != "stopped_cpus" || rec.SpanNs != int64(400*ms) {
		t.Errorf("record %+v: want open by default for a recorded group", rec)
	}
	// Open lanes' work comes at fixed times: late, it starts at once.
	th := d.threads()
	if s := th[0].Behavior.Next(0, nil); s != (Step{Kind: Burn, CPU: 100 * ms}) {
		t.Errorf("first step %+v", s)
	}
	if s := th[0].Behavior.Next(150*ms, nil); s != (Step{Kind: Burn, CPU: p1}) {
		t.Errorf("work arriving at 100 ms, asked at 150 ms: %+v, want it at once", s)
	}
}

// An unlimited run's windows are its demand, whatever the method; the
// work of a window runs at the workload's threads from its start.
func TestReplayUnlimitedIsUsage(t *testing.T) {
	ps := periodsOf([3]int64{100}, [3]int64{160}, [3]int64{0}, [3]int64{40})
	for i := range ps {
		ps[i].Kernel = false
	}
	spec := trace.Spec{Workload: "bursty", Params: &trace.Params{Bursty: &trace.BurstyParams{Threads: 2, OnCPU: 80 * ms}}}
	tr := limitedTrace(0, spec, ps)
	for _, m := range Demands() {
		d, rec, err := reconstruct(tr, ReplayOptions{Demand: m})
		if err != nil {
			t.Fatal(err)
		}
		checkBursts(t, d.bursts, []wantBurst{{0, 100 * ms, 2}, {100 * ms, 160 * ms, 2}, {300 * ms, 40 * ms, 2}})
		if rec.DemandNs != rec.UsageNs || rec.ParallelismFrom != "params" {
			t.Errorf("%s: record %+v", m, rec)
		}
	}
}

// The method follows a built-in workload's flags; a synthetic trace's
// periods each want their own demand; a trace without either is a
// service.
func TestTraceDemand(t *testing.T) {
	if got, from := TraceDemand(trace.Spec{Workload: "synthetic", Synthetic: "prometheus: ..."}); got != DemandTimed || from != "synthetic" {
		t.Errorf("a synthetic trace: %s from %s, want timed from synthetic", got, from)
	}
	for _, tc := range []struct {
		params *trace.Params
		want   Demand
	}{
		{&trace.Params{Bursty: &trace.BurstyParams{On: 50 * ms, OnCPU: 30 * ms}}, DemandClosed},
		{&trace.Params{Bursty: &trace.BurstyParams{On: 50 * ms, OnCPU: 30 * ms, Every: time.Second}}, DemandScheduled},
		{&trace.Params{Bursty: &trace.BurstyParams{On: 50 * ms, Every: time.Second}}, DemandTimed},
		{&trace.Params{Bursty: &trace.BurstyParams{On: 50 * ms}}, DemandTimed},
		{&trace.Params{Periodic: &trace.PeriodicParams{Burn: 5 * ms}}, DemandTimed},
		{&trace.Params{Periodic: &trace.PeriodicParams{Burn: 5 * ms, BurnCPU: 5 * ms}}, DemandClosed},
		{&trace.Params{Parallel: &trace.ParallelParams{Duration: time.Second}}, DemandTimed},
		{&trace.Params{Parallel: &trace.ParallelParams{Duration: time.Second, Events: 100}}, DemandClosed},
		{nil, DemandOpen},
	} {
		if got, _ := TraceDemand(trace.Spec{Params: tc.params}); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.params, got, tc.want)
		}
	}
}

// Parallelism: the built-in workload's threads on the CPUs it could use;
// else the most CPUs stopped; else the busiest period, read with its
// boundaries off and rounded up with a tenth of slack, a short one only
// when no whole one was read.
func TestReplayParallelism(t *testing.T) {
	spec := trace.Spec{Workload: "parallel", Params: &trace.Params{Parallel: &trace.ParallelParams{Threads: 8}}}
	tr := limitedTrace(50*ms, spec, periodsOf([3]int64{50, 75, 2}))
	if n, from := parallelism(tr, mustRead(t, tr)); n != 2 || from != "params" {
		t.Errorf("8 threads on 2 CPUs: %d from %s, want 2 from params", n, from)
	}
	tr.Limits.Cpuset = "1"
	if n, _ := parallelism(tr, mustRead(t, tr)); n != 1 {
		t.Errorf("8 threads on cpuset 1: %d, want 1", n)
	}
	tr = limitedTrace(300*ms, recorded(), periodsOf([3]int64{50, 0, 0}, [3]int64{105, 0, 0}, [3]int64{20, 0, 0}))
	if n, from := parallelism(tr, mustRead(t, tr)); n != 1 || from != "running_cpus" {
		t.Errorf("busiest period 1.05 CPUs: %d from %s, want 1 from running_cpus", n, from)
	}
	tr.Periods[1].UsageNs = int64(130 * ms)
	if n, _ := parallelism(tr, mustRead(t, tr)); n != 2 {
		t.Errorf("busiest period 1.3 CPUs: %d, want 2", n)
	}
	tr.Periods[1].Blurred = true
	if n, _ := parallelism(tr, mustRead(t, tr)); n != 1 {
		t.Errorf("a blurred busiest period counts: %d, want 1", n)
	}

	// One loop spinning alone: whole periods a little under 1 CPU, a
	// run's last period cut short where the counter caught up a tick.
	tr = &trace.Trace{Schema: trace.Schema, Spec: trace.Spec{Workload: "command"}, Host: trace.Host{CPUs: 2},
		Periods: periodsOf([3]int64{98, 0, 0}, [3]int64{97, 0, 0})}
	last := trace.Period{StartNs: tr.Periods[1].EndNs, EndNs: tr.Periods[1].EndNs + int64(15*ms), UsageNs: int64(19 * ms)}
	tr.Periods = append(tr.Periods, last)
	if n, _ := parallelism(tr, mustRead(t, tr)); n != 1 {
		t.Errorf("a 15 ms last period at 1.27 CPUs after whole ones at 0.98: %d, want 1", n)
	}
	tr.Periods[1].UsageNs = int64(108 * ms) // 1.06 with its boundaries 2 ms off
	if n, _ := parallelism(tr, mustRead(t, tr)); n != 1 {
		t.Errorf("a whole period at 1.08 CPUs: %d, want 1", n)
	}
	tr.Periods = tr.Periods[2:]
	tr.Periods[0].UsageNs = int64(25 * ms) // 1.47 with its boundaries 2 ms off
	if n, _ := parallelism(tr, mustRead(t, tr)); n != 2 {
		t.Errorf("a run of one 15 ms period at 1.67 CPUs: %d, want 2", n)
	}
}

func mustRead(t *testing.T, tr *trace.Trace) []period {
	t.Helper()
	ps, err := readPeriods(tr)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// Scale multiplies the work and the CPUs it runs on: the same walls,
// more lanes.
func TestReplayScale(t *testing.T) {
	tr := limitedTrace(50*ms, recorded(), periodsOf([3]int64{50, 75, 2}, [3]int64{30, 0, 0}))
	d, rec, err := reconstruct(tr, ReplayOptions{Demand: DemandTimed, Scale: 1.5})
	if err != nil {
		t.Fatal(err)
	}
	checkBursts(t, d.bursts, []wantBurst{{0, 300 * ms, 3}, {100 * ms, 45 * ms, 3}})
	if d.bursts[0].wall != 100*ms || d.bursts[1].wall != 15*ms || rec.Scale != 1.5 || rec.DemandNs != int64(345*ms) {
		t.Errorf("walls %v %v, record %+v", d.bursts[0].wall, d.bursts[1].wall, rec)
	}
	if th := d.threads(); len(th) != 3 {
		t.Errorf("%d lanes, want 3", len(th))
	}
	// A fractional last lane spins its share of the period.
	d, _, _ = reconstruct(tr, ReplayOptions{Demand: DemandTimed, Scale: 1.25})
	th := d.threads()
	if len(th) != 3 {
		t.Fatalf("%d lanes, want 3", len(th))
	}
	if s := th[2].Behavior.Next(0, nil); s != (Step{Kind: Spin, Until: 50 * ms}) {
		t.Errorf("the half lane: %+v, want a spin until 50 ms", s)
	}
}

// Traces written before stall_ns and stopped_cpus: the stall is the
// throttled time on one CPU.
func TestReplayOldTrace(t *testing.T) {
	tr := limitedTrace(20*ms, recorded(), []trace.Period{{StartNs: 0, EndNs: int64(100 * ms), UsageNs: int64(20 * ms), Throttled: true, ThrottledNs: int64(80 * ms)}})
	d, _, err := reconstruct(tr, ReplayOptions{Demand: DemandTimed})
	if err != nil {
		t.Fatal(err)
	}
	checkBursts(t, d.bursts, []wantBurst{{0, 100 * ms, 1}})
}

func TestReplayErrors(t *testing.T) {
	ok := limitedTrace(20*ms, recorded(), periodsOf([3]int64{20, 80, 1}))
	for _, tc := range []struct {
		tr   *trace.Trace
		opt  ReplayOptions
		want string
	}{
		{limitedTrace(20*ms, recorded(), nil), ReplayOptions{}, "no periods"},
		{ok, ReplayOptions{Scale: -1}, "scale -1"},
		{ok, ReplayOptions{Scale: math.NaN()}, "scale NaN"},
		{ok, ReplayOptions{Scale: 1000}, "scale 1000"},
		{ok, ReplayOptions{Demand: "closed-loop"}, `"closed-loop" is not one of closed, scheduled, open, timed`},
		{ok, ReplayOptions{Parallelism: -2}, "parallelism -2"},
		{ok, ReplayOptions{Parallelism: 4000, Scale: 2}, "more than 4096"},
		{limitedTrace(20*ms, recorded(), []trace.Period{{StartNs: 5, EndNs: 5}}), ReplayOptions{}, "not after its start"},
	} {
		_, _, err := Replay(tc.tr, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.opt, err, tc.want)
		}
	}
	if _, _, err := Replay(limitedTrace(20*ms, recorded(), nil), ReplayOptions{}); !errors.Is(err, ErrNoPeriods) {
		t.Errorf("no periods: %v is not ErrNoPeriods", err)
	}
}

// A trace replayed under its own limits comes back as itself: the lab run
// of the benchmark (1,011 periods, 46 % throttled under 0.6 CPU) replays
// to about as many periods and the same throttled ratio, within 5 points;
// and under the 20 candidate quotas the ratio falls as the quota grows,
// to none once the quota holds both threads' bursts.
func TestReplayUnderItsOwnLimits(t *testing.T) {
	src, err := trace.ReadFile(replayBenchTrace)
	if err != nil {
		t.Fatal(err)
	}
	limits := candidateLimits()
	trs := replayCandidates(t, replayBenchTrace, src.Host.CPUs, limits)
	own := trs[5]
	if limits[5] != src.Limits.Cgroup() {
		t.Fatalf("candidate 5 is %+v, the source ran under %+v", limits[5], src.Limits.Cgroup())
	}
	n, m := len(own.Periods), len(src.Periods)
	t.Logf("under its own limits: %d periods, %.3f throttled; the source %d, %.3f", n, own.Summary.ThrottledRatio, m, src.Summary.ThrottledRatio)
	if math.Abs(float64(n-m)) > 0.05*float64(m) || math.Abs(own.Summary.ThrottledRatio-src.Summary.ThrottledRatio) > 0.05 {
		t.Errorf("replayed under its own limits: %d periods, %.3f throttled; the source has %d, %.3f", n, own.Summary.ThrottledRatio, m, src.Summary.ThrottledRatio)
	}
	for i := 1; i < len(trs); i++ {
		if a, b := trs[i-1].Summary.ThrottledRatio, trs[i].Summary.ThrottledRatio; b > a+0.01 {
			t.Errorf("quota %v throttles %.3f of periods, more than %v's %.3f", limits[i].Quota, b, limits[i-1].Quota, a)
		}
	}
	if last := trs[len(trs)-1].Summary; last.NrThrottled != 0 || last.UsageNs < src.Summary.UsageNs*99/100 {
		t.Errorf("under 2 CPUs: %d throttled, %d ns used of the source's %d", last.NrThrottled, last.UsageNs, src.Summary.UsageNs)
	}
}

// No period runs on more CPUs than the workload has threads (a reading a
// little off is not another CPU), nor on more than the group could use.
func TestReplayParallelismBound(t *testing.T) {
	// 40 ms used in the 30 ms it ran: 1.33 CPUs by the readings, at least
	// 1.25 with its running time read 2 ms long (trace's boundaryError).
	ps := periodsOf([3]int64{40, 70, 1})
	one := trace.Spec{Workload: "bursty", Params: &trace.Params{Bursty: &trace.BurstyParams{Threads: 1, OnCPU: 50 * ms}}}
	d, _, err := reconstruct(limitedTrace(30*ms, one, ps), ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkBursts(t, d.bursts, []wantBurst{{0, 40 * ms, 1}})
	d, _, _ = reconstruct(limitedTrace(30*ms, recorded(), ps), ReplayOptions{Demand: DemandClosed})
	checkBursts(t, d.bursts, []wantBurst{{0, 40 * ms, 40.0 / 32}})
	tr := limitedTrace(30*ms, recorded(), periodsOf([3]int64{90, 70, 3}))
	tr.Limits.Cpuset = "0"
	d, _, _ = reconstruct(tr, ReplayOptions{Demand: DemandClosed})
	checkBursts(t, d.bursts, []wantBurst{{0, 90 * ms, 1}})
}

// A thread busy all along under a tight quota whose stall the kernel
// counts short (task-based throttling lets it go a moment after the
// refill): 20 ms run and 65 ms of stall leave 15 ms that were neither,
// 0.57 CPUs running. It was busy all along, so its demand is the whole
// period on its CPU, however it is replayed, not 0.57 CPUs' worth.
func TestReplayBusyAllAlongWithAShortStall(t *testing.T) {
	tr := limitedTrace(20*ms, recorded(), periodsOf([3]int64{20, 65, 1}, [3]int64{20, 65, 1}))
	for _, m := range []Demand{DemandOpen, DemandTimed} {
		d, _, err := reconstruct(tr, ReplayOptions{Demand: m})
		if err != nil {
			t.Fatal(err)
		}
		var work time.Duration
		for _, b := range d.bursts {
			work += b.work
		}
		// Open: the first period's 80 ms missed are served by the
		// second's 20 ms first; timed: each period is lost time.
		if want := 200*ms - 20*ms; m == DemandOpen && work != want {
			t.Errorf("%s: demand %v over two periods, want %v", m, work, want)
		}
		if want := 200 * ms; m == DemandTimed && work != want {
			t.Errorf("%s: demand %v over two periods, want %v", m, work, want)
		}
	}
	d, _, err := reconstruct(tr, ReplayOptions{Demand: DemandClosed})
	if err != nil {
		t.Fatal(err)
	}
	// Closed: the 80 ms not run are cut out, the second run follows the
	// first at once.
	checkBursts(t, d.bursts, []wantBurst{{0, 20 * ms, 1}, {20 * ms, 20 * ms, 1}})
}

// bursty --on 50ms --off 50ms under 0.1 CPU: in each period it runs
// 10 ms, is stopped for 37 ms (its burst's wall time runs out during the
// stall) and sleeps the rest. Timed, it would have run the 10 ms and
// the stopped CPU's 37 ms: 0.47 CPUs over the period, not its running
// CPUs (0.16) over the period.
func TestReplayTimedCountsTheStoppedCPUsStall(t *testing.T) {
	tr := limitedTrace(10*ms, recorded(), periodsOf([3]int64{10, 37, 1}, [3]int64{10, 37, 1}))
	d, _, err := reconstruct(tr, ReplayOptions{Demand: DemandTimed})
	if err != nil {
		t.Fatal(err)
	}
	checkBursts(t, d.bursts, []wantBurst{{0, 47 * ms, 0.47}, {100 * ms, 47 * ms, 0.47}})
}
