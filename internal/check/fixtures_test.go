package check

// The generator of the synthetic fixtures in testdata. No kernel with the
// old defects is at hand, so these traces are built from published numbers
// (seed 000's log) and from the mechanism the fix describes (de53fd7aedb1),
// through a small model of the kernel's counters, and then through the
// lab's own Finish, which builds the timeline, the summary and the checks
// exactly as for a real run. Every fixture says in its tool and spec that
// it is synthetic and where it comes from.
//
//	go test ./internal/check -run TestFixtures -update   # rewrite them

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/golden"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/workload"
)

const (
	msNs       = int64(time.Millisecond)
	usNs       = int64(time.Microsecond)
	fixtureGen = "cfsprobe check fixture generator (synthetic, not a measurement)"
)

// seedLine is one line of seed 000's log: "burn took W ms, real time so
// far: R ms, cpu time so far: C ms".
type seedLine struct{ burnMs, realMs, cpuMs int64 }

// seed1000ms is the log of `docker run --cpu-quota 20000 --cpu-period
// 100000 ... go run cfs.go -iterations 100 -sleep 1000ms` in seed 000
// ("Overly aggressive CFS", 2017-12-08, Linux 4.x).
var seed1000ms = []seedLine{
	{5, 5, 6}, {100, 1187, 12}, {5, 2192, 18}, {99, 3386, 25}, {5, 4391, 30}, {100, 5586, 35},
	{99, 6686, 40}, {5, 7691, 45}, {99, 8886, 52}, {99, 9986, 58}, {5, 10991, 64}, {99, 12186, 69},
	{5, 13191, 75}, {99, 14386, 80}, {99, 15486, 86}, {100, 16586, 93}, {5, 17591, 99}, {99, 18786, 101},
	{99, 19886, 104}, {5, 20891, 109}, {100, 22086, 115}, {99, 23186, 120}, {99, 24286, 126}, {5, 25291, 132},
	{99, 26486, 137}, {5, 27491, 143}, {99, 28686, 150}, {5, 29691, 155}, {100, 30886, 160}, {5, 31891, 166},
	{99, 33086, 170}, {99, 34186, 176}, {99, 35286, 182}, {5, 36291, 187}, {99, 37486, 192}, {99, 38586, 197},
	{99, 39686, 202}, {5, 40691, 208}, {99, 41886, 213}, {99, 42986, 219}, {99, 44086, 224}, {99, 45186, 229},
	{99, 46286, 235}, {99, 47386, 241}, {100, 48486, 247}, {99, 49586, 253}, {99, 50686, 259}, {5, 51691, 265},
	{99, 52886, 270}, {5, 53891, 276}, {99, 55086, 281}, {99, 56186, 286}, {99, 57286, 292}, {5, 58291, 298},
	{99, 59486, 303}, {5, 60491, 309}, {99, 61686, 314}, {5, 62691, 320}, {100, 63886, 326}, {99, 64986, 328},
	{5, 65991, 333}, {99, 67186, 337}, {5, 68191, 343}, {100, 69386, 350}, {99, 70486, 355}, {100, 71586, 361},
	{5, 72591, 367}, {5, 73691, 374}, {94, 74786, 379}, {99, 75886, 385}, {5, 76891, 390}, {99, 78086, 395},
	{99, 79186, 396}, {5, 80191, 401}, {99, 81386, 406}, {5, 82391, 412}, {99, 83586, 417}, {5, 84591, 423},
	{99, 85786, 429}, {5, 86791, 434}, {100, 87986, 440}, {99, 89086, 446}, {99, 90186, 448}, {99, 91286, 452},
	{99, 92386, 457}, {99, 93486, 463}, {5, 94491, 468}, {99, 95686, 474}, {5, 96691, 480}, {99, 97886, 486},
	{5, 98891, 492}, {100, 100086, 497}, {5, 101091, 503}, {99, 102286, 508}, {5, 103291, 514}, {99, 104486, 518},
	{99, 105586, 525}, {99, 106686, 529}, {99, 107786, 532}, {5, 108791, 538},
}

