package sim

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

// specOf is the spec of a built-in workload run with args.
func specOf(t *testing.T, name string, args ...string) trace.Spec {
	t.Helper()
	w, err := workload.Parse(name, args)
	if err != nil {
		t.Fatal(err)
	}
	p := w.Params()
	return trace.Spec{Workload: name, Args: args, Params: &p}
}

// steps drives a thread as the engine would if every step took no
// longer than asked (a Burn its CPU time, a Spin and a Sleep to their
// end), and lists the steps of its program up to the first Exit: after
// the process's start, which it checks (thread i of the workload).
func steps(t *testing.T, th []Thread, i int) []Step {
	t.Helper()
	b := th[i].Behavior
	start := Step{Kind: Sleep, Until: testStart}
	if i == 0 {
		start = Step{Kind: Burn, CPU: testStart}
	}
	if got := b.Next(0, nil); got != start {
		t.Errorf("thread %d begins with %+v, want the start %+v", i, got, start)
	}
	var out []Step
	now := testStart
	for len(out) < 10000 {
		s := b.Next(now, nil)
		out = append(out, s)
		switch s.Kind {
		case Exit:
			return out
		case Burn:
			now += s.CPU
		case Spin, Sleep:
			now = max(now, s.Until)
		}
	}
	return out
}

// testStart is the process's start the step tests charge (no wake-up
// cost: TestWakeSteps charges one).
const testStart = time.Millisecond

func threadsOf(t *testing.T, spec trace.Spec, usable []int, event time.Duration) []Thread {
	t.Helper()
	th, err := BuiltinThreads(spec, usable, Costs{Start: testStart, Event: event})
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// periodic: a burn (one operation), a sleep (ending DefaultSleepLate late),
// ..., the last burn without a sleep after it; wall-time burns
// spin to their end, CPU-time burns ask for CPU time.
func TestPeriodicSteps(t *testing.T) {
	th := threadsOf(t, specOf(t, "periodic", "--burn", "5ms", "--sleep", "100ms", "--iterations", "3", "--threads", "2"), []int{0, 1, 2, 3}, 0)
	if len(th) != 2 || th[0].Pin != -1 || th[1].Pin != -1 {
		t.Fatalf("threads %+v: want 2, free (periodic does not pin)", th)
	}
	spin := func(until time.Duration) Step {
		return Step{Kind: Spin, Until: until, OpStart: true, OpEnd: true, ChargedAtEnd: true}
	}
	sleep := func(until time.Duration) Step { return Step{Kind: Sleep, Until: until} }
	const sl, st = DefaultSleepLate, testStart
	want := []Step{spin(st + 5*ms), sleep(st + 105*ms + sl), spin(st + 110*ms + sl), sleep(st + 210*ms + 2*sl), spin(st + 215*ms + 2*sl), {Kind: Exit}}
	if got := steps(t, th, 1); !reflect.DeepEqual(got, want) {
		t.Errorf("steps\n%+v\nwant\n%+v", got, want)
	}
	th = threadsOf(t, specOf(t, "periodic", "--burn-cpu", "3ms", "--sleep", "10ms", "--iterations", "2"), []int{0}, 0)
	burn := Step{Kind: Burn, CPU: 3 * ms, OpStart: true, OpEnd: true, Polls: true}
	want = []Step{burn, sleep(st + 13*ms + sl), burn, {Kind: Exit}}
	if got := steps(t, th, 0); !reflect.DeepEqual(got, want) {
		t.Errorf("CPU burns: steps\n%+v\nwant\n%+v", got, want)
	}
}

// bursty: bursts until --duration, each followed by --off plus the
// engine's jitter draw (and the sleep's lateness), the last idle time cut at
// the end.
func TestBurstySteps(t *testing.T) {
	spec := specOf(t, "bursty", "--on", "30ms", "--off", "50ms", "--jitter", "20ms", "--duration", "300ms", "--seed", "9")
	th := threadsOf(t, spec, []int{0, 1}, 0)
	draw := workload.Jitter(*spec.Params.Bursty, spec.Params.Engine, 0)
	var want []Step
	now := testStart
	end := testStart + 300*ms // --duration runs from the start
	for now < end {
		want = append(want, Step{Kind: Spin, Until: now + 30*ms, OpStart: true, OpEnd: true, ChargedAtEnd: true})
		now += 30 * ms
		off := min(50*ms+draw(), max(end-now, 0))
		if off > 0 {
			off += DefaultSleepLate
		}
		now += off
		want = append(want, Step{Kind: Sleep, Until: now})
	}
	want = append(want, Step{Kind: Exit})
	got := steps(t, th, 0)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("steps\n%+v\nwant\n%+v", got, want)
	}
	if len(got) < 6 || got[len(got)-2].Until < end {
		t.Errorf("the thread exits before --duration: %+v", got)
	}
	// One thread on two CPUs: pinned to the last.
	if th[0].Pin != 1 {
		t.Errorf("pin %d, want CPU 1", th[0].Pin)
	}
}

