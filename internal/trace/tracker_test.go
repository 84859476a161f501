package trace_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	. "github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/trace/tracetest"
)

const tms = time.Millisecond

// track feeds samples one by one to a streaming Tracker of a group with
// the given quota and period on a node of cpus CPUs, as the monitor does.
func track(samples []CounterSample, quota, period time.Duration, cpus int) []Period {
	t := NewTracker(TrackerConfig{Period: period, Quota: quota, CPUs: cpus})
	out := []Period{}
	emit := func(p Period) { out = append(out, p) }
	for _, s := range samples {
		t.Add(s, emit)
	}
	t.Flush(emit)
	return out
}

// A group throttled in every period while it used a quarter of its
// quota (the kernel defect cfsprobe check looks for) raises the
// under-quota count in every period; a group throttled at its quota, as a
// correct kernel throttles, never does. A group that does all its work
// right after each boundary blurs with the next period in the readings:
// the count, which judges by the most the readings allow, then sees a
// part of those periods only.
func TestPeriodsUnderQuota(t *testing.T) {
	const quota = 20 * tms
	for _, tc := range []struct {
		name      string
		g         tracetest.Group
		wantUnder float64 // share of throttled periods
	}{
		{"kernel bug: throttled at a quarter of the quota", tracetest.Group{
			Period: 100 * tms, Phase: 37 * tms, CPUs: 1, Spread: true,
			Usage: tracetest.Const(5 * tms), Throttled: tracetest.Always, ThrottledTime: tracetest.Const(3 * tms),
		}, 1},
		{"kernel bug: throttled at a quarter of the quota, used at the period's start", tracetest.Group{
			Period: 100 * tms, Phase: 37 * tms, CPUs: 1,
			Usage: tracetest.Const(5 * tms), Throttled: tracetest.Always, ThrottledTime: tracetest.Const(3 * tms),
		}, 0.5},
		{"throttled at the quota", tracetest.Group{
			Period: 100 * tms, Phase: 37 * tms, CPUs: 1,
			Usage: tracetest.Const(quota), Throttled: tracetest.Always, ThrottledTime: tracetest.Const(80 * tms),
		}, 0},
		{"throttled at the quota, counts read late", tracetest.Group{
			Period: 100 * tms, Phase: 37 * tms, CPUs: 1, ThrLag: 3 * tms,
			Usage: tracetest.Const(quota), Throttled: tracetest.Always, ThrottledTime: tracetest.Const(80 * tms),
		}, 0},
		{"throttled at the quota on two CPUs", tracetest.Group{
			Period: 100 * tms, Phase: 61 * tms, CPUs: 2,
			Usage: tracetest.Const(quota), Throttled: tracetest.Always, ThrottledTime: tracetest.Const(180 * tms),
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(0); seed < 5; seed++ {
				samples := tc.g.Samples(0, 50, true, seed)
				ps := track(samples, quota, tc.g.Period, 2)
				s := tracetest.Summarize(ps, quota)
				kernelThr := int(samples[len(samples)-1].NrThrottled - samples[0].NrThrottled)
				// Every period is handed out; those before the grid is
				// learnt to a millisecond are blurred.
				if n := int(CountThrottled(ps)); n != kernelThr || s.Periods < 20 {
					t.Fatalf("seed %d: %d periods seen closely of %d, %d throttled; want 20 or more, and %d throttled as the kernel counted", seed, s.Periods, len(ps), n, kernelThr)
				}
				if tc.wantUnder > 0 {
					if float64(s.Under) < tc.wantUnder*float64(s.Throttled) {
						t.Errorf("seed %d: %d of %d throttled periods under quota, want %.0f%% (usage ratio %.2f to %.2f)", seed, s.Under, s.Throttled, 100*tc.wantUnder, s.MinRatio, s.MaxRatio)
					}
					if s.MaxRatio >= UnderQuotaRatio {
						t.Errorf("seed %d: usage ratio up to %.2f, want about 0.25", seed, s.MaxRatio)
					}
					continue
				}
				if s.Under != 0 {
					t.Errorf("seed %d: %d periods under quota, want none (usage ratio %.2f to %.2f)", seed, s.Under, s.MinRatio, s.MaxRatio)
				}
				if s.MaxRatio > 1.15 {
					t.Errorf("seed %d: usage ratio up to %.2f, want about 1", seed, s.MaxRatio)
				}
			}
		})
	}
}

