package monitor

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/cgroup"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// simGroup is a kernel's view of one group, for synthetic samples: its
// period timer fires at phase + k*period; in every period the group runs
// on cpus CPUs from the period's start until it has used usage(k), and
// the boundary that ends period k counts it throttled (and adds its
// throttled time) when throttled(k).
type simGroup struct {
	period, phase time.Duration
	cpus          float64
	usage         func(k int) time.Duration
	throttled     func(k int) bool
	throttledTime func(k int) time.Duration // summed over CPUs
	// thrLag delays nr_throttled and throttled_time behind nr_periods at
	// each boundary: cpu.stat is read without the bandwidth lock.
	thrLag time.Duration
	// spread: the group uses usage(k) evenly over the period instead of
	// running from its start until done.
	spread bool
}

// at is the group's counters at t.
func (g simGroup) at(t time.Duration) trace.CounterSample {
	s := trace.CounterSample{T: int64(t)}
	if t < g.phase {
		return s
	}
	cur := int((t - g.phase) / g.period) // the running period
	for k := 0; k <= cur; k++ {
		start := g.phase + time.Duration(k)*g.period
		u := g.usage(k)
		if k < cur {
			s.UsageNs += int64(u)
			s.NrPeriods++
			if g.throttled(k) && t >= start+g.period+g.thrLag {
				s.NrThrottled++
				s.ThrottledNs += int64(g.throttledTime(k))
			}
			continue
		}
		if g.spread {
			s.UsageNs += int64(u) * int64(t-start) / int64(g.period)
			continue
		}
		s.UsageNs += int64(min(u, time.Duration(g.cpus*float64(t-start))))
	}
	return s
}

// samples reads g for n periods from off, as the Sampler does: every
// period/10, each interval drawn from 0.8 to 1.2 times that (jitter
// true), so that the readings drift over every phase of the period.
func (g simGroup) samples(off time.Duration, n int, jitter bool, seed uint64) []trace.CounterSample {
	r := rand.New(rand.NewPCG(seed, 1))
	var out []trace.CounterSample
	step := g.period / 10
	for t := off; t < off+time.Duration(n)*g.period; {
		out = append(out, g.at(t))
		if jitter {
			t += time.Duration(float64(step) * (0.8 + 0.4*r.Float64()))
		} else {
			t += step
		}
	}
	return out
}

func always(int) bool { return true }

func constDur(d time.Duration) func(int) time.Duration { return func(int) time.Duration { return d } }

// summary is what the tests check of a run of periods.
type summary struct {
	periods, throttled, under int
	minRatio, maxRatio        float64
	minStall, maxStall        time.Duration
}

func summarize(ps []PeriodStat, quota time.Duration) summary {
	s := summary{minRatio: math.Inf(1), maxRatio: math.Inf(-1), minStall: time.Hour}
	for _, p := range ps {
		s.periods++
		r := p.UsageRatio(quota)
		s.minRatio, s.maxRatio = min(s.minRatio, r), max(s.maxRatio, r)
		if p.Throttled {
			s.throttled++
			s.minStall, s.maxStall = min(s.minStall, time.Duration(p.StallNs)), max(s.maxStall, time.Duration(p.StallNs))
		}
		if p.UnderQuota(quota) {
			s.under++
		}
	}
	return s
}

