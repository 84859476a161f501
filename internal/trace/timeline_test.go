package trace_test

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	. "github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/trace/tracetest"
)

const ms = int64(1_000_000)

// group is a tracetest.Group described the way these tests think of it:
// the run starts at 0, boundary k (k >= 0) is at phase + k*period, and in
// the period that boundary k ends the group runs at rate CPUs from the
// period's start until it has used min(demand(k), quota), and is throttled
// when it wanted more (its run queues then stand still to the boundary).
type group struct {
	period, phase int64 // 0 < phase <= period
	quota         int64
	rate          float64
	demand        func(k int64) int64
}

func (g group) boundary(k int64) int64 { return g.phase + k*g.period }

func (g group) used(k int64) int64 { return min(g.demand(k), g.quota) }

func (g group) throttled(k int64) bool { return g.demand(k) > g.quota }

// sim is g as the one simulated group of the tests: its period k is g's.
func (g group) sim() tracetest.Group {
	return tracetest.Group{
		Period: time.Duration(g.period), Phase: time.Duration(g.phase - g.period), CPUs: g.rate,
		Usage:     func(k int) time.Duration { return time.Duration(g.used(int64(k))) },
		Throttled: func(k int) bool { return g.throttled(int64(k)) },
		ThrottledTime: func(k int) time.Duration {
			run := float64(g.used(int64(k))) / g.rate
			return time.Duration((float64(g.period) - run) * g.rate)
		},
	}
}

func (g group) sample(times []int64) []CounterSample {
	ts := make([]time.Duration, len(times))
	for i, t := range times {
		ts[i] = time.Duration(t)
	}
	return g.sim().SampleAt(ts)
}

// config is the tracker configuration of a group with the given period
// and quota on a node of two CPUs.
func config(period, quota int64) TrackerConfig {
	return TrackerConfig{Period: time.Duration(period), Quota: time.Duration(quota), CPUs: 2}
}

// regular returns sampling times 0, every, 2*every, ... up to end.
func regular(every, end int64) []int64 {
	var ts []int64
	for t := int64(0); t <= end; t += every {
		ts = append(ts, t)
	}
	return ts
}

// jittered returns sampling times whose intervals are uniform in
// [lo, hi], from a fixed seed.
func jittered(seed uint64, lo, hi, end int64) []int64 {
	r := rand.New(rand.NewPCG(seed, 0))
	ts := []int64{0}
	for t := int64(0); t < end; {
		t += lo + r.Int64N(hi-lo+1)
		ts = append(ts, t)
	}
	return ts
}

// alternating demand: every third period wants 3x the quota, the others
// half of it.
func alternating(quota int64) func(int64) int64 {
	return func(k int64) int64 {
		if k%3 == 1 {
			return 3 * quota
		}
		return quota / 2
	}
}

// blurred says whether the readings saw p closely, or may not have
// (-1: either will do, as when the grid is known less finely than a
// millisecond): they did not when an end lies in an interval of more than
// half a period or it started before the first reading.
func blurred(s []CounterSample, p Period, period int64) int {
	long := func(x int64) bool {
		for i := 1; i < len(s); i++ {
			if s[i].T >= x {
				return s[i].T-s[i-1].T > period/2
			}
		}
		return true
	}
	if long(p.EndNs) || long(p.StartNs) || p.StartNs < s[0].T {
		return 1
	}
	return -1
}