// bursty --every: the k-th burst starts k × every after the start (and
// the sleep's lateness), whenever the one before ended; one that ends late
// is followed by the next at once.
func TestBurstyEverySteps(t *testing.T) {
	for _, on := range []time.Duration{30 * ms, 130 * ms} {
		spec := specOf(t, "bursty", "--on", on.String(), "--every", "100ms", "--duration", "300ms")
		th := threadsOf(t, spec, []int{0, 1}, 0)
		var want []Step
		now := testStart
		end := testStart + 300*ms
		for k := 1; now < end; k++ {
			want = append(want, Step{Kind: Spin, Until: now + on, OpStart: true, OpEnd: true, ChargedAtEnd: true})
			now += on
			off := min(max(testStart+time.Duration(k)*100*ms-now, 0), max(end-now, 0))
			if off > 0 {
				off += DefaultSleepLate
			}
			now += off
			want = append(want, Step{Kind: Sleep, Until: now})
		}
		want = append(want, Step{Kind: Exit})
		if got := steps(t, th, 0); !reflect.DeepEqual(got, want) {
			t.Errorf("%v every 100ms: steps\n%+v\nwant\n%+v", on, got, want)
		}
		if n := (len(want) - 1) / 2; on == 30*ms && n != 3 || on == 130*ms && n != 3 {
			t.Errorf("%v every 100ms for 300ms: %d bursts, want 3", on, n)
		}
	}
}

// A wake-up's cost: each sleep that sleeps is followed by a burn of it,
// outside any operation, before the next step; a sleep cut to nothing
// (bursty's at the end of --duration) costs nothing.
func TestWakeSteps(t *testing.T) {
	const wake = 40 * time.Microsecond
	th, err := BuiltinThreads(specOf(t, "periodic", "--burn-cpu", "3ms", "--sleep", "10ms", "--iterations", "2"), []int{0}, Costs{Start: testStart, Wake: wake})
	if err != nil {
		t.Fatal(err)
	}
	burn := Step{Kind: Burn, CPU: 3 * ms, OpStart: true, OpEnd: true, Polls: true}
	woke := Step{Kind: Burn, CPU: wake}
	want := []Step{burn, {Kind: Sleep, Until: testStart + 13*ms + DefaultSleepLate}, woke, burn, {Kind: Exit}}
	if got := steps(t, th, 0); !reflect.DeepEqual(got, want) {
		t.Errorf("steps\n%+v\nwant\n%+v", got, want)
	}
	th, err = BuiltinThreads(specOf(t, "bursty", "--on-cpu", "10ms", "--off", "0s", "--duration", "25ms"), []int{0}, Costs{Start: testStart, Wake: wake})
	if err != nil {
		t.Fatal(err)
	}
	got := steps(t, th, 0)
	for _, s := range got {
		if s == woke {
			t.Errorf("bursty --off 0: a wake-up's cost where no sleep slept: %+v", got)
			break
		}
	}
}