// Usage per period is the CPU the group used between two boundaries,
// whatever the sampling Phase: a group that uses 5 tms in even periods and
// 15 tms in odd ones shows that, give or take what the rate change within
// one sampling interval blurs.
func TestPeriodsUsage(t *testing.T) {
	g := tracetest.Group{
		Period: 100 * tms, Phase: 13 * tms, CPUs: 1, Spread: true,
		Usage: func(k int) time.Duration {
			if k%2 == 0 {
				return 5 * tms
			}
			return 15 * tms
		},
		Throttled: tracetest.Never, ThrottledTime: tracetest.Const(0),
	}
	ps := track(g.Samples(0, 40, true, 7), 20*tms, g.Period, 2)
	bad := 0
	for _, p := range ps[2:] { // the phase is learnt after a few periods
		k := int(math.Round(float64(time.Duration(p.EndNs)-g.Phase)/float64(g.Period))) - 1
		want := g.Usage(k)
		if d := time.Duration(p.UsageNs) - want; d < -tms || d > tms {
			bad++
			t.Logf("period ending %v (k=%d): usage %v, want %v", time.Duration(p.EndNs), k, time.Duration(p.UsageNs), want)
		}
		if p.Throttled || p.StallNs != 0 {
			t.Errorf("period ending %v throttled without throttling", time.Duration(p.EndNs))
		}
	}
	if bad > 1 {
		t.Errorf("%d of %d periods with usage off by more than 1ms", bad, len(ps)-2)
	}
}

// The stall of a throttled period is its throttled time divided by the
// CPUs the group ran on when its quota ran out, at most the period
// (docs/metrics.md): four threads under a one-CPU limit that use the
// quota in 25 tms and wait 75 tms on four CPUs stall 75 tms; one thread
// under 0.2 CPUs of a 50 tms period stalls 40 tms.
func TestPeriodsStall(t *testing.T) {
	for _, tc := range []struct {
		name      string
		g         tracetest.Group
		cpus      int
		want, tol time.Duration
	}{
		{"four threads, one CPU", tracetest.Group{
			Period: 100 * tms, Phase: 20 * tms, CPUs: 4,
			Usage: tracetest.Const(100 * tms), Throttled: tracetest.Always, ThrottledTime: tracetest.Const(300 * tms),
		}, 4, 75 * tms, 0},
		{"one thread, 0.2 CPUs", tracetest.Group{
			Period: 50 * tms, Phase: 3 * tms, CPUs: 1,
			Usage: tracetest.Const(10 * tms), Throttled: tracetest.Always, ThrottledTime: tracetest.Const(40 * tms),
		}, 2, 40 * tms, 0},
		{"four threads on a two-CPU node", tracetest.Group{
			Period: 100 * tms, Phase: 20 * tms, CPUs: 2,
			Usage: tracetest.Const(100 * tms), Throttled: tracetest.Always, ThrottledTime: tracetest.Const(100 * tms),
		}, 2, 50 * tms, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := track(tc.g.Samples(0, 30, true, 3), tc.g.Usage(0), tc.g.Period, tc.cpus)
			s := tracetest.Summarize(ps, 100*tms)
			if s.Throttled < 10 {
				t.Fatalf("%d throttled periods, want about 30", s.Throttled)
			}
			for _, p := range ps[1:] {
				if d := time.Duration(p.StallNs) - tc.want; p.Throttled && (d < -tc.tol || d > tc.tol) {
					t.Errorf("period ending %v: stall %v (running on %d CPUs), want %v", time.Duration(p.EndNs), time.Duration(p.StallNs), p.StoppedCPUs, tc.want)
				}
			}
		})
	}
}