// checkAgainstTruth compares a kernel timeline with the simulated group:
// every period ends within endTol of a true boundary, starts one period
// earlier, is throttled exactly when that period was, and, unless it is
// blurred (the first one starts before the readings), its usage is within
// usageTol of the truth.
func checkAgainstTruth(t *testing.T, g group, samples []CounterSample, ps []Period, endTol, usageTol int64) {
	t.Helper()
	first, last := samples[0], samples[len(samples)-1]
	if got, want := int64(len(ps)), last.NrPeriods-first.NrPeriods; got != want {
		t.Fatalf("%d periods, want %d (the nr_periods delta)", got, want)
	}
	if got, want := CountThrottled(ps), last.NrThrottled-first.NrThrottled; got != want {
		t.Errorf("CountThrottled = %d, want %d (the nr_throttled delta)", got, want)
	}
	for i, p := range ps {
		k := int64(math.Round(float64(p.EndNs-g.phase) / float64(g.period)))
		if d := p.EndNs - g.boundary(k); d < -endTol || d > endTol {
			t.Errorf("period %d ends at %d, %d from the true boundary %d (tolerance %d)", i, p.EndNs, d, g.boundary(k), endTol)
		}
		if p.EndNs-p.StartNs != g.period {
			t.Errorf("period %d: [%d, %d] is not one period long", i, p.StartNs, p.EndNs)
		}
		if !p.Kernel {
			t.Errorf("period %d: Kernel = false", i)
		}
		if p.Throttled != g.throttled(k) {
			t.Errorf("period %d (k=%d): Throttled = %v, want %v", i, k, p.Throttled, g.throttled(k))
		}
		if want := blurred(samples, p, g.period); want >= 0 && p.Blurred != (want == 1) {
			t.Errorf("period %d (k=%d) from %d: Blurred = %v, want %v", i, k, p.StartNs, p.Blurred, want)
		}
		if d := p.UsageNs - g.used(k); !p.Blurred && (d < -usageTol || d > usageTol) {
			t.Errorf("period %d (k=%d): usage %d, want %d ± %d", i, k, p.UsageNs, g.used(k), usageTol)
		}
		if p.UsageMaxNs < p.UsageNs {
			t.Errorf("period %d (k=%d): usage at most %d, below its usage %d", i, k, p.UsageMaxNs, p.UsageNs)
		}
		if i > 0 && p.EndNs <= ps[i-1].EndNs {
			t.Errorf("period %d ends at %d, not after period %d (%d)", i, p.EndNs, i-1, ps[i-1].EndNs)
		}
	}
}

// (a) A regular sampling grid with a boundary every few samples.
func TestBuildTimelineRegularGrid(t *testing.T) {
	tests := []struct {
		name         string
		period       int64
		phase        int64
		every        int64
		quota        int64
		rate         float64
		endTol       int64
		usageTolFrac float64 // of rate*every
	}{
		// The sampling grid divides the period: the phase is known to one
		// sampling interval, so a boundary to half of one.
		{"100ms period, 10ms samples", 100 * ms, 37 * ms, 10 * ms, 20 * ms, 1, 5 * ms, 1},
		{"100ms period, 10ms samples, 2 CPUs", 100 * ms, 99 * ms, 10 * ms, 150 * ms, 2, 5 * ms, 1},
		{"10ms period, 1ms samples", 10 * ms, 3*ms + 300_000, 1 * ms, 4 * ms, 1, ms / 2, 1},
		// A sampling interval that does not divide the period: the
		// intervals' intersection narrows the phase down further.
		{"100ms period, 7ms samples", 100 * ms, 37 * ms, 7 * ms, 20 * ms, 1, 7 * ms / 4, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := group{period: tc.period, phase: tc.phase, quota: tc.quota, rate: tc.rate, demand: alternating(tc.quota)}
			samples := g.sample(regular(tc.every, 30*tc.period+tc.every/2))
			ps := BuildTimeline(samples, config(tc.period, tc.quota))
			tol := int64(tc.usageTolFrac * tc.rate * float64(tc.every))
			checkAgainstTruth(t, g, samples, ps, tc.endTol, tol)
			// All ends lie on one grid of the period.
			for i, p := range ps {
				if (p.EndNs-ps[0].EndNs)%tc.period != 0 {
					t.Errorf("period %d ends at %d, off the grid of period 0 (%d)", i, p.EndNs, ps[0].EndNs)
				}
			}
			// Stall time is conserved when every boundary is seen alone.
			var stall int64
			for _, p := range ps {
				stall += p.ThrottledNs
			}
			if want := samples[len(samples)-1].ThrottledNs - samples[0].ThrottledNs; stall != want {
				t.Errorf("sum of ThrottledNs = %d, want %d", stall, want)
			}
		})
	}
}