// parallel: events of the given CPU time until --duration has passed
// when one would start, or --events are done in all threads together.
func TestParallelSteps(t *testing.T) {
	th := threadsOf(t, specOf(t, "parallel", "--threads", "1", "--duration", "1ms"), []int{0}, 300*time.Microsecond)
	ev := Step{Kind: Burn, CPU: 300 * time.Microsecond, OpStart: true, OpEnd: true}
	if got, want := steps(t, th, 0), []Step{ev, ev, ev, ev, {Kind: Exit}}; !reflect.DeepEqual(got, want) {
		t.Errorf("steps %+v, want %+v", got, want)
	}
	th = threadsOf(t, specOf(t, "parallel", "--threads", "3", "--duration", "1h", "--events", "5"), []int{0, 1}, 300*time.Microsecond)
	n := 0
	for i := 0; i < 3; i++ {
		th[i].Behavior.Next(0, nil) // the start
	}
	for i := 0; i < 10; i++ {
		if th[i%3].Behavior.Next(testStart, nil).Kind == Burn {
			n++
		}
	}
	if n != 5 {
		t.Errorf("%d events started by 3 threads, want --events 5", n)
	}
	if _, err := BuiltinThreads(specOf(t, "parallel"), []int{0}, Costs{Start: testStart}); err == nil {
		t.Error("parallel without the event's CPU time makes threads")
	}
}

// Pinning follows the workloads' rule: with fewer threads than usable
// CPUs, the last ones, a thread on each; else free; --pin=false: free.
func TestBuiltinThreadsPin(t *testing.T) {
	for _, c := range []struct {
		args   []string
		usable []int
		want   []int
	}{
		{[]string{"--threads", "2"}, []int{0, 1, 2, 3}, []int{2, 3}},
		{[]string{"--threads", "2"}, []int{1, 5, 6}, []int{5, 6}},
		{[]string{"--threads", "2"}, []int{0, 1}, []int{-1, -1}},
		{[]string{"--threads", "4"}, []int{0, 1}, []int{-1, -1, -1, -1}},
		{[]string{"--threads", "1", "--pin=false"}, []int{0, 1}, []int{-1}},
	} {
		th := threadsOf(t, specOf(t, "parallel", c.args...), c.usable, ms)
		var got []int
		for _, x := range th {
			got = append(got, x.Pin)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%v on CPUs %v: pins %v, want %v", c.args, c.usable, got, c.want)
		}
	}
}

// Prepare refuses what cannot be simulated, naming it, before running
// anything.
func TestPrepareErrors(t *testing.T) {
	ok := Setup{Workload: "periodic", Era: Era5_14, CPUs: 2, Limits: cgroup.Limits{Period: 100 * ms}}
	for _, c := range []struct {
		name string
		edit func(*Setup)
		want string
	}{
		{"unknown era", func(s *Setup) { s.Era = "2.6" }, "2.6"},
		{"no CPUs", func(s *Setup) { s.CPUs = 0 }, "CPUs, not 0"},
		{"burst before 5.14", func(s *Setup) {
			s.Era, s.Limits.Quota, s.Limits.Burst = Era4_18, 20*ms, 10*ms
		}, "kernel era 4.18 does not have"},
		{"cpuset beyond the host", func(s *Setup) { s.Limits.Cpuset = "1-2" }, "CPU 2, but the simulated host has CPUs 0 to 1"},
		{"cpuset malformed", func(s *Setup) { s.Limits.Cpuset = "x" }, "like 0-1"},
		{"cpuset of no CPU", func(s *Setup) { s.Limits.Cpuset = " " }, `cpuset " " names no CPU`},
		{"limits", func(s *Setup) { s.Limits.Period = 0 }, "minimum of 1ms"},
		{"no workload", func(s *Setup) { s.Workload = "" }, "no workload"},
		{"unknown workload", func(s *Setup) { s.Workload = "nosuch" }, `unknown workload "nosuch": use one of`},
		{"workload flags", func(s *Setup) { s.Args = []string{"--burn", "x"} }, "--burn"},
		{"negative event", func(s *Setup) { s.Costs.Event = -1 }, "positive"},
		{"phase beyond the period", func(s *Setup) { s.Phase = 101 * ms }, "from 0 to the period (100ms), not 101ms"},
		{"tick offset beyond the tick", func(s *Setup) { s.TickOffset = 4 * ms }, "below the tick (4ms), not 4ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := ok
			c.edit(&s)
			p, err := Prepare(s)
			var ue *UserError
			if p != nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Prepare: %v, %v; want a *UserError containing %q", p, err, c.want)
			}
		})
	}
	if _, err := Prepare(ok); err != nil {
		t.Errorf("Prepare(%+v): %v", ok, err)
	}
	s := ok
	s.Limits.Quota, s.Limits.Burst = 20*ms, 10*ms
	if _, err := Prepare(s); err != nil {
		t.Errorf("burst on era 5.14: %v", err)
	}
	s.Workload, s.Args = "periodic", []string{"--help"}
	var he *workload.HelpError
	if _, err := Prepare(s); !errors.As(err, &he) {
		t.Errorf("--help: %v, want the workload's usage", err)
	}
}

