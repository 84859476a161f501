package fleet

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cfsprobe/cfsprobe/internal/sim"
	"github.com/cfsprobe/cfsprobe/internal/trace"
)

// histogramOf is the histogram of values in the exporter's demand buckets.
func histogramOf(bounds []float64, values ...float64) Histogram {
	h := Histogram{}
	for _, b := range append(bounds, math.Inf(1)) {
		n := 0.0
		for _, v := range values {
			if v <= b {
				n++
			}
		}
		h.add(b, n)
	}
	for _, v := range values {
		h.Sum += v
	}
	h.Count = float64(len(values))
	return h
}

var r10 = []float64{0.01, 0.0125, 0.016, 0.02, 0.025, 0.0315, 0.04, 0.05, 0.063, 0.08, 0.1, 0.125, 0.16, 0.2, 0.25, 0.315, 0.4, 0.5, 0.63, 0.8, 1, 1.25, 1.6, 2, 2.5, 3.15, 4}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// A group whose every period wants 0.7 CPU on the 2 CPUs the kernel
// stops (it pauses: not busy all along, trace.Period.Missed), under a
// quota of 0.5 on 2 CPUs, half its periods active: the synthetic trace's
// periods want 0.7 CPU on average (the histogram's sum), each within
// 0.7's bucket, each a throttled period that used the quota, half the
// periods of its window.
func TestSynthesizeBusyUnderTightQuota(t *testing.T) {
	s := Series{
		Key: Key{Cgroup: "/tight"}, Window: 1000 * time.Second, End: time.Unix(0, 0),
		QuotaCPUs: 0.5, PeriodSeconds: 0.1, Host: trace.Host{CPUs: 2},
		Periods: 5000, Demand: histogramOf(r10, repeat(0.7, 5000)...),
		Stopped: histogramOf([]float64{1, 2, 3, 4}, repeat(2, 5000)...),
	}
	tr, mu, err := Synthesize(s, SynthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mu != nil {
		t.Errorf("minute usage %v without minutes", mu)
	}
	if len(tr.Periods) != DefaultMaxPeriods {
		t.Fatalf("%d periods, want %d", len(tr.Periods), DefaultMaxPeriods)
	}
	sum := 0.0
	for i, p := range tr.Periods {
		d := p.DemandCPUs(2)
		if d < 0.63-1e-6 || d > 0.8+1e-6 || !p.Throttled || p.UsageNs != 50e6 || p.StoppedCPUs != 2 {
			t.Fatalf("period %d: demand %v CPUs, throttled %v, usage %d, stopped %d; want within the bucket (0.63, 0.8], true, 50ms, 2", i, d, p.Throttled, p.UsageNs, p.StoppedCPUs)
		}
		sum += d
	}
	if mean := sum / float64(len(tr.Periods)); math.Abs(mean-0.7) > 1e-3 {
		t.Errorf("mean demand %v CPUs, want 0.7 (the histogram's sum / count)", mean)
	}
	if end := tr.Periods[len(tr.Periods)-1].EndNs; end < int64(199*time.Second) || end > int64(201*time.Second) {
		t.Errorf("the window ends at %v, want 200s (1,000 periods, half of them active)", time.Duration(end))
	}
}

// Four threads that want 1.6 CPU in one period of ten and little in the
// others, under a loose quota of 3 CPUs, never throttled: the large
// periods come back at their share and spread over the window, within
// the quota, on ceil(1.6) = 2 CPUs (what replay reads of an unthrottled
// trace).
func TestSynthesizeBurstsSpread(t *testing.T) {
	var v []float64
	for i := range 1000 {
		if i%10 == 0 {
			v = append(v, 1.6)
		} else {
			v = append(v, 0.02)
		}
	}
	s := Series{Key: Key{Cgroup: "/loose"}, Window: 100 * time.Second, QuotaCPUs: 3, PeriodSeconds: 0.1,
		Host: trace.Host{CPUs: 4}, Periods: 1000, Demand: histogramOf(r10, v...), Stopped: histogramOf([]float64{1, 2})}
	tr, _, err := Synthesize(s, SynthOptions{MaxPeriods: 500})
	if err != nil {
		t.Fatal(err)
	}
	big, gap, last := 0, 0, -1
	for i, p := range tr.Periods {
		if p.Throttled {
			t.Fatalf("period %d throttled under a loose quota", i)
		}
		if p.DemandCPUs(0) > 1 {
			big++
			if last >= 0 {
				gap = max(gap, i-last)
			}
			last = i
		}
	}
	if big != 50 {
		t.Errorf("%d large periods of 500, want 50", big)
	}
	if gap > 20 {
		t.Errorf("large periods up to %d apart, want them spread (about 10)", gap)
	}
	if !strings.Contains(tr.Spec.Synthetic, "on 2 CPUs") {
		t.Errorf("synthetic %q: want parallelism 2", tr.Spec.Synthetic)
	}
}

// The same periods, where the group's heavy periods came in twos (as
// cfsprobe_period_pair_demand_cpus says: one pair of means 1.6 in every
// 20): the synthetic trace lays most of its heavy periods out in twos
// too, where without the pairs it spreads them one by one (above); and
// the same series give the same trace.
func TestSynthesizePairsTogether(t *testing.T) {
	var v []float64
	for i := range 1000 {
		if i%20 < 2 {
			v = append(v, 1.6)
		} else {
			v = append(v, 0.02)
		}
	}
	var pairs []float64
	for i := 1; i < len(v); i++ {
		pairs = append(pairs, (v[i-1]+v[i])/2)
	}
	s := Series{Key: Key{Cgroup: "/pairs"}, Window: 100 * time.Second, QuotaCPUs: 3, PeriodSeconds: 0.1,
		Host: trace.Host{CPUs: 4}, Periods: 1000, Demand: histogramOf(r10, v...), Pairs: histogramOf(r10, pairs...),
		Stopped: histogramOf([]float64{1, 2})}
	together := func(tr *trace.Trace) (big, twos int) {
		for i, p := range tr.Periods {
			if p.DemandCPUs(0) > 1 {
				big++
				if i > 0 && tr.Periods[i-1].DemandCPUs(0) > 1 {
					twos++
				}
			}
		}
		return big, twos
	}
	tr, _, err := Synthesize(s, SynthOptions{MaxPeriods: 500})
	if err != nil {
		t.Fatal(err)
	}
	if big, twos := together(tr); big != 50 || twos < 20 || twos > 25 {
		t.Errorf("%d large periods of 500, %d of them right after another: want 50, and about 25 after another (the group's one in two)", big, twos)
	}
	again, _, _ := Synthesize(s, SynthOptions{MaxPeriods: 500})
	if !slices.Equal(tr.Periods, again.Periods) {
		t.Error("the same series gave two traces")
	}
	s.Pairs = Histogram{}
	spread, _, _ := Synthesize(s, SynthOptions{MaxPeriods: 500})
	if _, twos := together(spread); twos != 0 {
		t.Errorf("without the pairs' histogram %d large periods right after another, want them spread", twos)
	}
}

func TestSynthesizeNoPeriods(t *testing.T) {
	_, _, err := Synthesize(Series{Demand: histogramOf(r10)}, SynthOptions{})
	if err != ErrNoDemand {
		t.Errorf("err %v, want ErrNoDemand", err)
	}
}

// The minute averages keep the quantiles they were read from.
func TestMinuteUsageQuantiles(t *testing.T) {
	q := map[float64]float64{0: 0.1, 0.5: 0.2, 0.9: 0.4, 0.95: 0.5, 1: 1}
	mu := minuteUsage(q, 10080, 100)
	if len(mu) != 100 {
		t.Fatalf("%d values, want 100", len(mu))
	}
	if mu[49] > 0.2 || mu[50] < 0.2 || mu[94] > 0.5 || mu[95] < 0.5 {
		t.Errorf("values around the median %v %v and p95 %v %v", mu[49], mu[50], mu[94], mu[95])
	}
	if got := minuteUsage(q, 3, 100); len(got) != 3 {
		t.Errorf("%d values of 3 minutes", len(got))
	}
}

// Periods at a bucket's upper bound (10 ms of work in 100 ms: 0.1 CPU,
// the bound of (0.08, 0.1]) beside many small ones, and periods spread
// over a bucket: the quantiles within 10 % of the values' (the mean
// moves the values within their buckets only as far as one factor for
// all of them does).
func TestDemandQuantilesWithinBucket(t *testing.T) {
	var v []float64
	for i := range 1000 {
		switch {
		case i%10 == 0:
			v = append(v, 0.1)
		case i%10 < 4:
			v = append(v, 0.064+0.015*float64(i%7)/6) // 0.064 to 0.079
		default:
			v = append(v, 0.005)
		}
	}
	got := demandQuantiles(histogramOf(r10, v...), 1000)
	sorted := append([]float64(nil), v...)
	slices.Sort(sorted)
	slices.Sort(got)
	for _, q := range []float64{0.8, 0.95, 0.99} { // the median is in the first bucket, under 10 millicores
		want, g := sorted[int(q*1000)], got[int(q*1000)]
		t.Logf("p%g %.4f, values' %.4f", 100*q, g, want)
		if math.Abs(g-want) > 0.1*want {
			t.Errorf("p%g %.4f, want %.4f", 100*q, g, want)
		}
	}
}

// A group active in a quarter of the elapsed periods: its synthetic
// periods lie end to end with the periods the kernel did not count as one
// idle stretch, so that the window is as long as the real one and a
// simulated kernel counts as many periods as the real one did (single idle
// periods between them would each be counted: a period timer stops only a
// period after the group went idle), which the throttled share of periods
// is taken over.
func TestSynthesizeIdleStretch(t *testing.T) {
	var v []float64
	for i := range 400 {
		v = append(v, 0.05+0.6*float64(i%5)/4) // 0.05 to 0.65
	}
	s := Series{Key: Key{Cgroup: "/quarter"}, Window: 160 * time.Second, QuotaCPUs: 0.5, PeriodSeconds: 0.1,
		Host: trace.Host{CPUs: 2, Kernel: "6.18.0"}, Periods: 400, Demand: histogramOf(r10, v...),
		Stopped: histogramOf([]float64{1, 2}, repeat(1, 80)...)}
	tr, _, err := Synthesize(s, SynthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if end := time.Duration(tr.Periods[len(tr.Periods)-1].EndNs); end != 160*time.Second {
		t.Errorf("the window ends at %v, want 160s", end)
	}
	gaps := 0
	for i := 1; i < len(tr.Periods); i++ {
		if tr.Periods[i].StartNs != tr.Periods[i-1].EndNs {
			gaps++
		}
	}
	if gaps != 1 {
		t.Errorf("%d gaps between the periods, want one idle stretch", gaps)
	}
	threads, _, err := sim.Replay(tr, sim.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(sim.Config{Era: sim.Era6_18, CPUs: 2, Limits: tr.Limits.Cgroup(), Seed: 1}, threads)
	if err != nil {
		t.Fatal(err)
	}
	out := sim.NewTrace(sim.TraceInfo{Spec: trace.Spec{Workload: "replay"}, Limits: tr.Limits.Cgroup()}, res)
	if n := out.Summary.NrPeriods; n < 400 || n > 410 {
		t.Errorf("the simulated kernel counted %d periods, want about the 400 the real one did", n)
	}
}

// A closed loop as the exporter counts it: 60 throttled periods of 0.4
// CPU under 0.2, in 20 stretches of which 19 caught up, among 400 periods
// of 0.05 and 20 catch-ups of 0.1. The synthetic trace says so
// (Spec.Stretches), replay reads it as closed, and its throttled periods
// come in 20 stretches of 3, each followed by a catch-up. Without the
// counters (an older exporter) it is timed, its throttled periods spread.
func TestSynthesizeClosedLoopInStretches(t *testing.T) {
	v := append(append(repeat(0.05, 400), repeat(0.1, 20)...), repeat(0.4, 60)...)
	s := Series{Key: Key{Cgroup: "/closed"}, Window: 48 * time.Second, QuotaCPUs: 0.2, PeriodSeconds: 0.1,
		Host: trace.Host{CPUs: 2}, Periods: 480, Demand: histogramOf(r10, v...),
		Stopped:   histogramOf([]float64{1, 2}, repeat(2, 60)...),
		Stretches: &trace.Stretches{Ended: 20, CaughtUp: 19}}
	runsOf := func(tr *trace.Trace) (runs, caught int) {
		ps := tr.Periods
		for i, p := range ps {
			if p.Throttled && (i == 0 || !ps[i-1].Throttled) {
				runs++
			}
			if i > 0 && ps[i-1].Throttled && !p.Throttled && p.UsageNs >= int64(time.Duration(0.1*float64(tr.Limits.Cgroup().Quota))) {
				caught++
			}
		}
		return runs, caught
	}
	tr, _, err := Synthesize(s, SynthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := tr.Spec.Stretches; st == nil || st.Ended != 20 || st.CaughtUp != 19 {
		t.Errorf("spec.stretches %+v, want 20 ended, 19 caught up", st)
	}
	if d, from := sim.TraceDemand(tr.Spec); d != sim.DemandClosed {
		t.Errorf("replayed as %s (%s), want closed", d, from)
	}
	if runs, caught := runsOf(tr); runs != 20 || caught != 20 {
		t.Errorf("%d throttled stretches, %d followed by a catch-up, want 20 and 20", runs, caught)
	}
	s.Stretches = nil
	tr, _, err = Synthesize(s, SynthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := sim.TraceDemand(tr.Spec); tr.Spec.Stretches != nil || d != sim.DemandTimed {
		t.Errorf("without the stretch counters: spec.stretches %+v, replayed as %s, want none and timed", tr.Spec.Stretches, d)
	}
	if runs, _ := runsOf(tr); runs < 50 {
		t.Errorf("without the stretch counters: %d throttled stretches, want the 60 periods spread (at least 50)", runs)
	}
}

// A closed loop whose stretches alternate a long stall (1 CPU of demand,
// stopped until the refill) with a short one (0.06 CPU under 0.05): 50
// stretches of 10 throttled periods, each followed by a catch-up. Laid out
// largest first, each stretch's 5 long stalls come side by side; with the
// group's pairs, one at a time as the group's did, the stretches and
// their catch-ups where they were.
func TestSynthesizeClosedLoopPairs(t *testing.T) {
	var v []float64
	for range 50 {
		for range 5 {
			v = append(v, 1, 0.06)
		}
		v = append(v, 0.04)
		v = append(v, repeat(0.01, 9)...)
	}
	var pairs []float64
	for i := 1; i < len(v); i++ {
		pairs = append(pairs, (v[i-1]+v[i])/2)
	}
	s := Series{Key: Key{Cgroup: "/closed-pairs"}, Window: 100 * time.Second, QuotaCPUs: 0.05, PeriodSeconds: 0.1,
		Host: trace.Host{CPUs: 2}, Periods: 1000, Demand: histogramOf(r10, v...), Pairs: histogramOf(r10, pairs...),
		Stopped:   histogramOf([]float64{1, 2}, repeat(1, 500)...),
		Stretches: &trace.Stretches{Ended: 50, CaughtUp: 50}}
	shape := func(tr *trace.Trace) (runs, long, together int) {
		ps := tr.Periods
		for i, p := range ps {
			if p.Throttled && (i == 0 || !ps[i-1].Throttled) {
				runs++
			}
			if p.StallNs > int64(50*time.Millisecond) {
				long++
				if i > 0 && ps[i-1].StallNs > int64(50*time.Millisecond) {
					together++
				}
			}
		}
		return runs, long, together
	}
	tr, _, err := Synthesize(s, SynthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runs, long, together := shape(tr)
	t.Logf("with the pairs: %d stretches, %d long stalls, %d right after another", runs, long, together)
	if runs != 50 || long != 250 || together > 25 {
		t.Errorf("%d throttled stretches, %d long stalls, %d of them right after another: want 50, 250, and at most 25 (the group's: none)", runs, long, together)
	}
	s.Pairs = Histogram{}
	tr, _, err = Synthesize(s, SynthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runs, long, together = shape(tr)
	t.Logf("without: %d stretches, %d long stalls, %d right after another", runs, long, together)
	if runs != 50 || long != 250 || together < 150 {
		t.Errorf("without the pairs: %d throttled stretches, %d long stalls, %d of them right after another: want 50, 250, and each stretch's largest first (at least 150)", runs, long, together)
	}
}

// A group stopped on 1 CPU in 90 of its 100 throttled periods, busy all
// along (1 CPU, in the bucket (0.8, 1]), and on 2 CPUs in 10 (2 CPUs):
// the synthetic throttled periods are stopped on 1 CPU at exactly 1 CPU
// of demand, 95 ms of stall under 0.05 CPU, and on 2 at 2; the parallelism
// is 2.
func TestSynthesizeStoppedCPUsByPeriod(t *testing.T) {
	v := append(append(repeat(0.03, 100), repeat(1, 90)...), repeat(2, 10)...)
	s := Series{Key: Key{Cgroup: "/one"}, Window: 20 * time.Second, QuotaCPUs: 0.05, PeriodSeconds: 0.1,
		Host: trace.Host{CPUs: 2}, Periods: 200, Demand: histogramOf(r10, v...),
		Stopped: histogramOf([]float64{1, 2, 3, 4}, append(repeat(1, 90), repeat(2, 10)...)...)}
	tr, _, err := Synthesize(s, SynthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	by := map[int][]trace.Period{}
	for _, p := range tr.Periods {
		if p.Throttled {
			by[p.StoppedCPUs] = append(by[p.StoppedCPUs], p)
		}
	}
	if len(by[1]) != 90 || len(by[2]) != 10 || len(by) != 2 {
		t.Fatalf("throttled periods by stopped CPUs: %d on 1, %d on 2, %d counts; want 90, 10, 2", len(by[1]), len(by[2]), len(by))
	}
	for c, ps := range by {
		for _, p := range ps {
			if d := p.DemandCPUs(2); math.Abs(d-float64(c)) > 1e-6 {
				t.Fatalf("a period stopped on %d CPUs wants %.3f CPUs, want %d", c, d, c)
			}
		}
	}
	if st := time.Duration(by[1][0].StallNs); st != 95*time.Millisecond {
		t.Errorf("a period stopped on 1 CPU stood still %v, want 95ms (it ran the quota, 5 ms, on it)", st)
	}
	if _, from := sim.TraceDemand(tr.Spec); from != "synthetic" {
		t.Errorf("replay reads it from %q", from)
	}
}
