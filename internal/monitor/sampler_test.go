package monitor

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
	"github.com/cfsprobe/cfsprobe/internal/trace/tracetest"
)

func TestHistogramObserve(t *testing.T) {
	h := newHistogram([]float64{0.5, 1})
	for _, v := range []float64{0, 0.5, 0.6, 1, 1.5, 2} {
		h.Observe(v)
	}
	if want := []uint64{2, 2, 2}; h.Counts[0] != want[0] || h.Counts[1] != want[1] || h.Counts[2] != want[2] || h.Count != 6 || h.Sum != 5.6 {
		t.Errorf("histogram %+v, want counts %v, 6 observations summing to 5.6", h, want)
	}
}

// The pairs' histogram counts the mean demand of each period seen closely
// and the one that ended where it starts: not across a blurred period or
// a gap (the kernel did not count the periods between).
func TestPeriodHistogramsPairs(t *testing.T) {
	b := []float64{0.1, 0.5, 1}
	h := NewPeriodHistograms(b, b, b, b)
	const period = int64(100 * time.Millisecond)
	quota := 50 * time.Millisecond
	at := func(k int64, usage time.Duration, blurred bool) trace.Period {
		return trace.Period{StartNs: k * period, EndNs: (k + 1) * period, UsageNs: int64(usage), Blurred: blurred}
	}
	for _, p := range []trace.Period{
		at(0, 10*time.Millisecond, false), // 0.1 CPUs
		at(1, 90*time.Millisecond, false), // 0.9: pair 0.5
		at(2, 90*time.Millisecond, false), // 0.9: pair 0.9
		at(3, 0, true),                    // blurred: no pair with it
		at(4, 90*time.Millisecond, false), // after a blurred one: none
		at(7, 90*time.Millisecond, false), // after a gap: none
		at(8, 10*time.Millisecond, false), // pair 0.5
	} {
		h.Observe(p, quota, 2)
	}
	if want := []uint64{0, 2, 1, 0}; !slices.Equal(h.Pairs.Counts, want) || h.Pairs.Count != 3 || math.Abs(h.Pairs.Sum-1.9) > 1e-9 {
		t.Errorf("pairs %+v, want counts %v, 3 pairs summing to 1.9", h.Pairs, want)
	}
	if h.Demand.Count != 6 {
		t.Errorf("demand counted %d periods, want the 6 seen closely", h.Demand.Count)
	}
}

// focusRun feeds a tracker with the readings of simulated group g (on
// cgroup v1) that the Sampler's passes (every period/10, give or take a
// fifth) take: all until the grid is pinned, then those of the focus
// plan, of the usage alone where the Sampler reads that alone. It
// returns the periods, how many readings were taken, how many of them
// read cpu.stat, how many readings before a boundary that read the usage
// alone missed something new in it, and how many passes ran.
func focusRun(g tracetest.Group, lim cgroup.Limits, end time.Duration, seed uint64) (ps []trace.Period, reads, stats, missed, passes int) {
	r := rand.New(rand.NewPCG(seed, 3))
	sg := &sampled{target: Target{Limits: lim}, files: counters{version: 1}, tracker: trace.NewTracker(trace.TrackerConfig{Period: lim.Period, Quota: lim.Quota, CPUs: 2}), reading: -1}
	emit := func(p trace.Period) { ps = append(ps, p) }
	period := int64(lim.Period)
	gap := period / 10
	for now := int64(0); now < int64(end); now += gap {
		passes++
		gap = int64(float64(period/10) * (0.8 + 0.4*r.Float64()))
		if !sg.wants(now, gap) {
			continue
		}
		reads++
		st := g.At(time.Duration(now))
		if sg.usageOnly(now) {
			if sg.reading == stagePre && (st.NrPeriods != sg.last.NrPeriods || st.NrThrottled != sg.last.NrThrottled || st.ThrottledNs != sg.last.ThrottledNs) {
				missed++ // cpu.stat had something new, and no reading before the boundary reads it
			}
			st = trace.SampleOf(now, cgroup.Stat{UsageNs: st.UsageNs, NrPeriods: sg.last.NrPeriods, NrThrottled: sg.last.NrThrottled, ThrottledNs: sg.last.ThrottledNs})
		} else {
			stats++
			sg.settled = sg.reading == stagePost
		}
		if st.NrThrottled != sg.last.NrThrottled {
			sg.throttled = now
		}
		sg.last, sg.haveLast = cgroup.Stat{UsageNs: st.UsageNs, NrPeriods: st.NrPeriods, NrThrottled: st.NrThrottled, ThrottledNs: st.ThrottledNs}, true
		sg.tracker.Add(st, emit)
		sg.due = now + period/10
		sg.focus(now, period)
	}
	sg.tracker.Flush(emit)
	return ps, reads, stats, missed, passes
}