// seed5000ms is the same program with -iterations 10 -sleep 5000ms.
var seed5000ms = []seedLine{
	{5, 5, 6}, {100, 5199, 12}, {98, 10298, 15}, {5, 15303, 20}, {99, 20498, 26}, {99, 25598, 31},
	{99, 30698, 38}, {99, 35798, 44}, {99, 40898, 49}, {99, 45998, 55},
}

// span is a stretch of time in ns since the run's start.
type span struct{ from, to int64 }

// boundary is the end of an enforcement period: the kernel adds one to
// nr_periods, and, when the group was throttled, one to nr_throttled and
// the stall to throttled_time.
type boundary struct {
	t         int64
	throttled bool
	stallNs   int64
}

// counters is a model of what a group's counters record: CPU running
// spans (any number of CPUs) and period boundaries.
type counters struct {
	busy       []span
	boundaries []boundary
}

// samples reads the model every interval, as the lab's sampler does.
func (c *counters) samples(end, interval, phase int64) []trace.CounterSample {
	sort.Slice(c.boundaries, func(i, j int) bool { return c.boundaries[i].t < c.boundaries[j].t })
	at := func(t int64) trace.CounterSample {
		s := trace.CounterSample{T: t}
		for _, b := range c.busy {
			if b.from < t {
				s.UsageNs += min(b.to, t) - b.from
			}
		}
		for _, b := range c.boundaries {
			if b.t > t {
				break
			}
			s.NrPeriods++
			if b.throttled {
				s.NrThrottled++
				s.ThrottledNs += b.stallNs
			}
		}
		return s
	}
	out := []trace.CounterSample{at(0)}
	for t := phase; t <= end; t += interval {
		out = append(out, at(t))
	}
	return out
}

// seedSim rebuilds one run of seed 000's program on a kernel with the
// slice-expiry defect from the log's numbers. For iteration i the log
// gives the burn's wall time W, the real time R at which it was printed
// (the burn ended then) and the process's CPU time so far. The program
// woke at R(i-1)+sleep; a gap before the burn began (R-W) is a stall
// after the wake-up; a burn of about a period is a stall inside it. A
// stall ends at a period boundary, where the kernel unthrottles; the
// period timer, stopped while the group slept, restarts on the grid of
// that boundary (or at the wake-up when nothing stalled), and stops
// again after the first period in which the group did nothing.
func seedSim(log []seedLine, sleepMs int64) (*counters, []trace.Sample, int64) {
	c := &counters{}
	var ops []trace.Sample
	period := 100 * msNs
	var prevR, prevCPU int64
	var end int64
	for i, l := range log {
		w, r := l.burnMs*msNs, l.realMs*msNs
		s := r - w // burn start
		wake := int64(0)
		if i > 0 {
			wake = prevR + sleepMs*msNs
		}
		cpu := max((l.cpuMs-prevCPU)*msNs, msNs)
		prevR, prevCPU = r, l.cpuMs
		stalledBurn := w >= 20*msNs
		preStall := s-wake >= 2*msNs
		var activity []span
		var grid int64 // a boundary of this wake-up's grid
		switch {
		case stalledBurn:
			b2 := r - 50*usNs // the burn resumes 50us before it ends
			grid = b2
			burnCPU := min(max(cpu-500*usNs, msNs), 4800*usNs)
			run := burnCPU - 50*usNs
			c.boundaries = append(c.boundaries, boundary{t: b2, throttled: true, stallNs: b2 - (s + run)})
			activity = append(activity, span{s, s + run}, span{b2, r})
			if preStall {
				b1 := b2 - period
				c.boundaries = append(c.boundaries, boundary{t: b1, throttled: true, stallNs: b1 - (wake + 100*usNs)})
				activity = append(activity, span{wake, wake + 100*usNs}, span{b1, s})
			}
		case preStall:
			grid = s
			c.boundaries = append(c.boundaries, boundary{t: s, throttled: true, stallNs: s - (wake + 100*usNs)})
			activity = append(activity, span{wake, wake + 100*usNs}, span{s, r})
		default:
			grid = wake
			activity = append(activity, span{s, r})
		}
		overhead := min(max(cpu-(spanSum(activity)), 100*usNs), 2*msNs)
		activity = append(activity, span{r, r + overhead})
		end = r + overhead
		c.busy = append(c.busy, activity...)
		// The periods of this wake-up: from the first grid point after the
		// wake-up, until one passes idle.
		first := grid - ((grid-wake)/period)*period
		if first <= wake {
			first += period
		}
		for g := first; ; g += period {
			active := false
			for _, a := range activity {
				if a.from < g && a.to > g-period {
					active = true
				}
			}
			stalled := false
			for _, b := range c.boundaries {
				if b.t == g {
					stalled = true
				}
			}
			if !stalled {
				c.boundaries = append(c.boundaries, boundary{t: g})
			}
			if !active && !stalled {
				break
			}
		}
		ops = append(ops, trace.Sample{StartNs: s, WallNs: w, CPUNs: overlap(activity, s, r)})
	}
	return c, ops, end
}