// Periods that went by while the sampler was starved are handed out
// blurred, and every period the kernel counted is there; counters that go
// back (a new group under the same path) start afresh; neither makes
// periods up.
func TestPeriodsGapsAndResets(t *testing.T) {
	g := tracetest.Group{
		Period: 100 * tms, Phase: 5 * tms, CPUs: 1,
		Usage: tracetest.Const(20 * tms), Throttled: tracetest.Always, ThrottledTime: tracetest.Const(80 * tms),
	}
	var samples []CounterSample
	for _, s := range g.Samples(0, 10, true, 0) {
		samples = append(samples, s)
	}
	for _, s := range g.Samples(2*time.Second, 10, true, 1) { // a 1 s gap
		samples = append(samples, s)
	}
	ps := track(samples, 20*tms, g.Period, 2)
	if want := samples[len(samples)-1].NrPeriods - samples[0].NrPeriods; int64(len(ps)) != want {
		t.Errorf("%d periods, want the %d the kernel counted", len(ps), want)
	}
	if s := tracetest.Summarize(ps, 20*tms); s.Periods < 1 || s.Periods > 19 {
		t.Errorf("%d periods seen closely over 2 s of readings with a 1 s gap, want some, and none in the gap (at most 19)", s.Periods)
	}
	for _, p := range ps {
		if p.ThrottledUnderQuota(20 * tms) {
			t.Errorf("period ending %v under quota (usage %v)", time.Duration(p.EndNs), time.Duration(p.UsageNs))
		}
	}

	// The group is recreated: its counters restart from zero.
	samples = g.Samples(0, 10, false, 0)
	for _, s := range g.Samples(0, 10, false, 0) {
		s.T += int64(2 * time.Second)
		samples = append(samples, s)
	}
	for _, p := range track(samples, 20*tms, g.Period, 2) {
		if p.UsageNs < 0 || p.UsageNs > int64(25*tms) {
			t.Errorf("period ending %v: usage %v after a reset", time.Duration(p.EndNs), time.Duration(p.UsageNs))
		}
	}
}

// A throttled period's throttled time that shows up a reading after its
// boundary (the run queue on another CPU adds it when it is let go) still
// says the group stood still since the reading before the boundary: the
// usage after the boundary, read with the boundary, goes to the next
// period, not to the throttled one.
func TestTrackerLateThrottledTime(t *testing.T) {
	ms := int64(time.Millisecond)
	samples := []CounterSample{
		{T: 10 * ms},
		{T: 20 * ms, UsageNs: 5 * ms}, // ran its 5 ms quota
		{T: 95 * ms, UsageNs: 5 * ms}, // stands still (no reading between: the monitor reads two or three times a period) //
		{T: 103 * ms, UsageNs: 8 * ms, NrPeriods: 1, NrThrottled: 1}, // let go at 100 ms, ran 3 ms; no throttled time yet
		{T: 150 * ms, UsageNs: 10 * ms, NrPeriods: 1, NrThrottled: 1, ThrottledNs: 88 * ms},
		{T: 195 * ms, UsageNs: 10 * ms, NrPeriods: 1, NrThrottled: 1, ThrottledNs: 88 * ms},
		{T: 205 * ms, UsageNs: 12 * ms, NrPeriods: 2, NrThrottled: 1, ThrottledNs: 88 * ms},
	}
	ps := track(samples, 5*tms, 100*tms, 2)
	if len(ps) != 2 {
		t.Fatalf("%d periods, want 2: %+v", len(ps), ps)
	}
	if !ps[0].Throttled || ps[0].UsageNs != 5*ms || ps[0].ThrottledNs != 88*ms {
		t.Errorf("throttled period: throttled %v, usage %v, throttled time %v; want true, 5ms, 88ms", ps[0].Throttled, time.Duration(ps[0].UsageNs), time.Duration(ps[0].ThrottledNs))
	}
	// 5 ms between the boundary and 195 ms, 2 more by 205 ms (its end
	// is on the grid the first boundary's readings gave, about 100 ms on).
	if ps[1].Throttled || ps[1].UsageNs < 5*ms || ps[1].UsageNs > 7*ms {
		t.Errorf("next period: throttled %v, usage %v; want false, 5 to 7ms", ps[1].Throttled, time.Duration(ps[1].UsageNs))
	}
}

// counters is a one-thread group's cpu.stat and usage at x ms: it runs in
// runs (start and end, ms), its period timer counts the periods ending at
// 100, 200, ... ms up to periods, throttled lists the periods' ends that
// count it throttled, and booked the throttled time (ms) the kernel adds
// at the instant given (when it lets the group go).
type counters struct {
	runs      [][2]float64
	periods   int
	throttled []float64
	booked    [][2]float64
}

func (c counters) at(x float64) CounterSample {
	ms := float64(time.Millisecond)
	s := CounterSample{T: int64(x * ms)}
	for _, r := range c.runs {
		s.UsageNs += int64(max(min(x, r[1])-r[0], 0) * ms)
	}
	for k := 1; k <= c.periods && float64(100*k) <= x; k++ {
		s.NrPeriods++
	}
	for _, e := range c.throttled {
		if e <= x {
			s.NrThrottled++
		}
	}
	for _, b := range c.booked {
		if b[0] <= x {
			s.ThrottledNs += int64(b[1] * ms)
		}
	}
	return s
}