// Once a group's grid is pinned it is read in the last pass before each
// boundary and the first after it, and half-way when it was throttled
// lately: two or three readings per period instead of ten, and its
// periods come out as exactly as with all ten. Of these only the one
// after the boundary reads cpu.stat, the throttled time that other CPUs
// count a little late included.
func TestFocus(t *testing.T) {
	for _, tc := range []struct {
		name             string
		g                tracetest.Group
		perPeriod, stats float64 // readings, and of cpu.stat, once pinned
	}{
		{"throttled at the quota", tracetest.Group{
			Period: 100 * ms, Phase: 61 * ms, CPUs: 1,
			Usage: tracetest.Const(20 * ms), Throttled: tracetest.Always, ThrottledTime: tracetest.Const(80 * ms),
		}, 3, 1},
		{"throttled, counted late", tracetest.Group{
			Period: 100 * ms, Phase: 61 * ms, CPUs: 1, ThrLag: 1 * ms,
			Usage: tracetest.Const(20 * ms), Throttled: tracetest.Always, ThrottledTime: tracetest.Const(80 * ms),
		}, 3, 1},
		{"never throttled", tracetest.Group{
			Period: 100 * ms, Phase: 17 * ms, CPUs: 1, Spread: true,
			Usage: tracetest.Const(5 * ms), Throttled: tracetest.Never, ThrottledTime: tracetest.Const(0),
		}, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := cgroup.Limits{Quota: 20 * ms, Period: tc.g.Period}
			ps, reads, stats, missed, passes := focusRun(tc.g, lim, 10*time.Second, 1)
			if len(ps) < 90 {
				t.Fatalf("%d periods in 10 s, want about 100", len(ps))
			}
			if missed > 0 {
				t.Errorf("%d readings of the usage alone before a boundary missed what cpu.stat had", missed)
			}
			// About ten periods to pin the grid, then the plan's readings.
			if want := 10*10 + 90*tc.perPeriod; float64(reads) > 1.15*want || float64(reads) < 0.85*want {
				t.Errorf("%d readings in %d passes, want about %.0f", reads, passes, want)
			}
			if want := 10*10 + 90*tc.stats; float64(stats) > 1.15*want || float64(stats) < 0.85*want {
				t.Errorf("%d readings of cpu.stat of %d, want about %.0f", stats, reads, want)
			}
			s := tracetest.Summarize(ps[15:], lim.Quota) // the grid is pinned after ten to fifteen
			wantRatio := tc.g.Usage(0).Seconds() / lim.Quota.Seconds()
			if s.MinRatio < wantRatio-0.05 || s.MaxRatio > wantRatio+0.05 || s.Under != 0 {
				t.Errorf("usage ratio %.2f to %.2f (want %.2f), %d under quota", s.MinRatio, s.MaxRatio, wantRatio, s.Under)
			}
			if tc.g.Throttled(0) && (s.Throttled != s.Periods || s.MinStall < 75*ms || s.MaxStall > 85*ms) {
				t.Errorf("%d of %d periods throttled, stalls %v to %v, want all, 80ms", s.Throttled, s.Periods, s.MinStall, s.MaxStall)
			}
		})
	}
}

// A running group's reading is of its usage alone (cpuacct.usage) half-way
// between boundaries, and before a boundary when it follows the reading
// after the last one and the boundary cannot have come; else, and on
// cgroup v2 (the usage is in cpu.stat), cpu.stat is read.
func TestUsageOnly(t *testing.T) {
	const period = 100 * ms
	b, half := 10*period+40*ms, 300*time.Microsecond // the next boundary
	for _, tc := range []struct {
		name    string
		version int
		reading int
		at      time.Duration // before b
		settled bool          // cpu.stat was last read after the last boundary
		want    bool
	}{
		{"half-way", 1, stageMid, 50 * ms, true, true},
		{"before the boundary", 1, stagePre, 15 * ms, true, true},
		{"before the boundary, cpu.stat last read before the last one", 1, stagePre, 15 * ms, false, false},
		{"at the boundary's uncertainty", 1, stagePre, half + 100*time.Microsecond, true, false},
		{"after the boundary", 1, stagePre, -2 * ms, true, false},
		{"after a boundary", 1, stagePost, -5 * ms, true, false},
		{"v2", 2, stagePre, 15 * ms, true, false},
	} {
		g := &sampled{target: Target{Limits: cgroup.Limits{Quota: 20 * ms, Period: period}}, files: counters{version: tc.version},
			haveLast: true, pinned: true, b: int64(b), half: int64(half), reading: tc.reading, settled: tc.settled}
		if got := g.usageOnly(int64(b - tc.at)); got != tc.want {
			t.Errorf("%s: usage alone %v, want %v", tc.name, got, tc.want)
		}
	}
}