// overlap is how much of the spans lies in [from, to).
func overlap(sp []span, from, to int64) int64 {
	var n int64
	for _, s := range sp {
		if lo, hi := max(s.from, from), min(s.to, to); hi > lo {
			n += hi - lo
		}
	}
	return n
}

func spanSum(sp []span) int64 {
	var n int64
	for _, s := range sp {
		n += s.to - s.from
	}
	return n
}

// rng is a small deterministic generator (xorshift), so that the fixtures
// do not change with the Go version.
type rng uint64

func (r *rng) next() uint64 {
	x := uint64(*r)
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	*r = rng(x)
	return x
}

// between returns a value in [lo, hi].
func (r *rng) between(lo, hi int64) int64 { return lo + int64(r.next()%uint64(hi-lo+1)) }

// strandedSim runs the check's spread scenario for a host with cpus CPUs
// on a model of a 4.18 to 5.3 kernel: one thread per CPU; quota handed
// out in slices of 5 ms; a CPU whose thread sleeps returns all but 1 ms
// to the pool (min_cfs_rq_runtime); at every period boundary the pool is
// refilled to the quota and whatever the CPUs still hold expires. A
// burst that finds neither local runtime nor pool is throttled until the
// next boundary. Burst times follow the bursty workload (on, then off
// plus a random jitter).
//
// With expire false it models a kernel with the fix (5.4+): what a CPU
// holds stays usable in later periods.
func strandedSim(sc Scenario, cpus int, durationNs, phase int64, seed rng, expire bool) (*counters, []trace.Sample, int64) {
	period := int64(sc.Limits.Period)
	quota := int64(sc.Limits.Quota)
	const slice, keep, tail = 5 * msNs, msNs, 10 * usNs
	b := specOf(sc.Workload, sc.Args, "").Params.Bursty
	on, off, jitter := int64(b.On), int64(b.Off), int64(b.Jitter)
	c := &counters{}
	var ops []trace.Sample
	type thread struct {
		next        int64 // time of its next event
		resume      bool  // the next event resumes a throttled burst
		local       int64 // runtime it holds
		localPeriod int64 // the period that runtime came from
		opStart     int64
		opCPU       int64
	}
	ths := make([]thread, cpus)
	for i := range ths {
		ths[i].localPeriod = -1
	}
	// Boundary k (the end of period k) is at phase + k*period.
	periodOf := func(t int64) int64 { return (t - phase + period) / period }
	pool, cur := quota, periodOf(0)
	stalls := map[int64]int64{} // period -> stall summed over CPUs
	var end int64
	// pull tops a CPU's runtime up to a slice from the pool.
	pull := func(th *thread) {
		got := min(slice-th.local, pool)
		pool -= got
		th.local += got
		th.localPeriod = cur
	}
	// run spends need, or throttles the thread until the next boundary.
	run := func(id int, t, need int64) {
		th := &ths[id]
		if th.localPeriod != cur && expire {
			th.local = 0 // expired at the boundary
		}
		if th.local < need {
			pull(th)
		}
		if th.local >= need {
			c.busy = append(c.busy, span{t, t + need})
			th.local -= need
			th.opCPU += need
			if th.local > keep { // the thread sleeps: give back all but 1ms
				pool += th.local - keep
				th.local = keep
			}
			wall := t + need - th.opStart
			ops = append(ops, trace.Sample{StartNs: th.opStart, WallNs: wall, CPUNs: th.opCPU, Thread: id})
			end = max(end, t+need)
			th.next, th.resume = t+need+off+seed.between(-jitter, jitter), false
			return
		}
		ran := th.local
		c.busy = append(c.busy, span{t, t + ran})
		th.local, th.opCPU = 0, th.opCPU+ran
		b := phase + cur*period
		stalls[cur] += b - (t + ran)
		th.next, th.resume = b, true
	}
	for {
		i := -1
		for j := range ths {
			if (ths[j].resume || ths[j].next < durationNs) && (i < 0 || ths[j].next < ths[i].next) {
				i = j
			}
		}
		if i < 0 {
			break
		}
		th := &ths[i]
		t := th.next
		if p := periodOf(t); p != cur {
			cur, pool = p, quota
		}
		if th.resume {
			run(i, t, tail) // the burst's wall time is up: it ends at once
			continue
		}
		th.opStart, th.opCPU = t, 0
		run(i, t, on)
	}
	last := periodOf(end)
	for k := periodOf(0); k <= last; k++ {
		b := boundary{t: phase + k*period}
		if st, ok := stalls[k]; ok {
			b.throttled, b.stallNs = true, st
		}
		c.boundaries = append(c.boundaries, b)
	}
	return c, ops, end
}