// (b) Two boundaries between two samples (the sampler was late once): both
// land on the grid, one period apart, and the throttled one is the one
// that used the most CPU.
func TestBuildTimelineTwoBoundariesInOneInterval(t *testing.T) {
	g := group{period: 100 * ms, phase: 40 * ms, quota: 20 * ms, rate: 1, demand: func(k int64) int64 {
		switch k {
		case 5:
			return 5 * ms // light, not throttled
		case 6:
			return 80 * ms // throttled
		}
		return 10 * ms
	}}
	// 10ms samples, except a gap from 490ms to 650ms that holds the
	// boundaries at 540ms (k=5) and 640ms (k=6).
	var times []int64
	for _, t := range regular(10*ms, 1200*ms) {
		if t <= 490*ms || t >= 650*ms {
			times = append(times, t)
		}
	}
	samples := g.sample(times)
	ps := BuildTimeline(samples, config(g.period, g.quota))
	checkAgainstTruth(t, g, samples, ps, 5*ms, 10*ms)
	var got []Period
	for _, p := range ps {
		if p.EndNs > 490*ms && p.EndNs <= 650*ms {
			got = append(got, p)
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d periods end in the gap, want 2: %+v", len(got), got)
	}
	if got[1].EndNs-got[0].EndNs != g.period {
		t.Errorf("the two periods end %d apart, want one period", got[1].EndNs-got[0].EndNs)
	}
	if got[0].Throttled || !got[1].Throttled {
		t.Errorf("throttled = %v, %v; want the second (the busier) one", got[0].Throttled, got[1].Throttled)
	}
}

// Without a phase (every interval holds several boundaries) the periods
// of an interval end at its later sample and one period apart before it.
func TestBuildTimelineNoPhase(t *testing.T) {
	samples := []CounterSample{
		{T: 0, UsageNs: 0},
		{T: 250, UsageNs: 100, NrPeriods: 2, NrThrottled: 1, ThrottledNs: 30},
		{T: 500, UsageNs: 160, NrPeriods: 5, NrThrottled: 1, ThrottledNs: 30, NrBursts: 1, BurstNs: 7},
	}
	// Both periods of the first interval used the same (interpolated)
	// CPU: the later one is taken as the throttled one, stalled on one
	// CPU. The readings are 2.5 periods apart: every period is blurred,
	// and bounded by all the CPU of its readings; a period that ends
	// between two readings that the usage grew between is busy at its
	// end, one that ends on a reading is not.
	want := []Period{
		{StartNs: 50, EndNs: 150, UsageNs: 40, UsageMaxNs: 100, EndBusy: true, RunningCPUs: 0.4, Kernel: true, Blurred: true},
		{StartNs: 150, EndNs: 250, UsageNs: 40, UsageMaxNs: 100, Throttled: true, ThrottledNs: 30, StallNs: 30, StoppedCPUs: 1, RunningCPUs: 40.0 / 70, Kernel: true, Blurred: true},
		{StartNs: 200, EndNs: 300, UsageNs: 32, UsageMaxNs: 160, EndBusy: true, RunningCPUs: 0.32, Kernel: true, Blurred: true},
		{StartNs: 300, EndNs: 400, UsageNs: 24, UsageMaxNs: 160, EndBusy: true, RunningCPUs: 0.24, Kernel: true, Blurred: true},
		{StartNs: 400, EndNs: 500, UsageNs: 24, UsageMaxNs: 160, RunningCPUs: 0.24, BurstNs: 7, Kernel: true, Blurred: true},
	}
	got := BuildTimeline(samples, TrackerConfig{Period: 100, Quota: 50})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("BuildTimeline =\n%+v\nwant\n%+v", got, want)
	}
}

// (c) On jittered sampling the phase estimate converges: boundaries end up
// within a quarter of a sampling interval of the truth.
func TestBuildTimelinePhaseConverges(t *testing.T) {
	const period = 100 * ms
	for seed := uint64(1); seed <= 23; seed++ {
		phase := 1 + (int64(seed)*7919*ms/10)%period
		switch seed { // boundaries right after and right before the grid's 0
		case 21:
			phase = 200_000
		case 22:
			phase = period - 100_000
		case 23:
			phase = period
		}
		g := group{period: period, phase: phase, quota: 30 * ms, rate: 1.5, demand: alternating(30 * ms)}
		times := jittered(seed, 5*ms, 15*ms, 3000*ms)
		samples := g.sample(times)
		ps := BuildTimeline(samples, config(period, 30*ms))
		const interval = 10 * ms
		checkAgainstTruth(t, g, samples, ps, interval/4, int64(1.5*2*float64(interval)))
		if n := len(ps) - blurredCount(ps); n < len(ps)*3/4 {
			t.Errorf("only %d of %d periods seen closely: the grid should be learnt to a millisecond", n, len(ps))
		}
		if t.Failed() {
			t.Fatalf("seed %d, phase %d", seed, phase)
		}
	}
}