// TestWithRunOf: a simulation beside a measured run has the run's
// period boundaries against the workload's clock, and they decide what a
// burst at the quota costs: bursty's first 50 ms burst under 50 ms per
// 100 ms, after the process's start, does not fit in a period that ends
// after it, and is throttled until that period ends; one that a boundary
// cuts is not throttled.
func TestWithRunOf(t *testing.T) {
	setup := Setup{Workload: "bursty", Args: []string{"--on", "50ms", "--off", "50ms", "--duration", "1s"}, Era: Era6_18, CPUs: 2,
		Limits: cgroup.Limits{Quota: 50 * ms, Period: 100 * ms}, Costs: Costs{Start: ms}, Seed: 3}
	plan, err := Prepare(setup)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		boundary  int64 // of the measured run, ns after its release
		throttled time.Duration
	}{
		{boundary: int64(90 * ms), throttled: 40 * ms}, // the burst is done at 51 ms, the pool at 50
		{boundary: int64(30 * ms)},
		{boundary: int64(-70 * ms)}, // the same boundaries, said by an earlier one
	} {
		measured := &trace.Trace{Limits: trace.LimitsOf(setup.Limits), SampleIntervalNs: int64(10 * ms),
			Periods: []trace.Period{{StartNs: c.boundary - int64(100*ms), EndNs: c.boundary}}}
		tr, err := plan.WithRunOf(measured).Run()
		if err != nil {
			t.Fatal(err)
		}
		// The lab's reader woke at the run's sample interval.
		if sm := tr.Spec.Simulated; sm.WakeupsNs != int64(10*ms) || sm.WakeupRunNs != int64(wakeupRun) {
			t.Errorf("wake-ups every %v for %v, want the measured run's sample interval, 10ms", time.Duration(sm.WakeupsNs), time.Duration(sm.WakeupRunNs))
		}
		// The simulated run counts from the process's start, a millisecond
		// of CPU before the workload's clock.
		b := (c.boundary + int64(ms)) % int64(100*ms)
		if b < 0 {
			b += int64(100 * ms)
		}
		if got := tr.Spec.Simulated.PhaseNs; got != b {
			t.Errorf("boundary %v after the release: phase %v, want %v", time.Duration(c.boundary), time.Duration(got), time.Duration(b))
		}
		got := time.Duration(tr.Summary.ThrottledNs)
		if got < c.throttled-2*ms || got > c.throttled+2*ms || (c.throttled == 0) != (tr.Summary.NrThrottled == 0) {
			t.Errorf("boundary %v after the release: throttled %v in %d periods, want %v", time.Duration(c.boundary), got, tr.Summary.NrThrottled, c.throttled)
		}
	}

	// The ticks: a thread that uses up its runtime is stopped at the next
	// tick. One burst of 50 ms under 10 ms per 100 ms, the first period
	// ending at 100 ms: the runtime is gone at 10 ms (the start's 1 ms and
	// 9 of the burst), and the thread stops at the first tick after it.
	tight := setup
	tight.Limits.Quota = 10 * ms
	tight.Args = []string{"--on", "50ms", "--off", "1s", "--duration", "100ms"}
	tp, err := Prepare(tight)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		offset, stop time.Duration // the ticks' offset; when the thread stops
	}{{0, 12 * ms}, {ms, 13 * ms}, {3 * ms, 11 * ms}} {
		measured := &trace.Trace{Limits: trace.LimitsOf(tight.Limits), Periods: []trace.Period{{EndNs: int64(99 * ms)}},
			// ticks at multiples of 4 ms on the kernel's clock are at offset
			// + k × 4 ms of the simulated run, which starts 1 ms earlier
			StartedMonoNs: int64(1000*DefaultTick + ms - c.offset)}
		tr, err := tp.WithRunOf(measured).Run()
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(tr.Spec.Simulated.TickOffsetNs); got != c.offset {
			t.Errorf("ticks at %v: tick_offset_ns %v", c.offset, got)
		}
		if got, want := time.Duration(tr.Periods[0].ThrottledNs), 100*ms-c.stop; got != want {
			t.Errorf("ticks at %v + k × 4ms: throttled %v in the first period, want %v (stopped at %v)", c.offset, got, want, c.stop)
		}
	}

	// Without a limit, or with another period, there is nothing to align.
	unlimited := setup
	unlimited.Limits = cgroup.Limits{Period: 100 * ms}
	up, err := Prepare(unlimited)
	if err != nil {
		t.Fatal(err)
	}
	other := &trace.Trace{Limits: trace.LimitsOf(cgroup.Limits{Quota: 50 * ms, Period: 50 * ms}), Periods: []trace.Period{{EndNs: int64(20 * ms)}}}
	if up.WithRunOf(other) != up || plan.WithRunOf(other) != plan || plan.WithRunOf(nil) != plan {
		t.Error("WithRunOf changed a plan it has nothing to align")
	}

	// A run whose workload reported its start and exit: the simulation
	// charges them, and its workload's clock starts where the run's did,
	// 2 ms after the run's clock.
	released := &trace.Trace{Limits: trace.LimitsOf(setup.Limits), Periods: []trace.Period{{EndNs: int64(90 * ms)}},
		Process: trace.Process{ReleasedNs: int64(2 * ms), StartCPUNs: int64(3 * ms), ExitCPUNs: int64(ms)}}
	tr, err := plan.WithRunOf(released).Run()
	if err != nil {
		t.Fatal(err)
	}
	sm := tr.Spec.Simulated
	if sm.StartCPUNs != int64(3*ms) || sm.ExitCPUNs != int64(ms) {
		t.Errorf("charged a start of %v and an exit of %v, want the run's 3ms and 1ms", time.Duration(sm.StartCPUNs), time.Duration(sm.ExitCPUNs))
	}
	if want := int64(91 * ms); sm.PhaseNs != want { // 90 ms after the run's clock, 88 after the release, 91 after the start
		t.Errorf("phase %v, want %v", time.Duration(sm.PhaseNs), time.Duration(want))
	}
	// Ten bursts of 50 ms, at most 50 ms of CPU a period, and the start's
	// and the exit's.
	if got, want := time.Duration(tr.Summary.UsageNs), 10*50*ms+4*ms; got < want-5*ms || got > want {
		t.Errorf("used %v, want at most the bursts' 500ms and the start's and exit's 4ms (the bursts shortened by throttling by less than 5ms)", got)
	}
}