// specOf is the spec cfsprobe run writes for a built-in workload and its
// flags, without an engine (none ran), saying it is synthetic and why.
func specOf(name string, args []string, synthetic string) trace.Spec {
	w, err := workload.Parse(name, args)
	if err != nil {
		panic(err)
	}
	p := w.Params()
	p.Engine = ""
	return trace.Spec{Workload: name, Args: args, Params: &p, Synthetic: synthetic}
}

// finish builds a trace from the model as the lab would from a real run.
func finish(tr *trace.Trace, c *counters, ops []trace.Sample, end int64) *trace.Trace {
	h := trace.NewHistogram()
	for _, o := range ops {
		_ = h.RecordValue(max(o.WallNs, 1000))
	}
	tr.Latency = trace.LatencyFromHistogram(tr.Latency.Op, h)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].StartNs < ops[j].StartNs })
	tr.Latency.Samples = ops
	last := end
	if n := len(c.boundaries); n > 0 {
		sort.Slice(c.boundaries, func(i, j int) bool { return c.boundaries[i].t < c.boundaries[j].t })
		last = max(last, c.boundaries[n-1].t)
	}
	samples := c.samples(last+tr.SampleIntervalNs, tr.SampleIntervalNs, 3300*usNs)
	tr.Process.RusageNs = samples[len(samples)-1].UsageNs
	tr.Process.SelfCPUNs = tr.Process.RusageNs
	trace.Finish(tr, samples, end, true)
	return tr
}

func quotaLimits(quotaUs, periodUs int64) trace.Limits {
	return trace.LimitsOf(cgroup.Limits{Period: time.Duration(periodUs) * time.Microsecond, Quota: time.Duration(quotaUs) * time.Microsecond})
}