// The sampler stamps a reading just after it was taken, so stamps run a
// few microseconds late, now and then much later (the sampler thread was
// preempted). The timeline should still find the grid, not fall back to
// sample times for the whole run because one interval disagrees.
func TestBuildTimelineStampNoise(t *testing.T) {
	const period = 100 * ms
	g := group{period: period, phase: 37 * ms, quota: 30 * ms, rate: 1, demand: alternating(30 * ms)}
	times := jittered(7, 5*ms, 15*ms, 3000*ms)
	samples := g.sample(times)
	r := rand.New(rand.NewPCG(7, 1))
	for i := range samples {
		samples[i].T += r.Int64N(20_000) // 0-20us late
	}
	// One reading, taken just before the boundary at 1537ms, is stamped
	// 1ms after it: its interval and the next one disagree with the rest.
	g15 := g.boundary(15)
	i := 0
	for samples[i+1].T < g15 {
		i++
	}
	samples[i].T = min(g15+ms, (g15+samples[i+1].T)/2)
	ps := BuildTimeline(samples, config(period, 30*ms))
	checkAgainstTruth(t, g, samples, ps, 10*ms/4, 2*10*ms)
	checkInvariants(t, samples, period, true, ps)
}

// When the grid moves (the quota was rewritten and the period timer
// restarted), the periods follow it: the tracker learns the new grid once
// two intervals in a row disagree with the old one.
func TestBuildTimelineGridMoved(t *testing.T) {
	const period = 100 * ms
	a := group{period: period, phase: 20 * ms, quota: 30 * ms, rate: 1, demand: alternating(30 * ms)}
	b := a
	b.phase = 70 * ms
	at := func(g group, t int64) CounterSample { return g.sample([]int64{t})[0] }
	var samples []CounterSample
	for _, t := range jittered(5, 7*ms, 13*ms, 2000*ms) {
		s := at(a, t)
		if t > 1000*ms { // continue the counters on b's grid
			s = at(b, t)
			s.UsageNs += at(a, 1000*ms).UsageNs - at(b, 1000*ms).UsageNs
			s.NrPeriods += at(a, 1000*ms).NrPeriods - at(b, 1000*ms).NrPeriods
			s.NrThrottled += at(a, 1000*ms).NrThrottled - at(b, 1000*ms).NrThrottled
			s.ThrottledNs += at(a, 1000*ms).ThrottledNs - at(b, 1000*ms).ThrottledNs
		}
		samples = append(samples, s)
	}
	ps := BuildTimeline(samples, config(period, 30*ms))
	checkInvariants(t, samples, period, true, ps)
	for _, p := range ps {
		g := a
		switch {
		case p.EndNs > 1200*ms:
			g = b
		case p.EndNs > 1000*ms, p.EndNs < 300*ms:
			continue // learning the new grid; the first ones, on the grid learnt last
		}
		k := int64(math.Round(float64(p.EndNs-g.phase) / float64(g.period)))
		if d := p.EndNs - g.boundary(k); d < -3*ms || d > 3*ms {
			t.Errorf("period ending %d: %d from the grid of phase %d", p.EndNs, d, g.phase)
		}
	}
}

// (d) Without a quota the timeline is wall-clock windows of one period
// from the first sample, the last one cut at the last sample.
func TestBuildTimelineWallclock(t *testing.T) {
	samples := []CounterSample{
		{T: 0, UsageNs: 0},
		{T: 100, UsageNs: 50},
		{T: 200, UsageNs: 150},
		{T: 250, UsageNs: 200, NrPeriods: 9, NrThrottled: 9},
	}
	want := []Period{
		{StartNs: 0, EndNs: 100, UsageNs: 50, RunningCPUs: 0.5},
		{StartNs: 100, EndNs: 200, UsageNs: 100, RunningCPUs: 1},
		{StartNs: 200, EndNs: 250, UsageNs: 50, RunningCPUs: 1},
	}
	got := BuildTimeline(samples, TrackerConfig{Period: 100})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("BuildTimeline =\n%+v\nwant\n%+v", got, want)
	}

	// A long run: windows tile [first, last] and usage adds up.
	g := group{period: 100 * ms, phase: 10 * ms, quota: math.MaxInt64, rate: 0.7, demand: func(int64) int64 { return 50 * ms }}
	samples = g.sample(jittered(3, 5*ms, 15*ms, 2000*ms))
	ps := BuildTimeline(samples, TrackerConfig{Period: time.Duration(100 * ms)})
	first, last := samples[0], samples[len(samples)-1]
	if want := int((last.T - first.T + 100*ms - 1) / (100 * ms)); len(ps) != want {
		t.Fatalf("%d windows, want %d", len(ps), want)
	}
	var sum int64
	for i, p := range ps {
		if p.Kernel || p.Throttled {
			t.Errorf("window %d: %+v is marked kernel or throttled", i, p)
		}
		if p.StartNs != first.T+int64(i)*100*ms {
			t.Errorf("window %d starts at %d", i, p.StartNs)
		}
		if want := min(p.StartNs+100*ms, last.T); p.EndNs != want {
			t.Errorf("window %d ends at %d, want %d", i, p.EndNs, want)
		}
		if p.UsageNs < 0 {
			t.Errorf("window %d: negative usage %d", i, p.UsageNs)
		}
		sum += p.UsageNs
	}
	if sum != last.UsageNs-first.UsageNs {
		t.Errorf("windows' usage adds to %d, want %d", sum, last.UsageNs-first.UsageNs)
	}
}