// TestExitCost: the process's exit is burned by the thread whose program
// ends last, after it, and by no other; each thread burns its own cost
// before its program.
func TestExitCost(t *testing.T) {
	spec := specOf(t, "periodic", "--threads", "3", "--burn-cpu", "2ms", "--sleep", "1ms", "--iterations", "2")
	th, err := BuiltinThreads(spec, []int{0, 1}, Costs{Start: testStart, Exit: 5 * ms, Thread: ms})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(Config{Era: Era6_18, CPUs: 2, Limits: cgroup.Limits{Period: 100 * ms}, Seed: 1}, th)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := time.Duration(res.Samples[len(res.Samples)-1].UsageNs), testStart+3*ms+3*2*2*ms+5*ms; got != want {
		t.Errorf("used %v, want the start, 3 threads' making of 1ms and 2 burns of 2ms, and one exit of 5ms: %v", got, want)
	}
	var lastOp int64
	for _, o := range res.Ops {
		lastOp = max(lastOp, o.StartNs+o.WallNs)
	}
	if res.EndNs-lastOp < int64(5*ms) {
		t.Errorf("the last operation ended %v before the process, want the exit's 5ms at least", time.Duration(res.EndNs-lastOp))
	}
	var firstOp int64 = res.EndNs
	for _, o := range res.Ops {
		firstOp = min(firstOp, o.StartNs)
	}
	if want := testStart + ms; firstOp != int64(want) {
		t.Errorf("the first operation began at %v, want after the start and its thread's own cost, %v", time.Duration(firstOp), want)
	}
}

