package monitor

import (
	"math/rand/v2"
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

// focusRun feeds a tracker with the readings of simulated group g that
// the Sampler's passes (every period/10, give or take a fifth) take: all
// until the grid is pinned, then those of the focus plan. It returns the
// periods and how many readings were taken, and how many passes ran.
func focusRun(g tracetest.Group, lim cgroup.Limits, end time.Duration, seed uint64) (ps []trace.Period, reads, passes int) {
	r := rand.New(rand.NewPCG(seed, 3))
	sg := &sampled{target: Target{Limits: lim}, tracker: trace.NewTracker(trace.TrackerConfig{Period: lim.Period, Quota: lim.Quota, CPUs: 2}), reading: -1}
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
		if st.NrThrottled != sg.last.NrThrottled {
			sg.throttled = now
		}
		sg.last, sg.haveLast = cgroup.Stat{UsageNs: st.UsageNs, NrPeriods: st.NrPeriods, NrThrottled: st.NrThrottled, ThrottledNs: st.ThrottledNs}, true
		sg.tracker.Add(st, emit)
		sg.due = now + period/10
		sg.focus(now, period)
	}
	sg.tracker.Flush(emit)
	return ps, reads, passes
}

// Once a group's grid is pinned it is read in the last pass before each
// boundary and the first after it, and half-way when it was throttled
// lately: two or three readings per period instead of ten, and its
// periods come out as exactly as with all ten.
func TestFocus(t *testing.T) {
	for _, tc := range []struct {
		name      string
		g         tracetest.Group
		perPeriod float64 // readings, once pinned
	}{
		{"throttled at the quota", tracetest.Group{
			Period: 100 * ms, Phase: 61 * ms, CPUs: 1,
			Usage: tracetest.Const(20 * ms), Throttled: tracetest.Always, ThrottledTime: tracetest.Const(80 * ms),
		}, 3},
		{"never throttled", tracetest.Group{
			Period: 100 * ms, Phase: 17 * ms, CPUs: 1, Spread: true,
			Usage: tracetest.Const(5 * ms), Throttled: tracetest.Never, ThrottledTime: tracetest.Const(0),
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := cgroup.Limits{Quota: 20 * ms, Period: tc.g.Period}
			ps, reads, passes := focusRun(tc.g, lim, 10*time.Second, 1)
			if len(ps) < 90 {
				t.Fatalf("%d periods in 10 s, want about 100", len(ps))
			}
			// About ten periods to pin the grid, then the plan's readings.
			if want := 10*10 + 90*tc.perPeriod; float64(reads) > 1.15*want || float64(reads) < 0.85*want {
				t.Errorf("%d readings in %d passes, want about %.0f", reads, passes, want)
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
