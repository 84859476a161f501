package trace_test

import (
	"math"
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