// TestWakeups: another task's wake-ups (Setup.Wakeups) make two threads
// that share a CPU take turns between ticks, and hold the CPU a moment
// each. Without them every turn is a whole tick: an event that waits for
// the other thread waits about 4 ms.
func TestWakeups(t *testing.T) {
	setup := Setup{Workload: "parallel", Args: []string{"--threads", "2", "--duration", "1s", "--pin=false"}, Era: Era6_18, CPUs: 1,
		Limits: cgroup.Limits{Period: 100 * ms}, Costs: Costs{Event: 200 * time.Microsecond}, Seed: 5}
	waits := func(s Setup) (short, tick int, tr *trace.Trace) {
		t.Helper()
		p, err := Prepare(s)
		if err != nil {
			t.Fatal(err)
		}
		if tr, err = p.Run(); err != nil {
			t.Fatal(err)
		}
		if len(tr.Latency.Samples) == 0 {
			t.Fatal("no operations")
		}
		for _, o := range tr.Latency.Samples {
			switch w := time.Duration(o.WallNs); {
			case w > 700*time.Microsecond && w < 3500*time.Microsecond:
				short++
			case w >= 3500*time.Microsecond && w < 4500*time.Microsecond:
				tick++
			}
		}
		return short, tick, tr
	}
	short, tick, quiet := waits(setup)
	if short > 2 || tick < 100 {
		t.Errorf("without wake-ups: %d events waited part of a tick and %d a tick; want at most 2 (the turns the start cut) and over 100 (a turn every tick for 1s)", short, tick)
	}
	if quiet.Spec.Simulated.WakeupsNs != 0 {
		t.Errorf("without wake-ups the trace says wakeups_ns %d", quiet.Spec.Simulated.WakeupsNs)
	}
	setup.Wakeups = 10 * ms
	short, tick, busy := waits(setup)
	t.Logf("with a wake-up every 10ms: %d events waited part of a tick, %d a tick; %v of CPU less", short, tick, time.Duration(quiet.Summary.UsageNs-busy.Summary.UsageNs))
	// About 100 wake-ups, half of them after the running thread had its
	// timeslice (1.5 ms of the 4 ms between ticks on 1 CPU: more than
	// half).
	if short < 20 || tick < 50 {
		t.Errorf("with a wake-up every 10ms: %d events waited part of a tick and %d a tick; want 20 or more and 50 or more", short, tick)
	}
	// Each wake-up held the CPU for wakeupRun: the group used that much
	// less of it, about 100 times.
	lost := time.Duration(quiet.Summary.UsageNs - busy.Summary.UsageNs)
	if lost < 50*wakeupRun || lost > 150*wakeupRun {
		t.Errorf("with a wake-up every 10ms the group used %v less than without; want about 100 × %v", lost, wakeupRun)
	}
}