// A group throttled in every period while it used a quarter of its
// quota (the kernel defect cfsprobe check looks for) raises the
// under-quota count in every period; a group throttled at its quota, as a
// correct kernel throttles, never does. A group that does all its work
// right after each boundary blurs with the next period in the readings:
// the count, which judges by the most the readings allow, then sees a
// part of those periods only.
func TestPeriodsUnderQuota(t *testing.T) {
	const quota = 20 * ms
	for _, tc := range []struct {
		name      string
		g         simGroup
		wantUnder float64 // share of throttled periods
	}{
		{"kernel bug: throttled at a quarter of the quota", simGroup{
			period: 100 * ms, phase: 37 * ms, cpus: 1, spread: true,
			usage: constDur(5 * ms), throttled: always, throttledTime: constDur(3 * ms),
		}, 1},
		{"kernel bug: throttled at a quarter of the quota, used at the period's start", simGroup{
			period: 100 * ms, phase: 37 * ms, cpus: 1,
			usage: constDur(5 * ms), throttled: always, throttledTime: constDur(3 * ms),
		}, 0.5},
		{"throttled at the quota", simGroup{
			period: 100 * ms, phase: 37 * ms, cpus: 1,
			usage: constDur(quota), throttled: always, throttledTime: constDur(80 * ms),
		}, 0},
		{"throttled at the quota, counts read late", simGroup{
			period: 100 * ms, phase: 37 * ms, cpus: 1, thrLag: 3 * ms,
			usage: constDur(quota), throttled: always, throttledTime: constDur(80 * ms),
		}, 0},
		{"throttled at the quota on two CPUs", simGroup{
			period: 100 * ms, phase: 61 * ms, cpus: 2,
			usage: constDur(quota), throttled: always, throttledTime: constDur(180 * ms),
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(0); seed < 5; seed++ {
				samples := tc.g.samples(0, 50, true, seed)
				ps := Periods(samples, Limits{Quota: quota, Period: tc.g.period}, 2)
				s := summarize(ps, quota)
				kernelThr := int(samples[len(samples)-1].NrThrottled - samples[0].NrThrottled)
				// The first period starts before the readings: skipped.
				if s.periods < 47 || s.throttled < kernelThr-2 || s.throttled > kernelThr {
					t.Fatalf("seed %d: %d periods, %d throttled; want about 50, and %d throttled as the kernel counted", seed, s.periods, s.throttled, kernelThr)
				}
				if tc.wantUnder > 0 {
					if float64(s.under) < tc.wantUnder*float64(s.throttled) {
						t.Errorf("seed %d: %d of %d throttled periods under quota, want %.0f%% (usage ratio %.2f to %.2f)", seed, s.under, s.throttled, 100*tc.wantUnder, s.minRatio, s.maxRatio)
					}
					if s.maxRatio >= UnderQuotaRatio {
						t.Errorf("seed %d: usage ratio up to %.2f, want about 0.25", seed, s.maxRatio)
					}
					continue
				}
				if s.under != 0 {
					t.Errorf("seed %d: %d periods under quota, want none (usage ratio %.2f to %.2f)", seed, s.under, s.minRatio, s.maxRatio)
				}
				if s.maxRatio > 1.15 {
					t.Errorf("seed %d: usage ratio up to %.2f, want about 1", seed, s.maxRatio)
				}
			}
		})
	}
}