// (e) Nothing to build from.
func TestBuildTimelineDegenerate(t *testing.T) {
	two := []CounterSample{{T: 0}, {T: 100, UsageNs: 10, NrPeriods: 1}}
	tests := []struct {
		name    string
		samples []CounterSample
		period  int64
		kernel  bool
	}{
		{"nil", nil, 100, true},
		{"empty", []CounterSample{}, 100, true},
		{"one sample", []CounterSample{{T: 5, UsageNs: 10, NrPeriods: 3}}, 100, true},
		{"one sample, wallclock", []CounterSample{{T: 5}}, 100, false},
		{"zero period", two, 0, true},
		{"negative period", two, -100, false},
		{"no boundary", []CounterSample{{T: 0}, {T: 100, UsageNs: 50}}, 100, true},
		{"same instant, wallclock", []CounterSample{{T: 7}, {T: 7, UsageNs: 5}}, 100, false},
	}
	for _, tc := range tests {
		ps := BuildTimeline(tc.samples, kernelConfig(tc.period, tc.kernel))
		if ps == nil || len(ps) != 0 {
			t.Errorf("%s: BuildTimeline = %#v, want an empty, non-nil slice (JSON [])", tc.name, ps)
		}
	}
}

// A throttled period whose nr_throttled increment shows up one sample
// after its nr_periods increment (cpu.stat is read without the bandwidth
// lock, and the period timer bumps the two counters one after the other)
// still counts, and its stall time is kept.
func TestBuildTimelineTornRead(t *testing.T) {
	samples := []CounterSample{
		{T: 0},
		{T: 10, UsageNs: 10},
		{T: 20, UsageNs: 20, NrPeriods: 1}, // boundary at 15..20, nr_throttled not yet
		{T: 30, UsageNs: 20, NrPeriods: 1, NrThrottled: 1, ThrottledNs: 8}, // ... now
		{T: 40, UsageNs: 25, NrPeriods: 1, NrThrottled: 1, ThrottledNs: 8},
	}
	ps := BuildTimeline(samples, TrackerConfig{Period: 100, Quota: 50})
	if CountThrottled(ps) != 1 {
		t.Errorf("CountThrottled = %d, want 1: %+v", CountThrottled(ps), ps)
	}
	var stall int64
	for _, p := range ps {
		stall += p.ThrottledNs
	}
	if stall != 8 {
		t.Errorf("stall time %d, want 8: %+v", stall, ps)
	}
}

func blurredCount(ps []Period) int {
	n := 0
	for _, p := range ps {
		if p.Blurred {
			n++
		}
	}
	return n
}

// kernelConfig is the tracker configuration of a kernel period (with a
// quota) or of wall-clock windows.
func kernelConfig(period int64, kernel bool) TrackerConfig {
	c := TrackerConfig{Period: time.Duration(period)}
	if kernel {
		c.Quota = max(c.Period/2, 1)
	}
	return c
}

// randomSamples draws a run of monotone counters as the kernel could show
// them: nr_throttled never gains on nr_periods (it may lag it by a
// reading), times never go back, usage and stall time only grow.
func randomSamples(r *rand.Rand, n int, periodNs int64) []CounterSample {
	s := make([]CounterSample, n)
	s[0] = CounterSample{T: r.Int64N(1000), UsageNs: r.Int64N(1e9), NrPeriods: r.Int64N(100)}
	s[0].NrThrottled = r.Int64N(s[0].NrPeriods + 1)
	for i := 1; i < n; i++ {
		a := s[i-1]
		b := a
		dt := r.Int64N(3 * periodNs)
		if r.IntN(10) == 0 {
			dt = 0 // two readings in the same nanosecond
		}
		b.T += dt
		b.UsageNs += r.Int64N(2*dt + 1)
		switch r.IntN(4) {
		case 0: // consistent with time
			b.NrPeriods += dt / periodNs
		case 1:
			b.NrPeriods += r.Int64N(4)
		}
		// Throttled periods, never more than periods seen since the start.
		room := (b.NrPeriods - s[0].NrPeriods) - (a.NrThrottled - s[0].NrThrottled)
		if room > 0 && r.IntN(2) == 0 {
			b.NrThrottled += r.Int64N(room + 1)
		}
		b.ThrottledNs += r.Int64N(periodNs)
		if r.IntN(5) == 0 {
			b.NrBursts++
			b.BurstNs += r.Int64N(periodNs)
		}
		s[i] = b
	}
	return s
}