// read reads c every 9.7 ms from 3 ms to end, so that the readings drift
// over the period's phases, and once more either side of the first two
// boundaries, so that the tracker knows the grid to within a millisecond.
func (c counters) read(end float64) []CounterSample {
	var xs []float64
	for x := 3.0; x < end; x += 9.7 {
		xs = append(xs, x)
	}
	xs = append(xs, 99.6, 100.4, 199.6, 200.4)
	slices.Sort(xs)
	var out []CounterSample
	for _, x := range xs {
		out = append(out, c.at(x))
	}
	return out
}

// readAround reads c 0.4 ms either side of each boundary, from 3 ms to
// end, and nowhere else.
func (c counters) readAround(end float64) []CounterSample {
	out := []CounterSample{c.at(3)}
	for b := 100.0; b+0.4 < end; b += 100 {
		out = append(out, c.at(b-0.4), c.at(b+0.4))
	}
	return out
}

// warmUp is 1 ms of running early in each of the first five periods.
func warmUp() [][2]float64 {
	var rs [][2]float64
	for k := 0; k < 5; k++ {
		rs = append(rs, [2]float64{float64(100*k) + 10, float64(100*k) + 11})
	}
	return rs
}

// periodEnding is the period of ps that ends within 1 ms of end (ms).
func periodEnding(t *testing.T, ps []Period, end float64) Period {
	t.Helper()
	for _, p := range ps {
		if math.Abs(float64(p.EndNs)-end*float64(time.Millisecond)) <= float64(time.Millisecond) {
			return p
		}
	}
	t.Fatalf("no period ends at %v ms", end)
	return Period{}
}

// A group that overran its quota into debt (a CPU-bound thread is
// charged at the tick) stays throttled through the next refill, and the
// kernel books the whole stall when it lets the group go, a period after
// the one the stall began in. The later period stood still all along and
// ran nothing; the stall's first part and all of the usage belong to the
// period the group ran in:
//   - at its end (quota 2 ms, overran to 6.6 ms, 3.4 ms of stall), though
//     the readings around its end, 9.7 ms apart, saw the usage grow across
//     it;
//   - at its start, let go at the refill after a period throttled too
//     (quota 3 ms, overran to 6.7 ms, 93.3 ms of stall), though no
//     reading inside the period saw the usage grow, only the one that
//     spans its start (497.7 to 507.4 ms): read as stopped at the
//     period's end, the 193.3 ms came out as one period stopped on 2
//     CPUs, in a seventh of the periods of one busy thread under 0.03
//     CPU (cfsprobe run, 2026-11-29).
//
// The first period's nr_throttled may show a reading late (cpu.stat is
// read without the kernel's lock).
func TestTrackerStallThroughRefill(t *testing.T) {
	// The period before ran 3 ms and stood still from 403 ms to its end.
	stoodStill := counters{runs: append(warmUp()[:4], [2]float64{400, 403}), throttled: []float64{500}, booked: [][2]float64{{500.05, 97}}}
	for _, tc := range []struct {
		name    string
		earlier counters // what ran before the run
		run     [2]float64
		quota   time.Duration
		around  bool // read only 0.4 ms either side of each boundary
	}{
		{"ran at its end", counters{runs: warmUp()}, [2]float64{590, 596.6}, 2 * tms, false},
		{"ran at its start", stoodStill, [2]float64{500, 506.7}, 3 * tms, false},
		// No reading says when it stopped (the usage grew by 6 % of a
		// CPU between the readings inside the period): the throttled
		// time bounds the CPUs, between 193.3 ms over two periods and
		// over one.
		{"ran at its start, read around the boundaries", stoodStill, [2]float64{500.5, 506.7}, 3 * tms, true},
	} {
		for _, late := range []float64{0, 5} {
			t.Run(fmt.Sprintf("%s, nr_throttled %vms late", tc.name, late), func(t *testing.T) {
				stallThroughRefill(t, late, tc.earlier, tc.run, tc.quota, tc.around)
			})
		}
	}
}