// Usage per period is the CPU the group used between two boundaries,
// whatever the sampling phase: a group that uses 5 ms in even periods and
// 15 ms in odd ones shows that, give or take what the rate change within
// one sampling interval blurs.
func TestPeriodsUsage(t *testing.T) {
	g := simGroup{
		period: 100 * ms, phase: 13 * ms, cpus: 1, spread: true,
		usage: func(k int) time.Duration {
			if k%2 == 0 {
				return 5 * ms
			}
			return 15 * ms
		},
		throttled: func(int) bool { return false }, throttledTime: constDur(0),
	}
	ps := Periods(g.samples(0, 40, true, 7), Limits{Quota: 20 * ms, Period: g.period}, 2)
	bad := 0
	for _, p := range ps[2:] { // the phase is learnt after a few periods
		k := int(math.Round(float64(time.Duration(p.EndNs)-g.phase)/float64(g.period))) - 1
		want := g.usage(k)
		if d := time.Duration(p.UsageNs) - want; d < -ms || d > ms {
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
// quota in 25 ms and wait 75 ms on four CPUs stall 75 ms; one thread
// under 0.2 CPUs of a 50 ms period stalls 40 ms.
func TestPeriodsStall(t *testing.T) {
	for _, tc := range []struct {
		name      string
		g         simGroup
		cpus      int
		want, tol time.Duration
	}{
		{"four threads, one CPU", simGroup{
			period: 100 * ms, phase: 20 * ms, cpus: 4,
			usage: constDur(100 * ms), throttled: always, throttledTime: constDur(300 * ms),
		}, 4, 75 * ms, 0},
		{"one thread, 0.2 CPUs", simGroup{
			period: 50 * ms, phase: 3 * ms, cpus: 1,
			usage: constDur(10 * ms), throttled: always, throttledTime: constDur(40 * ms),
		}, 2, 40 * ms, 0},
		{"four threads on a two-CPU node", simGroup{
			period: 100 * ms, phase: 20 * ms, cpus: 2,
			usage: constDur(100 * ms), throttled: always, throttledTime: constDur(100 * ms),
		}, 2, 50 * ms, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := Periods(tc.g.samples(0, 30, true, 3), Limits{Quota: tc.g.usage(0), Period: tc.g.period}, tc.cpus)
			s := summarize(ps, 100*ms)
			if s.throttled < 25 {
				t.Fatalf("%d throttled periods, want about 30", s.throttled)
			}
			for _, p := range ps[1:] {
				if d := time.Duration(p.StallNs) - tc.want; p.Throttled && (d < -tc.tol || d > tc.tol) {
					t.Errorf("period ending %v: stall %v (running on %d CPUs), want %v", time.Duration(p.EndNs), time.Duration(p.StallNs), p.RunningCPUs, tc.want)
				}
			}
		})
	}
}

// The tracker and trace.BuildTimeline, given the same samples, count the
// same throttled periods and the same CPU in them.
func TestPeriodsMatchBuildTimeline(t *testing.T) {
	g := simGroup{
		period: 100 * ms, phase: 44 * ms, cpus: 1.5,
		usage:         func(k int) time.Duration { return time.Duration(5+k%4*5) * ms },
		throttled:     func(k int) bool { return k%4 == 3 },
		throttledTime: constDur(50 * ms),
	}
	samples := g.samples(0, 60, true, 11)
	ours := Periods(samples, Limits{Quota: 20 * ms, Period: g.period}, 2)
	theirs := trace.BuildTimeline(samples, int64(g.period), true)
	if len(ours) < len(theirs)-2 || len(ours) > len(theirs) {
		t.Fatalf("%d periods, BuildTimeline %d (less the first, whose start came before the readings)", len(ours), len(theirs))
	}
	var ourThr, theirThr int
	var ourUse, theirUse int64
	j := 0
	for i, p := range ours {
		for j < len(theirs) && theirs[j].EndNs < p.EndNs-int64(g.period/2) {
			j++
		}
		if j == len(theirs) {
			t.Fatalf("period %d (ending %v) not in BuildTimeline's", i, time.Duration(p.EndNs))
		}
		q := theirs[j]
		if p.Throttled {
			ourThr++
		}
		if q.Throttled {
			theirThr++
		}
		ourUse += p.UsageNs
		theirUse += q.UsageNs
		if i >= 3 {
			if d := p.EndNs - q.EndNs; d < -int64(2*ms) || d > int64(2*ms) {
				t.Errorf("period %d ends at %v, BuildTimeline's at %v", i, time.Duration(p.EndNs), time.Duration(q.EndNs))
			}
		}
		if p.Throttled != q.Throttled {
			t.Errorf("period %d throttled %v, BuildTimeline's %v", i, p.Throttled, q.Throttled)
		}
	}
	if ourThr != theirThr || math.Abs(float64(ourUse-theirUse)) > float64(5*ms) {
		t.Errorf("throttled %d, usage %v; BuildTimeline: %d, %v", ourThr, time.Duration(ourUse), theirThr, time.Duration(theirUse))
	}
}

// Periods that went by while the sampler was starved (no reading for
// more than maxGap periods) are not attributed; counters that go back (a
// new group under the same path) start afresh; neither makes periods up.
func TestPeriodsGapsAndResets(t *testing.T) {
	g := simGroup{
		period: 100 * ms, phase: 5 * ms, cpus: 1,
		usage: constDur(20 * ms), throttled: always, throttledTime: constDur(80 * ms),
	}
	var samples []trace.CounterSample
	for _, s := range g.samples(0, 10, false, 0) {
		samples = append(samples, s)
	}
	for _, s := range g.samples(2*time.Second, 10, false, 0) { // a 1 s gap
		samples = append(samples, s)
	}
	ps := Periods(samples, Limits{Quota: 20 * ms, Period: g.period}, 2)
	if len(ps) < 17 || len(ps) > 20 {
		t.Errorf("%d periods over 2 s of readings with a 1 s gap, want 17 to 20", len(ps))
	}
	for _, p := range ps {
		if p.UnderQuota(20 * ms) {
			t.Errorf("period ending %v under quota (usage %v)", time.Duration(p.EndNs), time.Duration(p.UsageNs))
		}
	}

	// The group is recreated: its counters restart from zero.
	samples = g.samples(0, 10, false, 0)
	for _, s := range g.samples(0, 10, false, 0) {
		s.T += int64(2 * time.Second)
		samples = append(samples, s)
	}
	for _, p := range Periods(samples, Limits{Quota: 20 * ms, Period: g.period}, 2) {
		if p.UsageNs < 0 || p.UsageNs > int64(25*ms) {
			t.Errorf("period ending %v: usage %v after a reset", time.Duration(p.EndNs), time.Duration(p.UsageNs))
		}
	}
}

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
func focusRun(g simGroup, lim Limits, end time.Duration, seed uint64) (ps []PeriodStat, reads, passes int) {
	r := rand.New(rand.NewPCG(seed, 3))
	sg := &sampled{target: Target{Limits: lim}, tracker: NewPeriodTracker(lim, 2), reading: -1}
	emit := func(p PeriodStat) { ps = append(ps, p) }
	period := int64(lim.Period)
	gap := period / 10
	for now := int64(0); now < int64(end); now += gap {
		passes++
		gap = int64(float64(period/10) * (0.8 + 0.4*r.Float64()))
		if !sg.wants(now, gap) {
			continue
		}
		reads++
		st := g.at(time.Duration(now))
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
		g         simGroup
		perPeriod float64 // readings, once pinned
	}{
		{"throttled at the quota", simGroup{
			period: 100 * ms, phase: 61 * ms, cpus: 1,
			usage: constDur(20 * ms), throttled: always, throttledTime: constDur(80 * ms),
		}, 3},
		{"never throttled", simGroup{
			period: 100 * ms, phase: 17 * ms, cpus: 1, spread: true,
			usage: constDur(5 * ms), throttled: func(int) bool { return false }, throttledTime: constDur(0),
		}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := Limits{Quota: 20 * ms, Period: tc.g.period}
			ps, reads, passes := focusRun(tc.g, lim, 10*time.Second, 1)
			if len(ps) < 90 {
				t.Fatalf("%d periods in 10 s, want about 100", len(ps))
			}
			// About ten periods to pin the grid, then the plan's readings.
			if want := 10*10 + 90*tc.perPeriod; float64(reads) > 1.15*want || float64(reads) < 0.85*want {
				t.Errorf("%d readings in %d passes, want about %.0f", reads, passes, want)
			}
			s := summarize(ps[15:], lim.Quota) // the grid is pinned after ten to fifteen
			wantRatio := tc.g.usage(0).Seconds() / lim.Quota.Seconds()
			if s.minRatio < wantRatio-0.05 || s.maxRatio > wantRatio+0.05 || s.under != 0 {
				t.Errorf("usage ratio %.2f to %.2f (want %.2f), %d under quota", s.minRatio, s.maxRatio, wantRatio, s.under)
			}
			if tc.g.throttled(0) && (s.throttled != s.periods || s.minStall < 75*ms || s.maxStall > 85*ms) {
				t.Errorf("%d of %d periods throttled, stalls %v to %v, want all, 80ms", s.throttled, s.periods, s.minStall, s.maxStall)
			}
		})
	}
}

// A group with a quota below a scheduler tick overruns it (the kernel
// charges usage at ticks) and then stays throttled without running until
// the overrun is paid back: those periods are not under quota. A 1 ms
// quota, 4 ms run every fourth period, throttled in every one.
func TestPeriodsPayback(t *testing.T) {
	g := simGroup{
		period: 100 * ms, phase: 20 * ms, cpus: 1,
		usage: func(k int) time.Duration {
			if k%4 == 0 {
				return 4 * ms
			}
			return 0
		},
		throttled: always, throttledTime: func(k int) time.Duration {
			if k%4 == 0 {
				return 96 * ms
			}
			return 100 * ms
		},
	}
	lim := Limits{Quota: ms, Period: g.period}
	ps := Periods(g.samples(0, 40, true, 5), lim, 2)
	s := summarize(ps, lim.Quota)
	if s.periods < 35 || s.throttled != s.periods {
		t.Fatalf("%d periods, %d throttled", s.periods, s.throttled)
	}
	if s.under > 0 {
		t.Errorf("%d of %d periods paying back an overrun counted under quota", s.under, s.periods)
	}
	// Without the overrun before them they would be.
	for i := range ps {
		ps[i].DebtNs = 0
	}
	if s := summarize(ps, lim.Quota); s.under < 15 {
		t.Errorf("without the debt only %d periods under quota, want most of the ~30 that ran nothing", s.under)
	}
}