// checkInvariants asserts what holds for every timeline of monotone
// counters.
func checkInvariants(t *testing.T, s []CounterSample, periodNs int64, kernel bool, ps []Period) {
	t.Helper()
	if ps == nil {
		t.Fatal("BuildTimeline returned nil")
	}
	if len(s) < 2 || periodNs <= 0 {
		if len(ps) != 0 {
			t.Fatalf("%d periods from %d samples", len(ps), len(s))
		}
		return
	}
	first, last := s[0], s[len(s)-1]
	for i, p := range ps {
		if p.UsageNs < 0 || p.ThrottledNs < 0 || p.BurstNs < 0 {
			t.Fatalf("period %d has a negative value: %+v", i, p)
		}
		if p.Kernel != kernel {
			t.Fatalf("period %d: Kernel = %v", i, p.Kernel)
		}
	}
	if !kernel {
		var sum int64
		for i, p := range ps {
			if p.StartNs >= p.EndNs || p.EndNs-p.StartNs > periodNs || p.Throttled {
				t.Fatalf("window %d: %+v", i, p)
			}
			if i > 0 && p.StartNs != ps[i-1].EndNs {
				t.Fatalf("window %d starts at %d, not where %d ended (%d)", i, p.StartNs, i-1, ps[i-1].EndNs)
			}
			sum += p.UsageNs
		}
		if last.T == first.T { // no time passed: no window
			if len(ps) != 0 {
				t.Fatalf("%d windows in no time", len(ps))
			}
			return
		}
		if sum != last.UsageNs-first.UsageNs {
			t.Fatalf("windows' usage adds to %d, want %d", sum, last.UsageNs-first.UsageNs)
		}
		return
	}
	if got, want := CountThrottled(ps), last.NrThrottled-first.NrThrottled; got != want {
		t.Fatalf("CountThrottled = %d, want the nr_throttled delta %d", got, want)
	}
	if got, want := int64(len(ps)), last.NrPeriods-first.NrPeriods; got != want {
		t.Fatalf("%d periods, want the nr_periods delta %d", got, want)
	}
	var stall, burst int64
	for i, p := range ps {
		if p.EndNs-p.StartNs != periodNs {
			t.Fatalf("period %d is %d long, want %d", i, p.EndNs-p.StartNs, periodNs)
		}
		stall += p.ThrottledNs
		burst += p.BurstNs
	}
	// Stall and burst time are kept once there is a period to hold them.
	if len(ps) > 0 {
		if want := last.ThrottledNs - first.ThrottledNs; stall != want {
			t.Fatalf("sum of ThrottledNs = %d, want %d", stall, want)
		}
		if want := last.BurstNs - first.BurstNs; burst != want {
			t.Fatalf("sum of BurstNs = %d, want %d", burst, want)
		}
	}
}

// Property: for random monotone counters the timeline's throttled periods
// are the nr_throttled delta, its periods the nr_periods delta, and no
// period has negative usage.
func TestBuildTimelineProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 42))
	for iter := 0; iter < 3000; iter++ {
		periodNs := 1 + r.Int64N(200)
		if r.IntN(2) == 0 {
			periodNs = 100 * ms
		}
		s := randomSamples(r, 2+r.IntN(40), periodNs)
		kernel := r.IntN(4) != 0
		ps := BuildTimeline(s, kernelConfig(periodNs, kernel))
		checkInvariants(t, s, periodNs, kernel, ps)
		if t.Failed() {
			t.Fatalf("iteration %d: period %d, kernel %v, samples %+v", iter, periodNs, kernel, s)
		}
	}
}

func TestCountThrottled(t *testing.T) {
	ps := []Period{{Throttled: true}, {}, {Throttled: true}, {}}
	if got := CountThrottled(ps); got != 2 {
		t.Errorf("CountThrottled = %d, want 2", got)
	}
	if got := CountThrottled(nil); got != 0 {
		t.Errorf("CountThrottled(nil) = %d", got)
	}
}