// TestWakeAfter: a wake-up's CPU time grows with the sleep before it,
// from Costs.Wake at ShortSleep to Costs.WakeLong at LongSleep, on a log
// scale between, through Costs.WakeMid at MidSleep where it is given;
// without WakeLong every wake-up costs Wake, or WakeMid from MidSleep. A
// periodic workload's threads are charged it after each sleep.
func TestWakeAfter(t *testing.T) {
	us := time.Microsecond
	c := Costs{Wake: 20 * us, WakeLong: 80 * us}
	for _, w := range []struct{ sleep, cost time.Duration }{
		{0, 20 * us}, {ShortSleep, 20 * us}, {10 * ms, 40 * us}, {100 * ms, 60 * us}, {LongSleep, 80 * us}, {5 * time.Second, 80 * us},
	} {
		if got := c.WakeAfter(w.sleep); got < w.cost-us || got > w.cost+us {
			t.Errorf("after %v of sleep: %v, want %v", w.sleep, got, w.cost)
		}
	}
	if got := (Costs{Wake: 20 * us}).WakeAfter(5 * time.Second); got != 20*us {
		t.Errorf("without a long sleep's cost: %v after 5s, want the short one's, 20µs", got)
	}
	// 50 ms lies at 0.566 of the way from 1 ms to 1 s on a log scale: 54 µs
	// interpolated; given 30 µs, the costs bend there.
	mid := Costs{Wake: 20 * us, WakeMid: 30 * us, WakeLong: 80 * us}
	for _, w := range []struct {
		c           Costs
		sleep, cost time.Duration
	}{
		{c, MidSleep, 54 * us}, {mid, ShortSleep, 20 * us}, {mid, 7071 * us, 25 * us}, {mid, MidSleep, 30 * us},
		{mid, 223607 * us, 55 * us}, {mid, LongSleep, 80 * us}, {mid, 5 * time.Second, 80 * us},
		{Costs{Wake: 20 * us, WakeMid: 30 * us}, 10 * time.Second, 30 * us},
	} {
		if got := w.c.WakeAfter(w.sleep); got < w.cost-us || got > w.cost+us {
			t.Errorf("%+v, after %v of sleep: %v, want %v", w.c, w.sleep, got, w.cost)
		}
	}
	// Five 1 ms burns 1 s apart, and 101 of them 1 ms apart: the group
	// pays the start, the burns and each wake-up's cost.
	for _, w := range []struct {
		sleep      string
		iterations int
		wake       time.Duration
	}{{"1s", 5, 80 * us}, {"1ms", 101, 20 * us}, {"50ms", 21, 30 * us}} {
		p, err := Prepare(Setup{Workload: "periodic", Args: []string{"--burn-cpu", "1ms", "--sleep", w.sleep, "--iterations", fmt.Sprint(w.iterations)},
			Era: Era6_18, CPUs: 2, Limits: cgroup.Limits{Period: 100 * ms}, Costs: Costs{Start: ms, Wake: mid.Wake, WakeMid: mid.WakeMid, WakeLong: mid.WakeLong}})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := p.Run()
		if err != nil {
			t.Fatal(err)
		}
		want := ms + time.Duration(w.iterations)*ms + time.Duration(w.iterations-1)*w.wake
		if got := time.Duration(tr.Summary.UsageNs); got < want-10*us || got > want+10*us {
			t.Errorf("%d burns %s apart: the group used %v, want %v (the start, the burns and %v per wake-up)", w.iterations, w.sleep, got, want, w.wake)
		}
		if sm := tr.Spec.Simulated; sm.WakeMidCPUNs != int64(mid.WakeMid) || sm.WakeLongCPUNs != int64(mid.WakeLong) {
			t.Errorf("wake_mid_cpu_ns %d and wake_long_cpu_ns %d, want %d and %d", sm.WakeMidCPUNs, sm.WakeLongCPUNs, mid.WakeMid, mid.WakeLong)
		}
	}
}