func seedTrace(log []seedLine, sleepMs int64) *trace.Trace {
	started := time.Date(2017, 12, 8, 1, 44, 27, 0, time.UTC)
	if sleepMs == 5000 {
		started = time.Date(2017, 12, 8, 1, 46, 45, 0, time.UTC)
	}
	tr := &trace.Trace{
		Schema: trace.Schema,
		Tool:   trace.Tool{Name: fixtureGen, Version: fmt.Sprintf("seed 000 (Overly aggressive CFS), log of the %dms run", sleepMs)},
		Spec: specOf("periodic", []string{"--burn", "5ms", "--sleep", fmt.Sprintf("%dms", sleepMs), "--iterations", fmt.Sprint(len(log))},
			fmt.Sprintf("Synthetic from seed 000: the published log of `docker run --cpu-quota 20000 --cpu-period 100000 golang:1.9.2 go run cfs.go -iterations %d -sleep %dms` "+
				"on Linux 4.x (burn wall times, real time and CPU time per iteration). The kernel's counters are modelled: "+
				"stalls end at period boundaries, the period timer restarts when the group wakes. Host CPU count and kernel patch level are assumed.", len(log), sleepMs)),
		Host:             trace.Host{Hostname: "seed000-docker", Kernel: "4.14.4", Arch: "amd64", CPUs: 4, CgroupMode: "v1", CPUController: 1, SliceUs: 5000},
		Limits:           quotaLimits(20000, 100000),
		Cgroup:           trace.Cgroup{Path: "/docker/cfs-go", Version: 1},
		Started:          started,
		SampleIntervalNs: 10 * msNs,
		Latency:          &trace.Latency{Op: "burn"},
		Process:          trace.Process{PID: 1},
	}
	c, ops, end := seedSim(log, sleepMs)
	return finish(tr, c, ops, end)
}

func strandedTrace() *trace.Trace {
	const cpus = 32
	var sc Scenario
	for _, s := range Scenarios(cpus, 5000) {
		if s.Name == "spread" {
			sc = s
		}
	}
	// A 4-second excerpt keeps the file small (32 threads burst 640 times
	// a second) and still holds 40 periods.
	for i, a := range sc.Args {
		if a == "--duration" {
			sc.Args = append(append([]string{}, sc.Args[:i+1]...), "4s")
			sc.Args = append(sc.Args, Scenarios(cpus, 5000)[2].Args[i+2:]...)
		}
	}
	tr := &trace.Trace{
		Schema: trace.Schema,
		Tool:   trace.Tool{Name: fixtureGen, Version: "stranded per-CPU slices (de53fd7aedb1), modelled"},
		Spec: specOf(sc.Workload, sc.Args,
			"Synthetic: cfsprobe check's spread run for 32 CPUs on a model of Linux 4.18 to 5.3 as the fix de53fd7aedb1 describes it: "+
				"quota handed out in 5ms slices, a CPU whose thread sleeps keeps 1ms (min_cfs_rq_runtime), which expires at the end of the period. Not a measurement."),
		Host:             trace.Host{Hostname: "node-32cpu", Kernel: "4.19.80", Arch: "amd64", CPUs: cpus, CgroupMode: "v1", CPUController: 1, SliceUs: 5000},
		Limits:           quotaLimits(int64(sc.Limits.Quota/time.Microsecond), int64(sc.Limits.Period/time.Microsecond)),
		Cgroup:           trace.Cgroup{Path: "/cfsprobe/run-1-synthetic", Version: 1},
		Started:          time.Date(2019, 11, 1, 12, 0, 0, 0, time.UTC),
		SampleIntervalNs: 10 * msNs,
		Latency:          &trace.Latency{Op: "burst"},
		Process:          trace.Process{PID: 4242},
		Scenario:         &trace.Scenario{Suite: Suite, Name: sc.Name, Description: sc.Description, Repetition: 1, Verdict: "none"},
	}
	c, ops, end := strandedSim(sc, cpus, int64(tr.Spec.Params.Bursty.Duration), 37*msNs, rng(0x9e3779b97f4a7c15), true)
	return finish(tr, c, ops, end)
}