func stallThroughRefill(t *testing.T, late float64, earlier counters, run [2]float64, quota time.Duration, around bool) {
	c := counters{
		runs:      append(slices.Clone(earlier.runs), run),
		periods:   8,
		throttled: append(slices.Clone(earlier.throttled), 600+late, 700),
		booked:    append(slices.Clone(earlier.booked), [2]float64{700.05, 700 - run[1]}), // from the run's end to 700 ms
	}
	samples := c.read(850)
	if around {
		samples = c.readAround(850)
	}
	ps := track(samples, quota, 100*tms, 2)
	ms := float64(time.Millisecond)
	p, q := periodEnding(t, ps, 600), periodEnding(t, ps, 700)
	if used, stall := run[1]-run[0], 600-run[1]; !p.Throttled || math.Abs(float64(p.UsageNs)/ms-used) > 0.05 || math.Abs(float64(p.ThrottledNs)/ms-stall) > 0.5 || p.StoppedCPUs != 1 {
		t.Errorf("the period the group ran in: throttled %v, usage %v, throttled time %v on %d CPUs; want true, %vms, %vms on 1",
			p.Throttled, time.Duration(p.UsageNs), time.Duration(p.ThrottledNs), p.StoppedCPUs, used, stall)
	}
	if !q.Throttled || q.UsageNs != 0 || math.Abs(float64(q.ThrottledNs)/ms-100) > 0.5 || q.StoppedCPUs != 1 {
		t.Errorf("the period it stood still through: throttled %v, usage %v, throttled time %v on %d CPUs; want true, 0, 100ms on 1",
			q.Throttled, time.Duration(q.UsageNs), time.Duration(q.ThrottledNs), q.StoppedCPUs)
	}
	if d := q.DemandCPUs(1); math.Abs(d-1) > 0.02 {
		t.Errorf("the period it stood still through: demand %.2f CPUs, want 1 (busy all along)", d)
	}
	var used int64
	for _, p := range ps {
		used += p.UsageNs
	}
	if want := samples[len(samples)-1].UsageNs - samples[0].UsageNs; used != want {
		t.Errorf("the periods used %v in all, want the %v the readings saw", time.Duration(used), time.Duration(want))
	}
}

// A group that slept through the last two readings before a boundary
// (585 and 594.7 ms), then ran 2.5 ms and was throttled until the
// boundary: its usage did not grow between those readings because it
// slept, not because it stood still, and the throttled time (2.5 ms,
// less than the 5.3 ms from the last reading to the boundary) says so.
// What it used after that reading is shared over the boundary as the
// readings place it (2.7 ms grew until 604.4 ms, 5.3 / 9.7 of it before
// the boundary), not all given to the next period.
func TestTrackerIdleBeforeThrottle(t *testing.T) {
	c := counters{
		runs:      append(warmUp(), [2]float64{595, 597.5}, [2]float64{600, 600.2}),
		periods:   8,
		throttled: []float64{600},
		booked:    [][2]float64{{600.05, 2.5}},
	}
	ps := track(c.read(850), 2*tms, 100*tms, 2)
	p := periodEnding(t, ps, 600)
	if !p.Throttled || p.UsageNs < int64(1400*time.Microsecond) {
		t.Errorf("the period the group ran in: throttled %v, usage %v; want true, the 1.47ms of the 2.5ms it used that the readings place before its end", p.Throttled, time.Duration(p.UsageNs))
	}
}

// BoundaryAfter says nothing before the readings agree where the grid
// is, and then the first boundary after a time, on the group's grid
// give or take the width it is known to.
func TestBoundaryAfter(t *testing.T) {
	g := tracetest.Group{Period: 100 * tms, Phase: 37 * tms, CPUs: 1,
		Usage: tracetest.Const(5 * tms), Throttled: tracetest.Never}
	tr := NewTracker(TrackerConfig{Period: g.Period, Quota: 20 * tms})
	if _, ok := tr.BoundaryAfter(0); ok {
		t.Fatal("a boundary before any reading")
	}
	for _, s := range g.Samples(0, 30, true, 1) {
		tr.Add(s, func(Period) {})
	}
	_, half, ok := tr.Phase()
	if !ok {
		t.Fatal("no phase after 30 periods")
	}
	p := int64(g.Period)
	for _, x := range []int64{0, int64(37 * tms), int64(37*tms) + 1, 1234567891} {
		b, ok := tr.BoundaryAfter(x)
		off := (b - int64(g.Phase)) % p // from the grid point before it
		if !ok || b <= x || b-x > p || min(off, p-off) > half {
			t.Errorf("BoundaryAfter(%d) = %d, %v; want the first after it, within %d of %v + k*%v", x, b, ok, half, g.Phase, g.Period)
		}
	}
}