// cleanTrace is seed 000's program on a correct kernel (no throttling; the
// period timer starts with each burn), with the burns in slow slowed by
// other processes, or with few iterations.
func cleanTrace(name, kernel string, iterations int, sleepMs int64, slow map[int]int64) *trace.Trace {
	log := make([]seedLine, iterations)
	var r, cpu int64
	for i := range log {
		w := int64(5)
		if s, ok := slow[i]; ok {
			w = s
		}
		if i > 0 {
			r += sleepMs
		}
		r += w
		cpu += 5
		log[i] = seedLine{w, r, cpu}
	}
	c := &counters{}
	var ops []trace.Sample
	var end int64
	period := 100 * msNs
	for _, l := range log {
		w, rr := l.burnMs*msNs, l.realMs*msNs
		s := rr - w
		// A slow burn was preempted by another process: it burns until
		// 5ms of wall time have passed, so it ends as soon as it runs
		// again, having used less CPU.
		cpuNs := 5 * msNs
		if w > 5*msNs {
			cpuNs = 3 * msNs
		}
		act := []span{{s, s + cpuNs}, {rr, rr + 200*usNs}}
		c.busy = append(c.busy, act...)
		end = rr + 200*usNs
		for g := s + period; ; g += period {
			c.boundaries = append(c.boundaries, boundary{t: g})
			if g-period >= end {
				break
			}
		}
		ops = append(ops, trace.Sample{StartNs: s, WallNs: w, CPUNs: cpuNs})
	}
	tr := &trace.Trace{
		Schema: trace.Schema,
		Tool:   trace.Tool{Name: fixtureGen, Version: name},
		Spec: specOf("periodic", []string{"--burn", "5ms", "--sleep", fmt.Sprintf("%dms", sleepMs), "--iterations", fmt.Sprint(iterations), "--quiet"},
			"Synthetic: seed 000's program on a kernel without the defects (no throttling), "+name+". Not a measurement."),
		Host:             trace.Host{Hostname: "node-" + name, Kernel: kernel, Arch: "amd64", CPUs: 8, CgroupMode: "v2", CPUController: 2, SliceUs: 5000, BurstSupported: true},
		Limits:           quotaLimits(20000, 100000),
		Cgroup:           trace.Cgroup{Path: "/cfsprobe/run-1-synthetic", Version: 2},
		Started:          time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC),
		SampleIntervalNs: 10 * msNs,
		Latency:          &trace.Latency{Op: "burn"},
		Process:          trace.Process{PID: 77},
	}
	return finish(tr, c, ops, end)
}

// fixtures returns the synthetic traces by path under testdata.
func fixtures() map[string]*trace.Trace {
	noisy := map[int]int64{}
	for i := 3; i < 60; i += 5 { // 12 of 60 burns slowed to 25..47 ms
		noisy[i] = 25 + int64(i%23)
	}
	return map[string]*trace.Trace{
		"seed000/seed-1000ms.json":         seedTrace(seed1000ms, 1000),
		"seed000/seed-5000ms.json":         seedTrace(seed5000ms, 5000),
		"stranded/spread.json":             strandedTrace(),
		"inconclusive-short/periodic.json": cleanTrace("short", "5.10.0-21-amd64", 4, 1000, nil),
		"inconclusive-noisy/periodic.json": cleanTrace("noisy", "5.15.0-91-generic", 60, 250, noisy),
	}
}

// TestFixtures keeps the committed fixtures equal to what the generator
// makes (-update rewrites them).
func TestFixtures(t *testing.T) {
	for path, tr := range fixtures() {
		var buf bytes.Buffer
		if err := tr.Write(&buf); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join("testdata", path)
		golden.Check(t, file, buf.Bytes())
		// Every fixture is a valid trace whose timeline matches the counters.
		back, err := trace.Read(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, c := range back.Checks {
			if !c.OK {
				t.Errorf("%s: check %s failed: %s", file, c.Name, c.Detail)
			}
		}
	}
}
